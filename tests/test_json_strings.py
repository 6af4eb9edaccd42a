"""JSON strings with lengths, ECMA-262 patterns, formats and literal values:
every accepted text decodes (json.loads) to a string that satisfies the
constraint, and every satisfying string is accepted as json.dumps writes it,
with ensure_ascii on and off."""

import json
import re
import string as ascii_strings
from datetime import timedelta, timezone

import numpy as np
import pytest
from hypothesis import assume, given, settings, strategies as st
from hypothesis.provisional import domains, urls
from jsonschema import Draft202012Validator

from constrained import ConstrainedError
from constrained.dfa import difference, from_regex, is_empty, minimize, minus_finite, union
from constrained.json_strings import _encoding, _quoted, enum_strings, string, string_literal
from dfa_members import members
from test_dfa_operations import assert_minimal

FORMAT_CHECKER = Draft202012Validator.FORMAT_CHECKER


def spellings(s: str, escapes: str = "any") -> list[bytes]:
    """json.dumps both ways, and (for escapes="any") every UTF-16 code unit as
    an upper-case \\uXXXX."""
    dumped = [json.dumps(s).encode(), json.dumps(s, ensure_ascii=False).encode()]
    if escapes == "dumps":
        return dumped
    units = s.encode("utf-16-be")
    escaped = "".join(f"\\u{int.from_bytes(units[i : i + 2], 'big'):04X}" for i in range(0, len(units), 2))
    return dumped + [f'"{escaped}"'.encode()]


def decode(text: bytes) -> str:
    value = json.loads(text)
    assert isinstance(value, str)
    value.encode("utf-8")  # no lone surrogate
    return value


def valid(schema: dict, value: str) -> bool:
    return Draft202012Validator({"type": "string", **schema}, format_checker=FORMAT_CHECKER).is_valid(value)


# Strings over characters that exercise every kind of spelling.
TRICKY = ["a", "b", "c", "A", "0", "5", "_", ".", " ", "é", "😀", "中", "\n", "\r", "\t", "\x00", "\x1f", "\x7f",
          '"', "\\", "/", "\u2028", "\xa0", "\ufeff", "-"]  # fmt: skip
tricky_text = st.text(alphabet=st.sampled_from(TRICKY), max_size=8)


@given(text=st.text())
def test_every_string_in_every_spelling(text):
    dfa = string(escapes="any")
    for spelled in spellings(text):
        assert dfa.matches(spelled), spelled


@given(data=st.data())
def test_members_decode_to_strings(data):
    decode(data.draw(members(string(escapes="any"))))


@given(text=st.text(), data=st.data())
def test_dumps_spellings_only(text, data):
    dfa = string(escapes="dumps")
    assert all(dfa.matches(spelled) for spelled in spellings(text, "dumps"))
    member = data.draw(members(dfa))
    decode(member)
    assert b"\\/" not in member.replace(b"\\\\", b"")
    for code in re.findall(rb"\\u(....)", member.replace(b"\\\\", b"")):
        assert code == code.lower() and not 0x20 <= int(code, 16) <= 0x7E, member


@given(
    data=st.data(),
    low=st.integers(0, 4),
    span=st.one_of(st.none(), st.integers(0, 4)),
    texts=st.lists(tricky_text, max_size=6),
)
def test_lengths_count_code_points(data, low, span, texts):
    high = None if span is None else low + span
    dfa = string(min_length=low, max_length=high, escapes="any")
    schema = {"minLength": low} | ({} if high is None else {"maxLength": high})
    for text in texts:
        for spelled in spellings(text):
            assert dfa.matches(spelled) == valid(schema, text), (schema, spelled)
    for _ in range(3):
        assert valid(schema, decode(data.draw(members(dfa))))


# ECMA-262 atoms next to the Python pattern they mean (on TRICKY strings, where
# Python's re and ECMA agree once classes are spelled out).
ECMA_SPACE = "[\t\n\v\f\r \xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]"
ATOMS = [
    ("a", "a"), ("b", "b"), ("\\.", "\\."), ("é", "é"), ("\\u00e9", "é"), ("\\u{1F600}", "😀"), ("😀", "😀"),
    ("\\uD83D\\uDE00", "😀"), ("\\n", "\n"), ('"', '"'), ("\\\\", "\\\\"), ("\\/", "/"), ("\\x41", "A"),
    ("\\cJ", "\n"), ("[\\b]", "\x08"), ("\\t", "\t"), (".", "[^\n\r\u2028\u2029]"), ("\\d", "[0-9]"),
    ("\\D", "[^0-9]"), ("\\w", "[A-Za-z0-9_]"), ("\\W", "[^A-Za-z0-9_]"), ("\\s", ECMA_SPACE),
    ("\\S", "[^" + ECMA_SPACE[1:]), ("[a-c]", "[a-c]"), ("[^a]", "[^a]"), ("[^]", "[\\s\\S]"), ("[\\d.]", "[0-9.]"),
    ("[\\w-]", "[A-Za-z0-9_-]"), ("\\_", "_"), ("[\\_\\-]", "[_-]"),
]  # fmt: skip


