"""JSON strings as byte DFAs over their JSON text, quotes included.

A constraint speaks of the decoded string (code points: minLength, maxLength,
pattern, format, const); the automaton reads the encoded text, where every
character may be spelled any way JSON allows: raw UTF-8 unless it must be
escaped (", \\ and U+0000-U+001F), a short escape (\\" \\\\ \\/ \\b \\f \\n \\r \\t),
\\uXXXX in either hex case, or a surrogate pair of those for code points above
U+FFFF. So ``json.dumps(s)`` and ``json.dumps(s, ensure_ascii=False)`` of a
string that satisfies the constraint are both accepted, and whatever is
accepted decodes to such a string. Lone surrogates (which json.loads would
produce from a lone \\uD800) are not characters and are never accepted.

The constraint compiles as one regular expression over code points (see
ecma_regex and json_formats) whose characters are spelled by ``json_encoding``
at the level of the regex's character sets, so escapes cost a few states per
character position rather than a 4096-way expansion.
"""

from functools import lru_cache, reduce

import numpy as np

from . import json_formats
from .dfa import MAX_STATES, DFA, empty, from_regex, intersect, is_empty, minimize, utf8_encoding
from .ecma_regex import ANY, literal, search_pattern
from .errors import ConstrainedError

_SHORT_ESCAPES = {0x22: '"', 0x5C: "\\", 0x2F: "/", 0x08: "b", 0x0C: "f", 0x0A: "n", 0x0D: "r", 0x09: "t"}
_MUST_ESCAPE = [(0x00, 0x1F), (0x22, 0x22), (0x5C, 0x5C)]
_BACKSLASH_U = (((0x5C, 0x5C),), ((0x75, 0x75),))
_QUOTE = 0x22


def _hex_digit_bytes(lo: int, hi: int) -> tuple[tuple[int, int], ...]:
    """The bytes spelling the hexadecimal digit values lo..hi, either case."""
    ranges = []
    if lo <= 9:
        ranges.append((0x30 + lo, 0x30 + min(hi, 9)))
    if hi >= 10:
        a, b = max(lo, 10) - 10, hi - 10
        ranges += [(0x41 + a, 0x41 + b), (0x61 + a, 0x61 + b)]
    return tuple(ranges)


def _hex_ranges(lo: int, hi: int, width: int = 4) -> list[tuple[tuple[int, int], ...]]:
    """The numbers lo..hi as fixed-width hexadecimal digit-range sequences,
    splitting the range wherever a digit stops running over all 16 values."""
    if width == 1:
        return [((lo, hi),)]
    unit = 16 ** (width - 1)
    first, last = lo // unit, hi // unit
    if first == last:
        return [((first, first),) + rest for rest in _hex_ranges(lo % unit, hi % unit, width - 1)]
    out = []
    if lo % unit:
        out += [((first, first),) + rest for rest in _hex_ranges(lo % unit, unit - 1, width - 1)]
        first += 1
    tail = []
    if hi % unit != unit - 1:
        tail = [((last, last),) + rest for rest in _hex_ranges(0, hi % unit, width - 1)]
        last -= 1
    if first <= last:
        out.append(((first, last),) + ((0, 15),) * (width - 1))
    return out + tail


def _u_escapes(lo: int, hi: int) -> list[tuple]:
    """\\uXXXX spellings of lo..hi (16-bit code units)."""
    return [_BACKSLASH_U + tuple(_hex_digit_bytes(a, b) for a, b in digits) for digits in _hex_ranges(lo, hi)]


def _surrogate_blocks(lo: int, hi: int) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """Astral code points lo..hi as (high surrogates, low surrogates) blocks
    whose pairs are exactly the range."""
    (h_lo, l_lo), (h_hi, l_hi) = divmod(lo - 0x10000, 1024), divmod(hi - 0x10000, 1024)
    if h_lo == h_hi:
        blocks = [((h_lo, h_lo), (l_lo, l_hi))]
    else:
        blocks = []
        if l_lo:
            blocks.append(((h_lo, h_lo), (l_lo, 1023)))
            h_lo += 1
        tail = []
        if l_hi != 1023:
            tail.append(((h_hi, h_hi), (0, l_hi)))
            h_hi -= 1
        if h_lo <= h_hi:
            blocks.append(((h_lo, h_hi), (0, 1023)))
        blocks += tail
    return [((0xD800 + a, 0xD800 + b), (0xDC00 + c, 0xDC00 + d)) for (a, b), (c, d) in blocks]


@lru_cache(maxsize=4096)
def json_encoding(lo: int, hi: int) -> tuple:
    """Every JSON spelling of the code points lo..hi, in from_regex's encoding
    interface: alternative sequences of byte sets."""
    out = []
    raw, start = [], lo
    for a, b in _MUST_ESCAPE:
        if start < a:
            raw.append((start, min(hi, a - 1)))
        start = max(start, b + 1)
    if start <= hi:
        raw.append((start, hi))
    for a, b in raw:
        if a <= b:
            out += utf8_encoding(a, b)
    for code, letter in _SHORT_ESCAPES.items():
        if lo <= code <= hi:
            out.append(((((0x5C, 0x5C),), ((ord(letter), ord(letter)),))))
    for a, b in ((lo, min(hi, 0xD7FF)), (max(lo, 0xE000), min(hi, 0xFFFF))):
        if a <= b:
            out += _u_escapes(a, b)
    if hi >= 0x10000:
        for (h_lo, h_hi), (l_lo, l_hi) in _surrogate_blocks(max(lo, 0x10000), hi):
            out += [high + low for high in _u_escapes(h_lo, h_hi) for low in _u_escapes(l_lo, l_hi)]
    return tuple(out)


