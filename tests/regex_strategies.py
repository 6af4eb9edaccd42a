"""Hypothesis strategies for regular expressions of a broad family, and for
strings to test them on.

Each regex comes as a pair: the pattern, and the same pattern with ``\\d``, ``\\w``
and ``\\s`` spelled out as their ASCII classes. The engine reads patterns with
re.ASCII semantics; hypothesis' from_regex generates strings for the spelled-out
form (it cannot combine re.ASCII with non-ASCII classes)."""

import re
from re import _constants as sre, _parser as sre_parser

from hypothesis import strategies as st

LETTERS = ["a", "b", "c", "x", "0", "1", "9", "-", ".", " ", "é", "ü", "€", "😀", "\n", '"']
CLASSES = [
    (r".", r"."),
    (r"\d", r"[0-9]"),
    (r"\w", r"[a-zA-Z0-9_]"),
    (r"\s", r"[ \t\n\r\f\v]"),
    (r"\D", r"[^0-9]"),
    (r"\W", r"[^a-zA-Z0-9_]"),
    (r"[abc]", r"[abc]"),
    (r"[a-c0-9]", r"[a-c0-9]"),
    (r"[^a]", r"[^a]"),
    (r"[^\n]", r"[^\n]"),
    (r"[é-ü]", r"[é-ü]"),
    (r"[^é]", r"[^é]"),
    (r"[a-zA-Z]", r"[a-zA-Z]"),
    (r"[\d.]", r"[0-9.]"),
    (r'[^"\\]', r'[^"\\]'),
    (r"[😀-😂x]", r"[😀-😂x]"),
]

atoms = st.one_of(st.sampled_from(LETTERS).map(lambda c: (re.escape(c),) * 2), st.sampled_from(CLASSES))


def _quantified(inner):
    quantifier = st.sampled_from(["", "", "*", "+", "?", "{2}", "{0,3}", "{1,2}", "{2,}", "*?"])
    return st.tuples(inner, quantifier).map(
        lambda t: tuple(f"(?:{p}){t[1]}" for p in t[0]) if t[1] else t[0]
    )


def _join(parts, sep, wrap):
    return tuple(wrap(sep.join(p[i] for p in parts)) for i in (0, 1))


def _extend(children):
    concat = st.lists(children, min_size=2, max_size=3).map(lambda xs: _join(xs, "", lambda s: s))
    alternation = st.lists(children, min_size=2, max_size=3).map(lambda xs: _join(xs, "|", lambda s: f"(?:{s})"))
    return _quantified(st.one_of(concat, alternation))


regex_pairs = st.recursive(_quantified(atoms), _extend, max_leaves=8)
regexes = regex_pairs.map(lambda pair: pair[0])


def members(pair):
    """Strings of the language of a (pattern, spelled-out pattern) pair, built
    from Python's own parse of the spelled-out pattern. (hypothesis' from_regex
    sometimes spins for minutes in a filtered draw on these nested patterns.)"""
    return _from_parse(sre_parser.parse(pair[1]), flags=0)


def _from_parse(items, flags):
    parts = [_from_item(op, arg, flags) for op, arg in items]
    return st.tuples(*parts).map("".join) if parts else st.just("")


_ANY = st.characters(codec="utf-8", exclude_characters="\n")


def _from_item(op, arg, flags):
    if op is sre.LITERAL:
        return st.just(chr(arg))
    if op is sre.NOT_LITERAL:
        return _ANY.filter(lambda c: c != chr(arg))
    if op is sre.ANY:
        return _ANY
    if op is sre.IN:
        ranges = [(a, a) if kind is sre.LITERAL else a for kind, a in arg if kind in (sre.LITERAL, sre.RANGE)]
        if any(kind is sre.NEGATE for kind, _ in arg):
            return _ANY.filter(lambda c: not any(lo <= ord(c) <= hi for lo, hi in ranges))
        return st.sampled_from(ranges).flatmap(lambda r: st.integers(*r).map(chr))
    if op is sre.BRANCH:
        return st.one_of(*[_from_parse(branch, flags) for branch in arg[1]])
    if op is sre.SUBPATTERN:
        return _from_parse(arg[-1], flags)
    if op in (sre.MAX_REPEAT, sre.MIN_REPEAT):
        low, high, items = arg
        high = low + 3 if high is sre.MAXREPEAT else high
        return st.lists(_from_parse(items, flags), min_size=low, max_size=high).map("".join)
    raise NotImplementedError(op)


# (pair, a string of its language)
regex_members = regex_pairs.flatmap(lambda pair: st.tuples(st.just(pair), members(pair)))


# Strings over the same letters (and a few others), to test rejection too.
texts = st.text(alphabet=st.sampled_from(LETTERS + ["d", "Z", "_", "\t", "中"]), max_size=8)


def compile_or_reject(pattern):
    """The Constraint for ``pattern``; patterns refused as too complex (a bounded,
    clear error) are not examples of anything else."""
    from hypothesis import reject

    import constrained

    try:
        return constrained.regex(pattern)
    except constrained.ConstrainedError as e:
        if "too complex" in str(e):
            reject()
        raise