def _quantified(pairs):
    quantifier = st.sampled_from(["", "", "*", "+", "?", "{2}", "{0,2}", "{1,}", "*?"])
    return st.tuples(pairs, quantifier).map(
        lambda t: (f"(?:{t[0][0]}){t[1]}", f"(?:{t[0][1]}){t[1]}") if t[1] else t[0]
    )


def _combined(children):
    lists = st.lists(children, min_size=1, max_size=3)
    concat = lists.map(lambda xs: ("".join(x[0] for x in xs), "".join(x[1] for x in xs)))
    group = st.sampled_from(["(", "(?:", "(?<name>"])
    anchored = st.tuples(st.sampled_from(["", "", "^"]), children).map(lambda t: (t[0] + t[1][0], t[0] + t[1][1]))
    alternation = st.tuples(group, st.lists(anchored, min_size=1, max_size=3)).map(
        lambda t: (t[0] + "|".join(x[0] for x in t[1]) + ")", "(?:" + "|".join(x[1] for x in t[1]) + ")")
    )
    return _quantified(st.one_of(concat, alternation))


ecma_patterns = st.tuples(
    st.booleans(), st.recursive(_quantified(st.sampled_from(ATOMS)), _combined, max_leaves=5), st.booleans()
).map(lambda t: ("^" * t[0] + t[1][0] + "$" * t[2], "^" * t[0] + t[1][1] + "\\Z" * t[2]))


def compile_or_skip(**kw):
    try:
        return string(**{"escapes": "any", **kw})
    except ConstrainedError as e:
        assume("too complex" not in str(e) and "more than 8 times" not in str(e))
        raise


def check_pattern(data, ecma: str, python: str, texts: list) -> None:
    """The pattern's automaton accepts the texts (every spelling) that Python's
    ``python`` finds a match in, and its members have one (short ones: Python's
    backtracking takes exponential time on some patterns)."""
    dfa = compile_or_skip(pattern=ecma)
    for text in texts:
        for spelled in spellings(text):
            assert dfa.matches(spelled) == bool(re.search(python, text)), (ecma, spelled)
    if not is_empty(dfa):
        for _ in range(3):
            text = decode(data.draw(members(dfa, max_size=14)))
            assert re.search(python, text), (ecma, text)


@given(data=st.data(), pair=ecma_patterns, texts=st.lists(tricky_text, min_size=4, max_size=8))
def test_patterns_match_anywhere_with_ecma_semantics(data, pair, texts):
    check_pattern(data, *pair, texts)


ecma_bodies = st.tuples(
    st.recursive(_quantified(st.sampled_from(ATOMS)), _combined, max_leaves=4), st.booleans()
).map(lambda t: (t[0][0] + "$" * t[1], t[0][1] + "\\Z" * t[1]))
leading_lookaheads = st.tuples(st.lists(st.tuples(st.sampled_from("=!"), ecma_bodies), min_size=1, max_size=2),
                               ecma_bodies).map(
    lambda t: tuple("^" + "".join(f"(?{kind}{body[i]})" for kind, body in t[0]) + t[1][i] for i in (0, 1))
)


@settings(max_examples=60)
@given(data=st.data(), pair=leading_lookaheads, texts=st.lists(tricky_text, min_size=4, max_size=8))
def test_leading_lookaheads_with_ecma_semantics(data, pair, texts):
    """Lookaheads that open a pattern hold at the string's start: the rest and
    each lookahead's body are read from there, and intersected or subtracted."""
    check_pattern(data, *pair, texts)


