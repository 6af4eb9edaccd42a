"""JSON numbers as byte DFAs over their text (RFC 8259:
``-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?``), with exact bounds and
multipleOf, compared in decimal arithmetic.

Which texts are accepted:

- No bound and no multipleOf: every number text.
- With bounds: plain decimals (``-12.50``), normalised scientific notation
  (one non-zero digit before the point: ``1.5e-07``, ``2E+20``; what
  ``json.dumps`` and JavaScript write) and zero with any exponent, each exactly
  when its value is within the bounds. Other exponent forms (``12e3``,
  ``0.5e1``) are left out: comparing them with a bound means comparing the
  count of digits with the exponent, which no automaton can do.
- With multipleOf: plain decimals (``multipleOf: 0.01`` means at most two
  non-zero digits after the point; an integer ``p`` adds a remainder-mod-p
  automaton over the digits) and zero with any exponent.
- integer() accepts integer-valued texts, as JSON Schema defines integers: a
  zero fraction (``1.0``) is an integer. Exponent forms are accepted when they
  are integers whatever their digits: an integer (with a zero fraction or
  none) times a non-negative power of ten (``1e+16``; bounded: one digit
  only), and zero with any exponent. Left out: ``1.5e+16`` (an integer only
  because the exponent outnumbers the fraction's digits: counting again) and
  ``100e-2``.

DECIDED: the texts on which all of the above is exact (plain decimals and zero
with any exponent). Outside it, "not an integer" cannot be told from "not
written the way integer() reads": ``10e-1`` is 1, an integer that integer()
leaves out. So a value that must fail a language made by bounds, integer,
multipleOf or a numeric enum/const (not, oneOf, a label that leaves a schema
out) is never a number outside DECIDED (json_schema_rules.undecided), or,
where only bounds and enum/const made it, outside DECIDED_BY_VALUE, which
adds normalised scientific notation (``1e+16``, what json.dumps writes for
large and small floats).

Bounds may be int, float or Decimal; a float is read as the shortest decimal
that prints as it (``0.1`` is 0.1, as it was written in the schema).
"""

from decimal import Decimal
from functools import lru_cache, reduce

import numpy as np

from .dfa import MAX_STATES, DFA, empty, from_regex, intersect, minimize, union
from .errors import ConstrainedError

_INT = "(?:0|[1-9][0-9]*)"
_FRACTION = r"(?:\.[0-9]+)?"
_EXPONENT = "[eE][+-]?[0-9]+"
ANY_NUMBER = f"-?{_INT}{_FRACTION}(?:{_EXPONENT})?"
PLAIN_INTEGER = f"-?{_INT}"
_PLAIN = f"{_INT}{_FRACTION}"
_SCIENTIFIC = f"[1-9]{_FRACTION}{_EXPONENT}"
_ZERO_EXPONENT = rf"0(?:\.0+)?{_EXPONENT}"
DECIDED = f"-?(?:{_PLAIN}|{_ZERO_EXPONENT})"
DECIDED_BY_VALUE = f"-?(?:{_PLAIN}|{_ZERO_EXPONENT}|{_SCIENTIFIC})"


def _alternatives(*parts) -> str | None:
    parts = [p for p in parts if p is not None]
    return "|".join(f"(?:{p})" for p in parts) if parts else None


def _digits(text: str) -> str:
    """A literal digit string, runs of one digit written as counted repeats."""
    out, i = [], 0
    while i < len(text):
        j = i
        while j < len(text) and text[j] == text[i]:
            j += 1
        out.append(text[i] if j - i == 1 else f"{text[i]}{{{j - i}}}")
        i = j
    return "".join(out)


def _digit_range(lo: int, hi: int) -> str | None:
    if lo > hi:
        return None
    return str(lo) if lo == hi else f"[{lo}-{hi}]"


# Canonical integers (no leading zeros) compared with a canonical integer n.


