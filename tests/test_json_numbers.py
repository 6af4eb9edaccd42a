"""JSON number texts with bounds and multipleOf: the DFA accepts a text exactly
when its decimal value (exact, by Fraction) satisfies the keywords and the text
is of a form the module documents as accepted; every member decodes to such a
value."""

import json
import re
from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import example, given, strategies as st

from constrained import ConstrainedError
from constrained.dfa import is_empty
from constrained.json_numbers import integer, number
from dfa_members import members

# The documented forms (see constrained/json_numbers.py), restated.
PLAIN = r"-?(0|[1-9][0-9]*)(\.[0-9]+)?"
ZERO_EXPONENT = r"-?0(\.0+)?[eE][+-]?[0-9]+"  # zero with any exponent, accepted under every keyword
MULTIPLE_FORMS = rf"{PLAIN}|{ZERO_EXPONENT}"
BOUNDED_FORMS = rf"{PLAIN}|-?[1-9](\.[0-9]+)?[eE][+-]?[0-9]+|{ZERO_EXPONENT}"
INTEGER_FORMS = rf"-?(0|[1-9][0-9]*)(\.0+)?([eE]\+?[0-9]+)?|{ZERO_EXPONENT}"

_digits = st.text("0123456789", min_size=1, max_size=4)
_whole = st.one_of(st.just("0"), st.from_regex("[1-9][0-9]{0,4}", fullmatch=True))
_exponent = st.from_regex("[eE][+-]?[0-9]{1,2}", fullmatch=True)
number_texts = st.one_of(
    st.tuples(
        st.sampled_from(["", "-"]),
        _whole,
        st.one_of(st.just(""), _digits.map(lambda d: "." + d)),
        st.one_of(st.just(""), _exponent),
    ).map("".join),
    st.integers(-(10**6), 10**6).map(json.dumps),
    st.floats(allow_nan=False, allow_infinity=False).map(json.dumps),
    st.decimals(allow_nan=False, allow_infinity=False, places=3, min_value=-1000, max_value=1000).map(str),
)

bound_values = st.one_of(
    st.integers(-1000, 1000),
    st.decimals(min_value=-100, max_value=100, places=2),
    st.floats(-1e4, 1e4).map(lambda f: float(f"{f:.3g}")),
    st.sampled_from([0, 0.5, 1e3, Decimal("0.001"), Decimal("1E+2"), 1e-5, -0.25]),
)
multiples = st.one_of(
    st.integers(1, 40),
    st.sampled_from([0.5, 0.01, 2.5, 0.3, 1.5, 0.25, Decimal("0.0001"), 1e-3, 12, 1e2]),
)
keywords = st.fixed_dictionaries(
    {},
    optional={
        "minimum": bound_values,
        "maximum": bound_values,
        "exclusive_minimum": bound_values,
        "exclusive_maximum": bound_values,
        "multiple_of": multiples,
    },
)


def exact(value) -> Decimal:
    """A bound as the decimal it is written as (floats by their repr)."""
    return Decimal(repr(value)) if isinstance(value, float) else Decimal(value)


def is_integral(value: Decimal) -> bool:
    """Exactly, without the decimal context (exponents may be huge)."""
    _, digits, exponent = value.as_tuple()
    return exponent >= 0 or not any(digits[max(len(digits) + exponent, 0) :])


def satisfies(value: Decimal, kw: dict) -> bool:
    """Decimal comparisons are exact; multipleOf (only on texts without an
    exponent) is checked with fractions."""
    checks = {
        "minimum": lambda b: value >= b,
        "maximum": lambda b: value <= b,
        "exclusive_minimum": lambda b: value > b,
        "exclusive_maximum": lambda b: value < b,
        "multiple_of": lambda b: (Fraction(value) / Fraction(b)).denominator == 1,
    }
    return all(checks[k](exact(v)) for k, v in kw.items())