def test_lookaheads_on_chosen_strings():
    cases = [  # leading ones, tempered tokens, a trailing one
        ("^(?!@@)[\\w@]+$", ["ab", "@a", "a@@"], ["@@a", "@@", "", "a b"]),
        ("^(?!pattern$).*$", ["patterns", "xpattern", ""], ["pattern"]),
        ("^(?![i|I][o|O])", ["x", "", "oi"], ["io", "IOBroker", "i|"]),
        ("^(?=.*\\d)(?!.*x).{3}$", ["a1b", "123"], ["abc", "x12", "12"]),
        ("^((?!mode)(?!Mode).)*$", ["", "mod", "MODE", "mo de"], ["mode", "a Mode b", "a\nb"]),
        ("^(?:(?!--)[a-z-])+$", ["a-b", "-a-"], ["", "a--b", "--", "A"]),
        ("^((?!ab$)[a-c])*$", ["ba", "abc", "cba"], ["ab", "cab"]),
        ("[^/]+(?=\\.ya?ml)", ["a.yml", "x/b.yaml"], ["/.yml", "a.json", "a.y"]),
    ]
    for pattern, accepted, rejected in cases:
        dfa = string(pattern=pattern)
        for text in accepted:
            assert dfa.matches(json.dumps(text).encode()), (pattern, text)
        for text in rejected:
            assert not dfa.matches(json.dumps(text).encode()), (pattern, text)


def _tempered(bodies, atom, repeat):
    """The ECMA-262 tempered token and its Python twin."""
    return tuple("^(?:" + "".join(f"(?!{body[i]})" for body in bodies) + f"{atom[i]}){repeat}" + end
                 for i, end in ((0, "$"), (1, "\\Z")))


tempered_tokens = st.builds(_tempered, st.lists(ecma_bodies, min_size=1, max_size=2), st.sampled_from(ATOMS),
                            st.sampled_from("*+"))


@settings(max_examples=60)
@given(data=st.data(), pair=tempered_tokens, texts=st.lists(tricky_text, min_size=4, max_size=8))
def test_tempered_tokens_with_ecma_semantics(data, pair, texts):
    """Negative lookaheads before each character of a whole anchored string
    (``^((?!--).)*$``) hold at every character's position: the strings where a
    body matches somewhere are subtracted; bodies that may match the empty
    string are refused."""
    try:
        check_pattern(data, *pair, texts)
    except ConstrainedError as e:
        assume("may match the empty string" not in str(e))
        raise


def test_lookaheads_that_may_match_nothing_are_refused_in_tempered_tokens():
    with pytest.raises(ConstrainedError, match="may match the empty string"):
        string(pattern="^((?!$).)*$")


@settings(max_examples=60)
@given(data=st.data(), pattern=ecma_patterns, body=ecma_bodies, texts=st.lists(tricky_text, min_size=4, max_size=8))
def test_trailing_lookaheads_with_ecma_semantics(data, pattern, body, texts):
    """A positive lookahead that ends a pattern reads as a group; one with a
    ``^`` inside is refused (it may hold at an empty string's end, after a ``$``)."""
    try:
        check_pattern(data, f"{pattern[0]}(?={body[0]})", f"{pattern[1]}(?={body[1]})", texts)
    except ConstrainedError as e:
        assume("^" not in body[0] or "uses a lookahead" not in str(e))
        raise


def test_pattern_with_lengths():
    assert string(min_length=2.0, max_length=3.0, escapes="any").matches(b'"ab"')  # integer-valued floats are integers
    dfa = string(min_length=2, max_length=5, pattern="^[a-z]+\\d?$", escapes="any")
    for text, ok in [("ab", True), ("abcd5", True), ("a", False), ("abcdef", False), ("ab55", False), ("Ab", False)]:
        assert dfa.matches(json.dumps(text).encode()) == ok, text


@settings(max_examples=60)
@given(data=st.data(), pair=ecma_patterns, low=st.integers(0, 3), span=st.one_of(st.none(), st.integers(0, 3)),
       texts=st.lists(tricky_text, min_size=4, max_size=8), escapes=st.sampled_from(["any", "dumps"]))
def test_patterns_with_lengths_count_code_points(data, pair, low, span, texts, escapes):
    """The length automaton met with a pattern's reads only the bytes the pattern
    does: the bounds still count code points, whatever their spelling."""
    (ecma, python), high = pair, None if span is None else low + span
    dfa = compile_or_skip(pattern=ecma, min_length=low, max_length=high, escapes=escapes)
    for text in texts:
        within = low <= len(text) and (high is None or len(text) <= high)
        for spelled in spellings(text, escapes):
            assert dfa.matches(spelled) == (within and bool(re.search(python, text))), (ecma, low, high, spelled)
    if not is_empty(dfa):
        text = decode(data.draw(members(dfa, max_size=14)))
        assert re.search(python, text) and low <= len(text) and (high is None or len(text) <= high), (ecma, text)