def _content(pattern: str, what: str) -> DFA:
    """The encoded text (no quotes) of the strings that fully match ``pattern``
    (Python syntax over code points)."""
    try:
        return from_regex(pattern, json_encoding)
    except ConstrainedError as e:
        if "matches no string" in str(e):
            return empty()
        if "too complex" in str(e):
            raise ConstrainedError(
                f"{what} is too complex: {str(e).split(': ', 1)[-1]}; simplify it (an unanchored pattern "
                "starts and ends with any characters, so counted repeats multiply its states)"
            ) from None
        raise ConstrainedError(f"{what} cannot be compiled: {e}") from None


@lru_cache(maxsize=1)
def _one_character() -> DFA:
    return from_regex(ANY, json_encoding)


def _length(low: int, high: int | None) -> DFA:
    """The encoded text of strings of low..high code points, built directly as
    copies of the one-character automaton (faster than a counted regex)."""
    one = _one_character()
    # One character's encodings are prefix-free: a single final state, with no way out.
    (final,) = np.flatnonzero(one.accepting)
    inner = [s for s in range(one.n_states) if s != final]
    index = np.full(one.n_states, -1, dtype=np.int64)
    index[inner] = np.arange(len(inner))
    width = len(inner)
    copies = (high if high is not None else low) + 1
    if copies * width > MAX_STATES:
        raise ConstrainedError(f"too complex: its automaton exceeds {MAX_STATES} states")
    step = one.transitions[inner]  # (width, 256), targets in one's numbering
    rows = []
    for k in range(copies):
        nxt = k + 1 if k + 1 < copies else (k if high is None else -1)
        finished = np.full_like(step, -1) if nxt < 0 else np.full_like(step, nxt * width + index[one.start])
        within = np.where(step >= 0, k * width + index[np.maximum(step, 0)], -1)
        rows.append(np.where(step == final, finished, within))
    transitions = np.vstack(rows).astype(np.int32)
    accepting = np.zeros(copies * width, dtype=bool)
    accepting[np.arange(low, copies) * width + index[one.start]] = True
    return minimize(transitions, accepting)


def _quoted(content: DFA) -> DFA:
    """``"`` content ``"``: deterministic as it is, since no accepting state of
    encoded content reads a raw quote (a quote inside is always escaped)."""
    if is_empty(content):
        return empty()
    n = content.n_states
    transitions = np.full((n + 2, 256), -1, dtype=np.int32)
    transitions[0, _QUOTE] = 1 + content.start
    inner = content.transitions
    transitions[1 : n + 1] = np.where(inner >= 0, inner + 1, -1)
    assert (inner[content.accepting, _QUOTE] < 0).all()
    transitions[1 + np.flatnonzero(content.accepting), _QUOTE] = n + 1
    accepting = np.zeros(n + 2, dtype=bool)
    accepting[n + 1] = True
    return DFA(transitions, accepting)


def string(min_length: int = 0, max_length: int | None = None, pattern: str | None = None, format: str | None = None) -> DFA:
    """The JSON text of the strings of min_length..max_length code points that
    match ``pattern`` (ECMA-262, anywhere in the string unless anchored) and
    ``format``. The result may be empty (contradictory constraints): check
    with dfa.is_empty."""
    for name, value in (("minLength", min_length), ("maxLength", max_length)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise ConstrainedError(f"{name} must be a non-negative integer, got {value!r}")
    if max_length is not None and max_length < min_length:
        return empty()
    parts = []
    if pattern is not None:
        parts.append(_content(search_pattern(pattern), f"pattern {pattern!r}"))
    if format is not None:
        parts.append(_content(json_formats.regex(format), f"format {format!r}"))
    if min_length or max_length is not None or not parts:
        try:
            parts.append(_length(min_length, max_length))
        except ConstrainedError as e:
            raise ConstrainedError(
                f"a string of {min_length}..{max_length} characters is {e}: every character position "
                "costs about 20 states (its escapes); lower maxLength (up to about 900 fits)"
            ) from None
    try:
        content = reduce(intersect, parts)
    except ConstrainedError as e:
        given = ", ".join(
            f"{k}={v!r}" for k, v in (("minLength", min_length), ("maxLength", max_length), ("pattern", pattern),
                                      ("format", format)) if v not in (None, 0)
        )  # fmt: skip
        raise ConstrainedError(f"a string with {given}: {e}") from None
    return _quoted(content)


def string_literal(value: str) -> DFA:
    """The JSON texts of exactly ``value`` (every escaping of it)."""
    return enum_strings([value])


def enum_strings(values) -> DFA:
    """The JSON texts of any of ``values`` (every escaping of each)."""
    values = list(values)
    for value in values:
        if not isinstance(value, str):
            raise ConstrainedError(f"enum_strings takes strings, got {value!r}")
        if any(0xD800 <= ord(c) <= 0xDFFF for c in value):
            raise ConstrainedError(f"the string {value!r} has a lone surrogate, which cannot be written as UTF-8")
    if not values:
        return empty()
    return _quoted(_content("|".join(f"(?:{literal(v)})" for v in values), "the string values"))