def expected(text: str, kw: dict, integral: bool) -> bool:
    if not re.fullmatch(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?", text):
        return False
    forms = [".*"]
    if "multiple_of" in kw:
        forms.append(MULTIPLE_FORMS)
    elif kw:
        forms.append(BOUNDED_FORMS)
    if integral:
        forms.append(INTEGER_FORMS)
    if not all(re.fullmatch(f, text) for f in forms):
        return False
    value = Decimal(text)
    return satisfies(value, kw) and (not integral or is_integral(value))


@given(kw=keywords, texts=st.lists(number_texts, min_size=5, max_size=10))
@example(kw={"minimum": 0, "multiple_of": 1}, texts=["0E0", "-0.0e-3", "1E0", "10", "2.5"])  # found by a fresh run
def test_number_accepts_exactly_the_documented_texts(kw, texts):
    dfa = number(**kw)
    for text in texts:
        assert dfa.matches(text.encode()) == expected(text, kw, integral=False), (kw, text)


@given(kw=keywords, texts=st.lists(number_texts, min_size=5, max_size=10))
@example(kw={"minimum": 0, "multiple_of": 1}, texts=["0E0", "-0.0e-3", "1E0", "10", "2.5"])  # found by a fresh run
def test_integer_accepts_exactly_the_documented_texts(kw, texts):
    dfa = integer(**kw)
    for text in texts:
        assert dfa.matches(text.encode()) == expected(text, kw, integral=True), (kw, text)


@given(data=st.data(), kw=keywords, integral=st.booleans())
def test_members_are_numbers_that_satisfy_the_keywords(data, kw, integral):
    dfa = (integer if integral else number)(**kw)
    if is_empty(dfa):  # contradictory bounds: check that nothing in range was lost
        assert not any(satisfies(Decimal(v) / 4, kw) for v in range(-4000, 4001)), kw
        return
    for _ in range(5):
        text = data.draw(members(dfa, max_size=16)).decode()  # exponents within Decimal's range
        value = json.loads(text, parse_float=Decimal, parse_int=Decimal)
        assert satisfies(value, kw), (kw, text)
        assert not integral or is_integral(value), text


values = st.one_of(st.integers(-(10**4), 10**4), st.floats(-1e4, 1e4), st.decimals(-100, 100, places=4))


@given(kw=keywords, value=values)
def test_serialized_values_in_range_are_accepted(kw, value):
    """What json.dumps writes for a satisfying value (and str() for a Decimal)
    is accepted."""
    if not satisfies(exact(value), kw):
        return
    text = str(value) if isinstance(value, Decimal) else json.dumps(value)
    if isinstance(value, Decimal) and "E" in text and not re.fullmatch(BOUNDED_FORMS, text):
        return  # Decimal writes 1.0E+3-style non-normalised exponents, not json.dumps' form
    assert number(**kw).matches(text.encode()), (kw, text)
    if is_integral(exact(value)) and "e" not in text.lower():
        assert integer(**kw).matches(text.encode()), (kw, text)


def test_bounds_exact_at_the_edges():
    dfa = number(minimum=0.5, maximum=1e3)
    for text in ["0.5", "0.50", "5e-1", "5.0E-1", "1000", "1000.000", "1e3", "1E+3", "1.0e3", "999.999"]:
        assert dfa.matches(text.encode()), text
    for text in ["0.4999", "4.99e-1", "1000.0001", "1.0000001e3", "-0.5", "0", "1e4", "10e2"]:
        assert not dfa.matches(text.encode()), text
    dfa = number(exclusive_minimum=0, exclusive_maximum=Decimal("0.1"))
    assert dfa.matches(b"1e-300") and dfa.matches(b"0.0999999") and not dfa.matches(b"0.1")
    assert not dfa.matches(b"-0") and not dfa.matches(b"0e5") and not dfa.matches(b"1e-1")
    # More digits than Decimal's default context keeps: no rounding anywhere.
    digits = "1.23456789012345678901234567890123"
    dfa = number(minimum=Decimal(digits))
    assert dfa.matches(digits.encode()) and dfa.matches(f"{digits}e0".encode())
    assert not dfa.matches(digits[:-1].encode() + b"2") and not dfa.matches(digits[:-1].encode() + b"2e0")


def test_integers_include_zero_fractions_and_positive_exponents():
    dfa = integer(minimum=-3, maximum=1e17)
    for text in ["-3", "-3.0", "0", "-0", "1.000", "1e16", "1E+17", "100000000000000000", "0e-5"]:
        assert dfa.matches(text.encode()), text
    for text in ["-4", "1.5", "2e17", "1e18", "0.5e1", "-3.5"]:
        assert not dfa.matches(text.encode()), text


def test_multiple_of():
    cents = number(multiple_of=0.01)
    for text in ["0", "1.5", "1.25", "-1.250000", "100"]:
        assert cents.matches(text.encode()), text
    for text in ["1.255", "0.001", "1e-2"]:
        assert not cents.matches(text.encode()), text
    sevens = integer(multiple_of=7, minimum=0)
    assert [n for n in range(60) if sevens.matches(str(n).encode())] == list(range(0, 60, 7))
    assert sevens.matches(b"14.0") and not sevens.matches(b"-7")


def test_huge_bounds_stay_small():
    assert number(maximum=1.7976931348623157e308, minimum=-1.7976931348623157e308).n_states < 2000
    assert number(minimum=0, maximum=100).n_states < 40
    assert integer(minimum=1, maximum=65535).n_states < 40


def test_contradictions_are_empty():
    assert is_empty(number(minimum=5, maximum=3))
    assert is_empty(integer(exclusive_minimum=1, exclusive_maximum=2))
    assert is_empty(number(minimum=1, exclusive_maximum=1))
    assert not is_empty(number(minimum=1, maximum=1))


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"minimum": "1"}, "minimum must be a number"),
        ({"maximum": True}, "maximum must be a number"),
        ({"exclusive_minimum": float("nan")}, "exclusiveMinimum must be a finite number"),
        ({"maximum": float("inf")}, "maximum must be a finite number"),
        ({"multiple_of": 0}, "multipleOf must be greater than 0"),
        ({"multiple_of": -2}, "multipleOf must be greater than 0"),
        ({"multiple_of": 123456789}, "use a multipleOf with fewer significant digits"),
    ],
)
def test_bad_keywords(kw, message):
    with pytest.raises(ConstrainedError, match=re.escape(message)):
        number(**kw)