def test_long_bounds_on_narrow_patterns_and_bounded_formats():
    """maxLength 1024 on ASCII letters takes a state a character (its escapes and
    UTF-8 never meet the pattern); a pattern or format never longer than
    maxLength needs no count (hostname's 253 characters under 255 compile), and
    one that may be longer is cut exactly at it."""
    dfa = string(max_length=1024, pattern="^[a-z0-9 _-]+$")
    for text, ok in [("a" * 1024, True), ("a" * 1025, False), ("ab-c d_9", True), ("é", False), ("", False)]:
        assert dfa.matches(json.dumps(text).encode()) == ok, len(text)
    assert dfa.n_states < 1100
    bounded, hostname = string(max_length=255, format="hostname"), string(format="hostname")
    assert is_empty(difference(bounded, hostname)) and is_empty(difference(hostname, bounded))
    for high, accepted in [(2, ["de"]), (3, ["abc", "de"]), (4, ["abc", "de"])]:
        dfa = string(max_length=high, pattern="^(abc|de)$")
        assert [text for text in ["abc", "de"] if dfa.matches(json.dumps(text).encode())] == accepted, high
    for high, ok in [(14, False), (15, True)]:
        assert string(max_length=high, format="ipv4").matches(b'"255.255.255.255"') == ok, high


def test_counted_repeats_of_any_character():
    """Each character of a class is spelled by its minimal automaton (30 states
    for ``.``, escapes and UTF-8 included), so that ``.{1,255}`` compiles within
    the state budget; a trie of its spellings had twice the states, and the
    count multiplied them."""
    dfa = string(pattern="^.{1,255}$", escapes="any")
    for text, ok in [("é" * 255, True), ("a\"\U0001F600" * 85, True), ("a" * 256, False), ("", False), ("a\n", False)]:
        assert all(dfa.matches(s) == ok for s in spellings(text)), len(text)


def test_ecma_specifics():
    cases = [
        ("a$", ["xa"], ["a\n", "ab"]),  # $ is the very end
        ("^.$", ["x", "é", "😀"], ["\n", "\r", "\u2028", "\u2029", "ab"]),
        ("^\\s$", ["\ufeff", "\u3000", "\xa0"], ["\x1c", "\x85", "a"]),
        ("^\\w+$", ["a_Z9"], ["é"]),
        ("^\\d+$", ["0123"], ["١"]),  # Arabic-Indic digit: Python's \d, not ECMA's
        ("^[^]{2}$", ["\n\n"], ["a"]),
        ("^[]$|b", ["b"], ["", "a"]),
        ("^a{,2}$", ["a{,2}"], ["aa"]),  # not a quantifier: literal (Annex B)
        ("^\\p{L}+$", ["aé中"], ["1", "_"]),
        ("^\\P{L}$", ["1"], ["a"]),
        ("^\\u{10FFFF}$", ["\U0010ffff"], []),
        ("^(?<year>\\d{4})-x", ["2024-x"], ["2024-"]),
        ("(^a|^b)c", ["ac", "bcx"], ["xac"]),  # anchors inside groups
        ("^$|(^\\S+ \\S+$)", ["", "a b"], [" a b", "a b c"]),
        ("^x$(y)?", ["x"], ["xy"]),  # nothing can follow the end
        ("a^b|c", ["c"], ["ab", "a"]),
        ("^^a", ["ab"], ["ba"]),  # anchors passed more than once
        ("(^|b)+c", ["c", "bc", "bbc", "abc"], ["", "b"]),
        ("^([^,]+(,|$)){3,}$", ["a,b,c", "a,b,c,", "a,b,c,d"], ["a,b", "a,b,", ",,,"]),
        ("^(/?(\\.{2}|[a-z]*)($|/))*$", ["", "a/b", "../x/", "/a"], ["a.b", "A"]),
        ("^$[a-z$]*$", [""], ["a", "$"]),
    ]
    for pattern, good, bad in cases:
        dfa = string(pattern=pattern, escapes="any")
        for text in good:
            assert all(dfa.matches(s) for s in spellings(text)), (pattern, text)
        for text in bad:
            assert not any(dfa.matches(s) for s in spellings(text)), (pattern, text)