def _int_greater(n: str) -> str:
    parts = [f"[1-9][0-9]{{{len(n)},}}"]
    for i, d in enumerate(n):
        if d != "9":
            parts.append(f"{_digits(n[:i])}{_digit_range(int(d) + 1, 9)}[0-9]{{{len(n) - i - 1}}}")
    return _alternatives(*parts)


def _int_less(n: str) -> str | None:
    if n == "0":
        return None
    parts = ["0"]
    if len(n) >= 2:
        parts.append(f"[1-9][0-9]{{0,{len(n) - 2}}}")
    for i, d in enumerate(n):
        low = 1 if i == 0 else 0
        if int(d) > low:
            parts.append(f"{_digits(n[:i])}{_digit_range(low, int(d) - 1)}[0-9]{{{len(n) - i - 1}}}")
    return _alternatives(*parts)


# Fractions: digit strings D after a point, compared as 0.D with 0.C, where C
# has no trailing zeros. Each is the whole optional fraction part.


def _fraction_at_least(c: str, strict: bool) -> str | None:
    if not c:
        return r"\.[0-9]*[1-9][0-9]*" if strict else _FRACTION
    parts = [f"{_digits(c[:i])}{_digit_range(int(d) + 1, 9)}[0-9]*" for i, d in enumerate(c) if d != "9"]
    parts.append(f"{_digits(c)}[0-9]*[1-9][0-9]*" if strict else f"{_digits(c)}[0-9]*")
    return rf"\.(?:{_alternatives(*parts)})"


def _fraction_at_most(c: str, strict: bool) -> str | None:
    if not c:
        return None if strict else r"(?:\.0+)?"
    parts = [f"{_digits(c[:i])}{_digit_range(0, int(d) - 1)}[0-9]*" for i, d in enumerate(c) if d != "0"]
    parts += [_digits(c[:i]) for i in range(1, len(c))]
    if not strict:
        parts.append(f"{_digits(c)}0*")
    return rf"(?:\.(?:{_alternatives(*parts)}))?"


def _split(c: Decimal) -> tuple[str, str]:
    """Integer digits and fraction digits (no trailing zeros) of c >= 0."""
    text = format(c.copy_abs(), "f")  # copy_abs: exact, and -0 is 0
    whole, _, fraction = text.partition(".")
    return whole.lstrip("0") or "0", fraction.rstrip("0")


def _plain_at_least(c: Decimal, strict: bool) -> str | None:
    whole, fraction = _split(c)
    equal = _fraction_at_least(fraction, strict)
    return _alternatives(f"(?:{_int_greater(whole)}){_FRACTION}", None if equal is None else f"{_digits(whole)}{equal}")


def _plain_at_most(c: Decimal, strict: bool) -> str | None:
    whole, fraction = _split(c)
    less, equal = _int_less(whole), _fraction_at_most(fraction, strict)
    return _alternatives(
        None if less is None else f"(?:{less}){_FRACTION}", None if equal is None else f"{_digits(whole)}{equal}"
    )


# Exponents: [+-]?digits (leading zeros allowed) compared with an int k.


def _exponent(op: str, k: int) -> str:
    magnitude = str(abs(k))
    if op == "=":
        return "[+-]?0+" if k == 0 else (rf"\+?0*{magnitude}" if k > 0 else f"-0*{magnitude}")
    if op == ">":
        if k >= 0:
            return rf"\+?0*(?:{_int_greater(magnitude)})"
        return _alternatives(r"\+?[0-9]+", f"-0*(?:{_int_less(magnitude)})")
    # op == "<"
    if k > 0:
        return _alternatives(rf"\+?0*(?:{_int_less(magnitude)})", "-[0-9]+")
    return f"-0*(?:{_int_greater(magnitude)})"


