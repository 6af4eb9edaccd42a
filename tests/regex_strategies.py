"""Hypothesis strategies for regular expressions of a broad family, and for
strings to test them on.

Each regex comes as a pair: the pattern, and the same pattern with ``\\d``, ``\\w``
and ``\\s`` spelled out as their ASCII classes. The engine reads patterns with
re.ASCII semantics; hypothesis' from_regex generates strings for the spelled-out
form (it cannot combine re.ASCII with non-ASCII classes)."""

import re

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
    """Strings of the language of a (pattern, spelled-out pattern) pair."""
    return st.from_regex(pair[1], fullmatch=True)


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