# Formats: hand-picked valid and invalid values (RFCs), hypothesis-made valid
# ones, and members checked by jsonschema's FormatChecker.
FORMAT_CASES = {
    "date": (["2024-02-29", "2000-02-29", "1999-12-31", "0001-01-01", "2023-04-30"],
             ["2023-02-29", "1900-02-29", "2023-04-31", "2023-13-01", "0000-01-01", "2023-1-01", "20230101"]),
    "time": (["12:30:00Z", "23:59:59.999+05:30", "00:00:00-23:59", "23:59:60Z", "23:59:60.5-00:00", "10:00:00z"],
             ["24:00:00Z", "12:60:00Z", "12:00:00", "12:00:00+24:00", "22:59:60Z", "23:59:60+01:00", "1:00:00Z"]),
    "date-time": (["2024-02-29T12:00:00Z", "1985-04-12T23:20:50.52Z", "1996-12-19T16:39:57-08:00", "2024-01-01t00:00:00z"],
                  ["2024-02-30T12:00:00Z", "2024-01-01 12:00:00Z", "2024-01-01T12:00:00", "2024-01-01T25:00:00Z"]),
    "duration": (["P1Y", "P1Y2M3DT4H5M6S", "PT0S", "P4W", "PT36H", "P1DT2H", "P0D", "PT1M30S"],
                 ["P", "PT", "P1W2D", "P1D2Y", "PT1H2S", "1Y", "P1.5Y", "P1YT"]),
    "email": (["joe@example.com", "a.b+c@x.io", '"joe bloggs"@example.com', "te~st@[127.0.0.1]", "x@[IPv6:::1]", "a@b"],
              ["plain", "a..b@example.com", ".a@example.com", "a.@example.com", "a@-example.com", "a@example-.com", "@x"]),
    # (a U-label domain is an idn-email's too, but left out: IDNA2008's rules)
    "idn-email": (["joe@example.com", "δοκιμή@example.com", '"δοκιμή"@example.com', "\x85@example.com", "𝕏@x.io"],
                  ["plain", "user＠example.com", "é..b@example.com", "é.@example.com", "user@café.com", '"a"b"@x']),
    "hostname": (["example.com", "a", "a-b.c-d.e", "1.2.3.4", "a" * 63 + ".com"],
                 ["-a.com", "a-.com", "a..b", "a_b.com", "a" * 64, "a.b.c.d.e", "example.com.", ""]),
    "ipv4": (["0.0.0.0", "255.255.255.255", "192.168.1.10", "10.0.0.1"],
             ["256.0.0.1", "01.2.3.4", "1.2.3", "1.2.3.4.5", "1.2.3.-4", " 1.2.3.4"]),
    "ipv6": (["::", "::1", "1::", "2001:db8::8a2e:370:7334", "1:2:3:4:5:6:7:8", "::ffff:192.168.1.1",
              "1:2:3:4:5:6:1.2.3.4", "1::2:3:4:5:6:7", "FE80::0202:B3FF:FE1E:8329"],
             ["1:2:3:4:5:6:7:8:9", "1::2::3", ":::", "12345::", "1:2:3:4:5:6:7", "::1.2.3.256", "fe80::1%eth0",
              "1:2:3:4:5:6:7::8", "1:2:3:4:5:6:7:1.2.3.4"]),
    "uuid": (["123e4567-e89b-12d3-a456-426614174000", "00000000-0000-0000-0000-000000000000", "ABCDEF00-1234-5678-9ABC-DEF012345678"],
             ["123e4567e89b12d3a456426614174000", "123e4567-e89b-12d3-a456-42661417400", "g23e4567-e89b-12d3-a456-426614174000"]),
    "uri": (["http://example.com/a?b=c#d", "urn:isbn:0451450523", "mailto:a@b.c", "http://[::1]:80/", "a:", "f://h/%20"],
            ["//example.com", "/path", "http://ex ample.com", "1http://x", "http://x/%zz", "http://[::g]/"]),
    "uri-reference": (["//example.com/x", "/path?q", "", "../a", "#frag", "http://x.y/"],
                      ["http://x y", "%zz", "\\\\server", "a b"]),
    "iri": (["http://例え.jp/パス", "http://ex.com/é?q=ü"], ["http://ex com", "/relative"]),
    "iri-reference": (["/パス", "é#ü"], ["a b", "%g0"]),
    "json-pointer": (["", "/", "/a/b", "/a~0b~1c", "/ /é"], ["a", "/~2", "/~", "#/a"]),
    "relative-json-pointer": (["0", "1/a", "12#", "0/"], ["-1", "/a", "01", "1#/"]),
    "uri-template": (["http://example.com/{id}", "{+path}/here", "{?x,y}", "/a/{b:3}/{c*}"], ["{", "{}", "{a b}", "}"]),
}  # fmt: skip

# Where jsonschema's checker is stricter than the format (it refuses every
# leap second), or has no opinion (uri-template's checker is lax, so is email's).
CHECKER_EXCEPTIONS = {"time": lambda s: ":60" in s, "date-time": lambda s: ":60" in s}