def _significand(c: Decimal) -> tuple[str, int]:
    """c > 0 as its digits without trailing zeros, and the exponent of the
    last one, exactly (Decimal.normalize would round to the context's 28 digits)."""
    _, digits, exponent = c.as_tuple()
    text = "".join(map(str, digits))
    stripped = text.rstrip("0")
    return stripped, exponent + len(text) - len(stripped)


def _scientific(c: Decimal, strict: bool, above: bool) -> str | None:
    """Normalised scientific texts (d.ddd e x) whose value is >= c (> if
    strict) if ``above``, else <= c (< if strict): a greater exponent decides,
    and for the same exponent, the mantissa's digits."""
    if c <= 0:
        return _SCIENTIFIC if above else None
    digits, _ = _significand(c)
    first, rest, k = digits[0], digits[1:], c.adjusted()
    if above:
        digit, equal, exponent = _digit_range(int(first) + 1, 9), _fraction_at_least(rest, strict), ">"
    else:
        digit, equal, exponent = _digit_range(1, int(first) - 1), _fraction_at_most(rest, strict), "<"
    mantissa = _alternatives(
        None if digit is None else f"{digit}{_FRACTION}", None if equal is None else f"{first}{equal}"
    )
    return _alternatives(
        f"[1-9]{_FRACTION}[eE](?:{_exponent(exponent, k)})",
        None if mantissa is None else f"(?:{mantissa})[eE](?:{_exponent('=', k)})",
    )


def _magnitude_at_least(c: Decimal, strict: bool) -> str | None:
    """Unsigned texts (of the bounded forms) whose value is >= c (> c if strict)."""
    if c < 0 or (c == 0 and not strict):
        return _alternatives(_PLAIN, _SCIENTIFIC, _ZERO_EXPONENT)
    return _alternatives(_plain_at_least(c, strict), _scientific(c, strict, above=True))


def _magnitude_at_most(c: Decimal, strict: bool) -> str | None:
    if c < 0 or (c == 0 and strict):
        return None
    return _alternatives(_plain_at_most(c, strict), _scientific(c, strict, above=False), _ZERO_EXPONENT)


# copy_negate, not unary minus: that one rounds to the context's 28 digits.


def _at_least(c: Decimal, strict: bool) -> str | None:
    negative = _magnitude_at_most(c.copy_negate(), strict)
    return _alternatives(_magnitude_at_least(c, strict), None if negative is None else f"-(?:{negative})")


def _at_most(c: Decimal, strict: bool) -> str | None:
    negative = _magnitude_at_least(c.copy_negate(), strict)
    return _alternatives(_magnitude_at_most(c, strict), None if negative is None else f"-(?:{negative})")


def _decimal(value, name: str) -> Decimal | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)):
        raise ConstrainedError(f"{name} must be a number, got {value!r}")
    number = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    if not number.is_finite():
        raise ConstrainedError(f"{name} must be a finite number, got {value!r}")
    return number


def _compile(pattern: str | None) -> DFA:
    return empty() if pattern is None else from_regex(pattern)


def _bounded(minimum, maximum, exclusive_minimum, exclusive_maximum) -> DFA | None:
    """Number texts within the bounds, or None if there are none to enforce."""
    lows = [(v, False) for v in [_decimal(minimum, "minimum")] if v is not None]
    lows += [(v, True) for v in [_decimal(exclusive_minimum, "exclusiveMinimum")] if v is not None]
    highs = [(v, False) for v in [_decimal(maximum, "maximum")] if v is not None]
    highs += [(v, True) for v in [_decimal(exclusive_maximum, "exclusiveMaximum")] if v is not None]
    if not lows and not highs:
        return None
    parts = []
    if lows:
        low, strict = max(lows, key=lambda b: (b[0], b[1]))
        parts.append(_compile(_at_least(low, strict)))
    if highs:
        high, strict = min(highs, key=lambda b: (b[0], not b[1]))
        parts.append(_compile(_at_most(high, strict)))
    return reduce(intersect, parts)


