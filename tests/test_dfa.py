"""Regular expressions to byte-level DFAs: the DFA's language is exactly
Python's ``re.fullmatch`` with ``re.ASCII``."""

import re

import numpy as np
import pytest
from hypothesis import given, strategies as st

from constrained import ConstrainedError
from constrained.dfa import from_regex, utf8_sequences
from regex_strategies import compile_or_reject, regex_members, regexes, texts


@given(example=regex_members)
def test_every_string_of_the_language_is_accepted(example):
    pair, text = example
    dfa = compile_or_reject(pair[0]).dfa
    assert re.fullmatch(pair[0], text, re.ASCII)
    assert dfa.matches(text.encode()), (pair[0], text)


@given(pattern=regexes, text=texts)
def test_accepts_exactly_what_python_matches(pattern, text):
    dfa = compile_or_reject(pattern).dfa
    assert dfa.matches(text.encode()) == bool(re.fullmatch(pattern, text, re.ASCII)), (pattern, text)


@given(pattern=regexes)
def test_every_state_is_live_and_minimal(pattern):
    dfa = compile_or_reject(pattern).dfa
    transitions, accepting = dfa.transitions, dfa.accepting
    # Live: from every state an accepting state is reachable.
    live = accepting.copy()
    for _ in range(dfa.n_states):
        live |= ((transitions >= 0) & live[np.maximum(transitions, 0)]).any(axis=1)
    assert live.all()
    # Minimal: no two states have the same acceptance and the same transitions
    # after merging (checked on the one-step signature, which minimality implies).
    signature = {(bool(a), tuple(row)) for a, row in zip(accepting, transitions)}
    assert len(signature) == dfa.n_states


@given(st.integers(0, 0x10FFFF), st.integers(0, 0x10FFFF))
def test_utf8_sequences_cover_exactly_the_range(a, b):
    lo, hi = min(a, b), min(a, b) + min(abs(a - b), 300)
    sequences = utf8_sequences(lo, hi)
    expected = {chr(c).encode() for c in range(lo, hi + 1) if not 0xD800 <= c <= 0xDFFF}
    covered = set()
    for seq in sequences:
        def spell(prefix, rest):
            if not rest:
                covered.add(bytes(prefix))
                return
            for byte in range(rest[0][0], rest[0][1] + 1):
                spell(prefix + [byte], rest[1:])
        spell([], seq)
    assert covered == expected


def test_multibyte_characters_split_across_bytes():
    dfa = from_regex("é😀")
    data = "é😀".encode()
    state = dfa.start
    for byte in data[:-1]:
        state = dfa.transitions[state, byte]
        assert state >= 0 and not dfa.accepting[state]
    assert dfa.matches(data)
    assert not dfa.matches(data[:-1])


def test_forced_bytes():
    dfa = from_regex(r"abc[0-9]|abd")
    assert dfa.forced(dfa.start) == b"ab"
    assert dfa.forced(dfa.run(b"abd")) == b""


@pytest.mark.parametrize(
    "pattern, message",
    [
        ("[", "invalid regular expression"),
        ("a{2,1}", "invalid regular expression"),
        ("a(?=b)", "lookaround"),
        ("(?<!a)b", "lookaround"),
        (r"(a)\1", "backreference"),
        (r"\bword\b", "anchors or word boundaries"),
        ("^abc$", "leave out ^ and $"),
        ("a*+", "possessive quantifier"),
        ("(?>a)", "atomic group"),
        ("(?m)a", "re.MULTILINE"),
        ("(a|b)*a(a|b){15}", "too complex"),
        ("[^x]*a{0,100000}b", "track over 3,000,000 positions"),  # (ran for minutes before it was refused)
        ("(?x)a b", "re.VERBOSE"),
        ("[^\\x00-\\U0010ffff]", "matches no string"),
        ("a[^\\s\\S]", "matches no string"),
    ],
)
def test_refused_patterns(pattern, message):
    with pytest.raises(ConstrainedError, match=re.escape(message)):
        from_regex(pattern)


def test_case_insensitive_is_ascii_only():
    dfa = from_regex("(?i)straße[^x]")
    for text in ["STRAßEy", "straßeZ", "STRASSEy", "STRAẞEy", "straßeX"]:
        assert dfa.matches(text.encode()) == bool(re.fullmatch("(?i)straße[^x]", text, re.ASCII))


def test_pattern_must_be_a_string():
    with pytest.raises(ConstrainedError, match="is a str"):
        from_regex(b"abc")