@pytest.mark.parametrize("escapes", ["any", "dumps"])
@pytest.mark.parametrize("format", sorted(FORMAT_CASES))
def test_formats_on_chosen_values(format, escapes):
    dfa = string(format=format, escapes=escapes)
    good, bad = FORMAT_CASES[format]
    for text in good:
        assert all(dfa.matches(s) for s in spellings(text, escapes)), (format, text)
    for text in bad:
        assert not any(dfa.matches(s) for s in spellings(text)), (format, text)


@pytest.mark.parametrize("format", sorted(FORMAT_CASES))
@settings(max_examples=5)  # 16 formats: the suite's time budget
@given(data=st.data())
def test_format_members_pass_the_checker(format, data):
    dfa = string(format=format, escapes="any")
    for _ in range(6):
        text = decode(data.draw(members(dfa, max_size=60)))
        if not CHECKER_EXCEPTIONS.get(format, lambda s: False)(text):
            assert valid({"format": format}, text), (format, text)


def _most_ascii_code_points(dfa) -> int:
    """The most code points between the quotes of a text that an acyclic DFA of
    printable ASCII strings accepts: a backslash starts a two-byte escape."""
    weight = np.ones(256, dtype=np.int64)
    weight[ord("\\")] = 0
    none = -(1 << 40)
    ending = np.where(dfa.accepting, 0, none)
    most = ending  # per state, the most code points from there to an accepting state
    for _ in range(dfa.n_states):
        after = np.where(dfa.transitions >= 0, weight + most[np.maximum(dfa.transitions, 0)], none)
        longer = np.maximum(ending, after.max(axis=1))
        if np.array_equal(longer, most):
            return int(most[dfa.start]) - 2
        most = longer
    raise AssertionError("the automaton has a cycle")


@pytest.mark.parametrize("max_length", [129, 255, 1024])
def test_long_emails_meet_the_sizes_of_rfc_5321(max_length):
    """Under a maxLength above 128, where counting would take too many states, an
    email's local part has at most 64 octets and its domain at most 255,
    shortened to fit, so that no email is longer than the maxLength."""
    email = string(format="email", max_length=max_length)
    domain = min(255, max_length - 65)
    assert is_empty(difference(email, string(format="email")))
    assert _most_ascii_code_points(email) == 65 + domain <= max_length
    for text in ["joe@example.com", '"joe bloggs"@example.com', "x@[IPv6:::1]", "a" * 64 + "@" + "b" * domain]:
        assert all(email.matches(s) for s in spellings(text, "dumps")), text
    for text in ["a" * 65 + "@example.com", "a@" + "b" * (domain + 1), '"a@b"@example.com']:
        assert not any(email.matches(s) for s in spellings(text)), text


@pytest.mark.parametrize("max_length", [101, 255])
def test_long_idn_emails_meet_the_sizes_of_rfc_5321(max_length):
    """Likewise an idn-email's above a maxLength of 100, in characters: a local
    part of 64 non-ASCII ones and a domain as long as the rest fit, no more."""
    email = string(format="idn-email", max_length=max_length)
    domain = min(255, max_length - 65)
    assert is_empty(difference(email, string(format="idn-email")))
    for text in ["δοκιμή@example.com", "é" * 64 + "@" + "b" * domain]:
        assert all(email.matches(s) for s in spellings(text, "dumps")), text
    for text in ["é" * 65 + "@example.com", "é@" + "b" * (domain + 1)]:
        assert not any(email.matches(s) for s in spellings(text)), text


def test_short_emails_are_counted_exactly():
    email = string(format="email", max_length=128)
    assert email.matches(json.dumps("a" * 100 + "@" + "b" * 27).encode())
    assert not email.matches(json.dumps("a" * 100 + "@" + "b" * 28).encode())
    assert email.matches(json.dumps('"a@b"@example.com').encode())