def _multiple_of(q) -> DFA:
    """Plain decimal texts whose value is a multiple of q > 0. With
    q = p / 10**s (p an integer): the digits through the s-th after the point,
    read as an integer, are divisible by p, and any further digits are zeros."""
    q = _decimal(q, "multipleOf")
    if q <= 0:
        raise ConstrainedError(f"multipleOf must be greater than 0, got {q}")
    digits, exponent = _significand(q)
    p, s = int(digits) * 10 ** max(exponent, 0), max(-exponent, 0)
    n = 3 + p * (s + 3)
    if n > MAX_STATES:
        raise ConstrainedError(
            f"multipleOf {q} cannot be enforced: its automaton would need {n} states "
            f"(more than {MAX_STATES}); use a multipleOf with fewer significant digits"
        )
    # States: 0 the start, 1 after "-", 2 after a whole part "0"; then for each
    # remainder r mod p: the whole part so far; after the point with j of the s
    # digits read (j = 0: just the point); past the s digits, only zeros.
    r = np.arange(p)
    whole = 3 + r
    fraction = [3 + p * (1 + j) + r for j in range(s + 1)]
    zeros = 3 + p * (s + 2) + r
    digit = np.arange(10)
    next_r = (r[:, None] * 10 + digit[None, :]) % p  # (p, 10)
    transitions = np.full((n, 256), -1, dtype=np.int32)
    accepting = np.zeros(n, dtype=bool)
    transitions[0, ord("-")] = 1
    transitions[[0, 1], 48] = 2
    transitions[0:2, 49:58] = whole[digit[1:] % p]
    transitions[whole[:, None], 48 + digit[None, :]] = whole[next_r]
    transitions[2, ord(".")] = fraction[0][0]
    transitions[whole, ord(".")] = fraction[0]
    for j in range(s):
        transitions[fraction[j][:, None], 48 + digit[None, :]] = fraction[j + 1][next_r]
    transitions[fraction[s], 48] = zeros
    transitions[zeros, 48] = zeros
    accepting[2] = True
    accepting[whole] = r * pow(10, s, p) % p == 0  # (10**s itself may not fit the int64 of r: s is 324 for 5e-324)
    for j in range(1, s + 1):
        accepting[fraction[j]] = r * pow(10, s - j, p) % p == 0
    accepting[zeros] = r == 0
    dfa = minimize(transitions, accepting)
    zero = from_regex(f"-?{_ZERO_EXPONENT}")  # 0 is a multiple of every q, however it is written
    return zero if dfa is None else union(dfa, zero)


def number(minimum=None, maximum=None, exclusive_minimum=None, exclusive_maximum=None, multiple_of=None) -> DFA:
    """The JSON number texts within the bounds and a multiple of multiple_of
    (see the module docstring for which spellings). May be empty (check with
    dfa.is_empty)."""
    parts = [p for p in [_bounded(minimum, maximum, exclusive_minimum, exclusive_maximum)] if p is not None]
    if multiple_of is not None:
        parts.append(_multiple_of(multiple_of))
    return reduce(intersect, parts) if parts else from_regex(ANY_NUMBER)


@lru_cache(maxsize=1)
def _integer_texts() -> DFA:
    """The integer-valued number texts accepted (see the module docstring)."""
    zero_fraction = r"(?:\.0+)?"
    return from_regex(f"-?{_INT}{zero_fraction}(?:[eE]\\+?[0-9]+)?|-?{_ZERO_EXPONENT}")


def integer(minimum=None, maximum=None, exclusive_minimum=None, exclusive_maximum=None, multiple_of=None) -> DFA:
    """The integer-valued JSON number texts within the bounds and a multiple of
    multiple_of. May be empty (check with dfa.is_empty)."""
    return intersect(_integer_texts(), number(minimum, maximum, exclusive_minimum, exclusive_maximum, multiple_of))