_hex = st.text("0123456789abcdefABCDEF", min_size=1, max_size=4)
_n = st.integers(0, 999).map(str)
GENERATED = {
    "date": st.dates().map(lambda d: d.isoformat()),
    "date-time": st.datetimes(timezones=st.integers(-1439, 1439).map(lambda m: timezone(timedelta(minutes=m)))).map(
        lambda d: d.isoformat()
    ),
    "time": st.times().map(lambda t: t.isoformat() + "Z"),
    "ipv4": st.ip_addresses(v=4).map(str),
    "ipv6": st.ip_addresses(v=6).flatmap(lambda a: st.sampled_from([str(a), a.exploded, a.exploded.upper()])),
    "uuid": st.uuids().flatmap(lambda u: st.sampled_from([str(u), str(u).upper()])),
    "hostname": domains(max_length=120, max_element_length=40).filter(  # A-labels ("xn--...") are refused
        lambda d: d.count(".") < 4 and not any(label[2:4] == "--" for label in d.split("."))),
    "uri": urls(),
    "uri-reference": urls().map(lambda u: u.split(":", 1)[1]),
    "email": st.tuples(st.text(ascii_strings.ascii_letters + "0123456789!#$%&'*+/=?^_`{|}~-", min_size=1, max_size=8),
                       domains(max_length=40)).map("@".join),
    "idn-email": st.tuples(st.text(ascii_strings.ascii_letters + "0123456789!#$%&'*+/=?^_`{|}~-" + "éδοκιμή실례𝕏",
                                   min_size=1, max_size=8), domains(max_length=40)).map("@".join),
    "duration": st.tuples(_n, _n, _n, _n, _n, _n).map(lambda t: "P{}Y{}M{}DT{}H{}M{}S".format(*t)),
    "json-pointer": st.lists(st.text(max_size=4)).map(
        lambda parts: "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in parts)
    ),
}  # fmt: skip


@pytest.mark.parametrize("format", sorted(GENERATED))
@given(data=st.data())
def test_generated_values_of_formats_are_accepted(format, data):
    dfa = string(format=format, escapes="any")
    value = data.draw(GENERATED[format])
    assert valid({"format": format}, value), value
    for spelled in spellings(value):
        assert dfa.matches(spelled), (format, spelled)


no_surrogates = st.text(max_size=6).filter(lambda s: not any(0xD800 <= ord(c) <= 0xDFFF for c in s))


@given(values=st.lists(no_surrogates, min_size=1, max_size=5), other=st.text(max_size=6))
def test_literals_in_every_spelling(values, other):
    dfa = enum_strings(values, escapes="any")
    for value in values:
        assert all(dfa.matches(s) for s in spellings(value))
    assert any(dfa.matches(s) for s in spellings(other)) == (other in values)
    assert string_literal(values[0], escapes="any").matches(json.dumps(values[0]).encode())


@given(keys=st.lists(tricky_text | no_surrogates, min_size=1, max_size=6), other=tricky_text | st.text(max_size=6),
       escapes=st.sampled_from(["any", "dumps"]))
def test_strings_but_some_keys(keys, other, escapes):
    """minus_finite leaves out the keys in every spelling, and no other string,
    with no minimisation and yet a minimal automaton (property names are
    spelled as json.dumps writes them)."""
    rest = minus_finite(string(escapes=escapes), enum_strings(keys, escapes=escapes))
    for key in keys:
        assert not any(rest.matches(s) for s in spellings(key))
    assert all(rest.matches(s) for s in spellings(other, escapes)) == (other not in keys)
    assert_minimal(rest)


def _infinite(dfa) -> bool:
    """Whether a trimmed DFA has a cycle (Kahn's algorithm leaves some state)."""
    successors = [set(row[row >= 0].tolist()) for row in dfa.transitions]
    waiting = [0] * dfa.n_states
    for targets in successors:
        for t in targets:
            waiting[t] += 1
    order = [q for q in range(dfa.n_states) if not waiting[q]]
    for q in order:
        for t in successors[q]:
            waiting[t] -= 1
            if not waiting[t]:
                order.append(t)
    return len(order) < dfa.n_states


@pytest.mark.parametrize("escapes", ["any", "dumps"])
def test_string_states_differ_on_infinitely_many_strings(escapes):
    """What makes minus_finite's product minimal: no two states of string() have
    languages that differ on finitely many strings only."""
    strings = string(escapes=escapes)
    languages = [minimize(strings.transitions, strings.accepting, start=q) for q in range(strings.n_states)]
    for p in range(strings.n_states):
        for q in range(p):
            apart = union(difference(languages[p], languages[q]), difference(languages[q], languages[p]))
            assert _infinite(apart), (p, q)


@given(values=st.lists(tricky_text | no_surrogates, min_size=1, max_size=6), escapes=st.sampled_from(["any", "dumps"]))
def test_literals_are_the_language_of_their_regex(values, escapes):
    """enum_strings builds its automaton directly; the regex compiler, given the
    alternatives, must find the same language (and the same minimal size)."""
    built = enum_strings(values, escapes=escapes)
    alternatives = "|".join("(?:" + "".join(f"\\U{ord(c):08x}" for c in v) + ")" for v in values)
    reference = _quoted(from_regex(alternatives, _encoding(escapes)))
    assert is_empty(difference(built, reference)) and is_empty(difference(reference, built))
    assert built.n_states == reference.n_states


def test_hostnames_with_reserved_hyphens_are_refused():
    """RFC 5891: "--" as a label's 3rd and 4th characters marks an A-label, whose
    Punycode an automaton cannot check (the suite's invalid "xn--X")."""
    dfa = string(format="hostname", escapes="any")
    for name in ["xn--X", "XN--aa---o47jg78q", "ab--c.example", "example.xn--9t4b11yi5a"]:
        assert not dfa.matches(json.dumps(name).encode()), name
    for name in ["a--b.com", "abc--d", "ab-c.example", "a" * 63]:
        assert dfa.matches(json.dumps(name).encode()), name


def test_long_strings_and_their_limit():
    dfa = string(max_length=800, escapes="any")
    assert dfa.matches(json.dumps("é" * 800).encode()) and not dfa.matches(json.dumps("a" * 801).encode())
    with pytest.raises(ConstrainedError, match="lower maxLength"):
        string(max_length=5000)


def test_contradictions_are_empty():
    assert is_empty(string(min_length=3, max_length=2))
    assert is_empty(string(pattern="^a$", min_length=2))
    assert is_empty(string(pattern="[]"))
    assert is_empty(enum_strings([]))


@pytest.mark.parametrize(
    "kw, message",
    [
        ({"pattern": "a(?=b)c"}, "uses a lookahead"),
        ({"pattern": "a(?!b)"}, "uses a lookahead"),
        ({"pattern": "a(?=b)|c"}, "uses a lookahead"),  # the lookahead ends one alternative only
        ({"pattern": "(a(?=b))"}, "uses a lookahead"),
        ({"pattern": "$(?=^)"}, "uses a lookahead"),  # "^" inside: it holds at an empty string's end
        ({"pattern": "^(?!a)b|c"}, "uses a lookahead"),  # the lookahead opens one alternative only
        ({"pattern": "^(?!a)b(?=c)d"}, "pattern '^b(?=c)d' uses a lookahead"),
        ({"pattern": "^(?:(?!a)b)*c$"}, "uses a lookahead"),  # a tempered token, but not the whole string's
        ({"pattern": "^((?!a)bc)*$"}, "uses a lookahead"),  # before every other character only
        ({"pattern": "^(?!a)(b"}, "unterminated group (at offset 3) (in pattern '^(?!a)(b'"),
        ({"pattern": "(?<!a)b"}, "uses a lookbehind"),
        ({"pattern": "(a)\\1"}, "uses a backreference"),
        ({"pattern": "(?<n>a)\\k<n>"}, "uses a backreference"),
        ({"pattern": "\\bword"}, "uses a word boundary"),
        ({"pattern": "(^^){9}"}, "'^' or '$' more than 8 times on one path"),
        ({"pattern": "a)"}, "unmatched ')'"),
        ({"pattern": "(a"}, "unterminated group"),
        ({"pattern": "[a"}, "ends unexpectedly"),
        ({"pattern": "*a"}, "nothing to repeat"),
        ({"pattern": "a**"}, "nothing to repeat"),
        ({"pattern": "a{3,1}"}, "out of order"),
        ({"pattern": "[z-a]"}, "range out of order"),
        ({"pattern": "\\a"}, "invalid escape \\a"),
        ({"pattern": "\\u12"}, "expected 4 hexadecimal digits"),
        ({"pattern": "\\p{Script=Greek}"}, "only general categories"),
        ({"pattern": "\\p{Foo}"}, "unknown general category"),
        ({"pattern": 5}, "a pattern is a string"),
        ({"pattern": "(a|b)*a(a|b|c){12}"}, "too complex"),
        ({"format": "regex"}, "format 'regex' cannot be enforced"),
        ({"format": "idn-hostname"}, "cannot be enforced"),
        ({"format": "color"}, "unknown format 'color'; the supported formats are: date"),
        ({"min_length": 30000, "pattern": "^[a-z]+$"}, "(about 1 a character, for the ways one may be spelled); "
                                                       "lower minLength to at most 19999"),
        ({"max_length": 1024, "pattern": "^https?://.+$"}, "lower maxLength to at most 832"),
        ({"min_length": -1}, "minLength must be a non-negative integer"),
        ({"max_length": 1.5}, "maxLength must be a non-negative integer"),
        ({"escapes": "none"}, "escapes must be 'any' or 'dumps'"),
    ],
)
def test_bad_constraints(kw, message):
    with pytest.raises(ConstrainedError, match=re.escape(message)):
        string(**kw)


def test_lone_surrogates_are_refused():
    with pytest.raises(ConstrainedError, match="lone surrogate"):
        string_literal("\ud800")
