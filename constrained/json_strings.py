"""JSON strings as byte DFAs over their JSON text, quotes included.

A constraint speaks of the decoded string (code points: minLength, maxLength,
pattern, format, const); the automaton reads the encoded text. By default
(``escapes="dumps"``, what JSON Schema output is held to) it accepts the
spellings json.dumps writes, with ensure_ascii on or off: raw ASCII, the short
escapes but \\/, lower-case \\u escapes for other control characters and for
non-ASCII (which may also be raw). That is still every string that satisfies
the constraint, in far fewer states when the constraint is mostly ASCII (a
date-time: 67 states instead of 388), since an ASCII character has one
spelling.

With ``escapes="any"`` every character may be spelled any way JSON allows:
raw UTF-8 unless it must be escaped (", \\ and U+0000-U+001F), a short escape
(\\" \\\\ \\/ \\b \\f \\n \\r \\t), \\uXXXX in either hex case, or a surrogate
pair of those for code points above U+FFFF. Whatever is accepted, either way,
decodes to a string that satisfies the constraint. Lone surrogates (which
json.loads would produce from a lone \\uD800) are not characters and are never
accepted.

The constraint compiles as one regular expression over code points (see
ecma_regex and json_formats) whose character sets are spelled by the encoding
(``json_encoding`` or ``dumps_encoding``) as alternative byte sequences, hex
digits as digit ranges, so escapes cost a few states per character position
rather than a 4096-way expansion.
"""

from functools import lru_cache, reduce

import numpy as np

from . import json_formats
from .dfa import (
    MAX_CODE_POINT,
    MAX_STATES,
    DFA,
    complement_ranges,
    difference,
    empty,
    from_regex,
    intersect,
    is_empty,
    known,
    literal,
    longest,
    minimize,
    utf8_encoding,
)
from .ecma_regex import ANCHOR_BYTES, ANY, END, START, leading_lookaheads, search_pattern, tempered_token
from .errors import ConstrainedError

_SHORT_ESCAPES = {0x22: '"', 0x5C: "\\", 0x2F: "/", 0x08: "b", 0x0C: "f", 0x0A: "n", 0x0D: "r", 0x09: "t"}
_MUST_ESCAPE = [(0x00, 0x1F), (0x22, 0x22), (0x5C, 0x5C)]
_BACKSLASH_U = (((0x5C, 0x5C),), ((0x75, 0x75),))
_QUOTE = 0x22


def _hex_digit_bytes(lo: int, hi: int, upper: bool) -> tuple[tuple[int, int], ...]:
    """The bytes spelling the hexadecimal digit values lo..hi (letters in
    lower case, and in upper case too if ``upper``)."""
    ranges = []
    if lo <= 9:
        ranges.append((0x30 + lo, 0x30 + min(hi, 9)))
    if hi >= 10:
        a, b = max(lo, 10) - 10, hi - 10
        ranges += [(0x61 + a, 0x61 + b)] + ([(0x41 + a, 0x41 + b)] if upper else [])
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


def _u_escapes(lo: int, hi: int, upper: bool) -> list[tuple]:
    """\\uXXXX spellings of the 16-bit code units lo..hi."""
    return [_BACKSLASH_U + tuple(_hex_digit_bytes(a, b, upper) for a, b in digits) for digits in _hex_ranges(lo, hi)]


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


def _clip(ranges, lo: int, hi: int) -> list[tuple[int, int]]:
    return [(max(a, lo), min(b, hi)) for a, b in ranges if max(a, lo) <= min(b, hi)]


def _spellings(lo: int, hi: int, every: bool) -> tuple:
    """The JSON spellings of the code points lo..hi, in from_regex's encoding
    interface (alternative sequences of byte sets): every spelling, or only
    those json.dumps writes with ensure_ascii on or off (no \\/, lower-case
    hex, \\u only for control characters and non-ASCII)."""
    out = []
    for a, b in _clip(complement_ranges(_MUST_ESCAPE), lo, hi):
        out += utf8_encoding(a, b)
    for code, letter in _SHORT_ESCAPES.items():
        if lo <= code <= hi and (every or letter != "/"):
            out.append((((0x5C, 0x5C),), ((ord(letter), ord(letter)),)))
    if every:
        escaped = [(0x0000, 0xD7FF), (0xE000, 0xFFFF)]
    else:
        short = [(c, c) for c in _SHORT_ESCAPES if c != 0x2F]
        escaped = complement_ranges([(0x20, 0x7E), (0xD800, 0xDFFF), (0x10000, MAX_CODE_POINT)] + short)
    for a, b in _clip(escaped, lo, hi):
        out += _u_escapes(a, b, upper=every)
    if hi >= 0x10000:
        for (h_lo, h_hi), (l_lo, l_hi) in _surrogate_blocks(max(lo, 0x10000), hi):
            highs, lows = _u_escapes(h_lo, h_hi, every), _u_escapes(l_lo, l_hi, every)
            out += [high + low for high in highs for low in lows]
    return tuple(out)


@lru_cache(maxsize=4096)
def json_encoding(lo: int, hi: int) -> tuple:
    """Every JSON spelling of the code points lo..hi."""
    return _spellings(lo, hi, every=True)


@lru_cache(maxsize=4096)
def dumps_encoding(lo: int, hi: int) -> tuple:
    """The spellings json.dumps writes (ensure_ascii on or off) of lo..hi."""
    return _spellings(lo, hi, every=False)


_ENCODINGS = {"any": json_encoding, "dumps": dumps_encoding}


def _encoding(escapes: str):
    if escapes not in _ENCODINGS:
        raise ConstrainedError(f"escapes must be 'any' or 'dumps', got {escapes!r}")
    return _ENCODINGS[escapes]


def _content(pattern: str, encoding, what: str) -> DFA:
    """The encoded text (no quotes) of the strings that fully match ``pattern``
    (Python syntax over code points)."""
    try:
        return from_regex(pattern, encoding)
    except ConstrainedError as e:
        if "matches no string" in str(e):
            return empty()
        if "too complex" in str(e):
            raise ConstrainedError(
                f"{what} is too complex: {str(e).split(': ', 1)[-1]}; simplify it (an unanchored pattern "
                "starts and ends with any characters, so counted repeats multiply its states)"
            ) from None
        raise ConstrainedError(f"{what} cannot be compiled: {e}") from None


@lru_cache(maxsize=None)
def _with_anchors(encoding):
    """``encoding``, and the anchor marks of search patterns as their bytes."""

    def encode(lo: int, hi: int) -> tuple:
        if lo == hi and lo in ANCHOR_BYTES:
            return ((((ANCHOR_BYTES[lo],) * 2,),),)
        return encoding(lo, hi)

    return encode


def _pattern_content(pattern: str, encoding) -> DFA:
    """The encoded text of the strings in which ``pattern`` (ECMA-262) matches,
    its leading lookaheads (ecma_regex.leading_lookaheads) as intersections
    and differences, and a tempered token's (ecma_regex.tempered_token) as
    differences."""
    tempered = tempered_token(pattern)
    if tempered is not None:
        return _tempered_content(*tempered, encoding, pattern)
    rest, lookaheads = leading_lookaheads(pattern)
    if not lookaheads:
        return _search_content(pattern, encoding, pattern)
    try:
        found = _search_content(rest, encoding, pattern)
        for positive, look in lookaheads:
            found = (intersect if positive else difference)(found, _search_content(look, encoding, pattern))
    except ConstrainedError as e:
        raise ConstrainedError(f"{e} (in pattern {pattern!r}, whose leading lookaheads are read apart)") from None
    return found


def _tempered_content(rest: str, bodies: list, encoding, pattern: str) -> DFA:
    """``^((?!R).)*$``: the strings of ``rest`` (``^(?:.)*$``) in which no body
    R matches from a character's position: those in which R matches somewhere
    are taken away, R never matching the empty string (else it would match at
    the end too, where the pattern does not look)."""
    try:
        found = _search_content(rest, encoding, pattern)
        for body in bodies:
            whole = _search_content(f"^(?:{body})$", encoding, pattern)
            if whole.accepting[whole.start]:
                raise ConstrainedError(f"pattern {pattern!r} has a lookahead (?!{body}) that may match the empty "
                                       "string, which is not supported: only lookaheads that read a character are")
            found = difference(found, _search_content(body, encoding, pattern))
    except ConstrainedError as e:
        raise ConstrainedError(f"{e} (in pattern {pattern!r}, whose lookaheads are read apart)") from None
    return found


def _search_content(pattern: str, encoding, whole: str) -> DFA:
    """The encoded text of the strings in which ``pattern`` (part of ``whole``)
    matches: the search pattern reads them between anchor marks, which are
    then taken off (the DFA starts after the START marks, and accepts where
    the END marks would lead to acceptance)."""
    search, starts, ends = search_pattern(pattern)
    marked = _content(search, _with_anchors(encoding), f"pattern {whole!r}")
    start_mark, end_mark = ANCHOR_BYTES[START], ANCHOR_BYTES[END]
    start = marked.start
    for _ in range(starts):
        start = int(marked.transitions[start, start_mark])
        if start < 0:
            return empty()
    after_end = marked.transitions[:, end_mark]
    accepting = marked.accepting
    for _ in range(ends):
        accepting = (after_end >= 0) & accepting[np.maximum(after_end, 0)]
    transitions = marked.transitions.copy()
    transitions[:, [start_mark, end_mark]] = -1
    dfa = minimize(transitions, accepting, start)
    return empty() if dfa is None else dfa


def _length(low: int, high: int | None, encoding, reads: np.ndarray | None = None) -> DFA:
    """The encoded text of strings of low..high code points, built directly as
    copies of the one-character automaton (a counted regex would be slower).
    With ``reads`` (256 bools), only the spellings made of those bytes: a
    pattern of ASCII letters meets maxLength 1024 in a thousand states, not
    the 24 a character that escapes and UTF-8 take."""
    one = from_regex(ANY, encoding)
    if reads is not None:
        one = minimize(np.where(reads, one.transitions, -1).astype(np.int32), one.accepting)
        if one is None:  # no character can be spelled: only the empty string is left
            return literal(b"") if low == 0 else empty()
    # One character's spellings are prefix-free: one final state, with no way out.
    (final,) = np.flatnonzero(one.accepting)
    inner = np.flatnonzero(~one.accepting)
    index = np.full(one.n_states, -1, dtype=np.int64)
    index[inner] = np.arange(len(inner))
    width, copies = len(inner), (low if high is None else high) + 1
    if copies * width > MAX_STATES:
        raise ConstrainedError(
            f"a string of {low} to {high} characters is too complex: its automaton exceeds {MAX_STATES} states "
            f"(about {width} a character, for the ways one may be spelled); lower "
            f"{'minLength' if high is None else 'maxLength'} to at most {MAX_STATES // width - 1}"
        )
    step = one.transitions[inner]  # (width, 256), in one's numbering
    rows = []
    for k in range(copies):  # copy k: k characters read so far
        after = k + 1 if k + 1 < copies else (k if high is None else -1)
        finished = -1 if after < 0 else after * width + index[one.start]
        rows.append(np.where(step == final, finished, np.where(step >= 0, k * width + index[np.maximum(step, 0)], -1)))
    accepting = np.zeros(copies * width, dtype=bool)
    accepting[np.arange(low, copies) * width + index[one.start]] = True
    return minimize(np.vstack(rows).astype(np.int32), accepting)


def _count(value, name: str) -> int | None:
    """A length bound: a non-negative integer (2.0 is one, as JSON Schema says)."""
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConstrainedError(f"{name} must be a non-negative integer, got {value!r}")
    return value


def _quoted(content: DFA) -> DFA:
    """``"`` content ``"``: deterministic as it is, since no accepting state of
    encoded content reads a raw quote (a quote inside is always escaped)."""
    if is_empty(content):
        return empty()
    n = content.n_states
    transitions = np.full((n + 2, 256), -1, dtype=np.int32)
    transitions[0, _QUOTE] = 1 + content.start
    transitions[1 : n + 1] = np.where(content.transitions >= 0, content.transitions + 1, -1)
    transitions[1 + np.flatnonzero(content.accepting), _QUOTE] = n + 1
    accepting = np.zeros(n + 2, dtype=bool)
    accepting[n + 1] = True
    return DFA(transitions, accepting)


def string(
    min_length: int = 0,
    max_length: int | None = None,
    pattern: str | None = None,
    format: str | None = None,
    *,
    escapes: str = "dumps",
) -> DFA:
    """The JSON texts of the strings of min_length..max_length code points
    that match ``pattern`` (ECMA-262, anywhere in the string unless anchored)
    and ``format``; spelled as json.dumps writes them (``escapes="dumps"``),
    or any way JSON allows (``"any"``: several times more states, since an
    ASCII character then has several spellings). The result may be empty
    (contradictory constraints): check with dfa.is_empty."""
    encoding = _encoding(escapes)
    min_length, max_length = _count(min_length, "minLength") or 0, _count(max_length, "maxLength")
    if max_length is not None and max_length < min_length:
        return empty()
    parts = []
    if pattern is not None:
        parts.append(_pattern_content(pattern, encoding))
    counted = max_length
    if format is not None:
        parts.append(_content(json_formats.regex(format), encoding, f"format {format!r}"))
        if max_length is not None and (sizes := json_formats.sizes(format, max_length)) is not None:
            parts.append(_content(sizes, encoding, f"format {format!r}"))
            counted = None  # (within its sizes, no string is longer)
    if not parts:
        return _quoted(_length(min_length, max_length, encoding))
    what = f"a string with minLength {min_length}, maxLength {max_length}, pattern {pattern!r} and format {format!r}"
    content = _meet(parts, what)
    if counted is not None and (most := longest(content)) is not None and most <= max_length:
        counted = None  # (no string it accepts is longer: a character takes a byte at least)
    if min_length or counted is not None:
        reads = (content.transitions >= 0).any(axis=0)  # the bytes the pattern and format read
        content = _meet([content, _length(min_length, counted, encoding, reads)], what)
    return _quoted(content)


def _meet(automata: list, what: str) -> DFA:
    """The intersection of ``automata``; ``what`` names the constraint where it is too complex."""
    try:
        return reduce(intersect, automata)
    except ConstrainedError as e:
        raise ConstrainedError(f"{what} is {str(e).removeprefix('the combined automaton is ')}") from None


def matching(regex: str, *, escapes: str = "dumps") -> DFA:
    """The JSON texts of the strings that fully match ``regex`` (Python syntax,
    code points)."""
    return _quoted(content(regex, escapes=escapes))


def content(regex: str, *, escapes: str = "dumps") -> DFA:
    """The JSON text between the quotes of the strings that fully match
    ``regex`` (Python syntax, code points)."""
    return _content(regex, _encoding(escapes), f"regex {regex!r}")


def string_literal(value: str, *, escapes: str = "dumps") -> DFA:
    """The JSON texts of exactly ``value``."""
    return enum_strings([value], escapes=escapes)


def enum_strings(values, *, escapes: str = "dumps") -> DFA:
    """The JSON texts of any of ``values``."""
    values = list(values)
    for value in values:
        if not isinstance(value, str):
            raise ConstrainedError(f"enum_strings takes strings, got {value!r}")
        if any(0xD800 <= ord(c) <= 0xDFFF for c in value):
            raise ConstrainedError(f"the string {value!r} has a lone surrogate, which cannot be written as UTF-8")
    if not values:
        return empty()
    return known(_quoted(_spelled(tuple(values), _encoding(escapes))), finite=True)


def _spelled(values: tuple, encoding) -> DFA:
    """The encoded text of exactly ``values``: a trie of their characters'
    spellings, its equal subtrees merged. A spelling is a sequence of byte
    sets, and spellings of single characters agree on a set or share no byte
    (hex digits come with both cases), so the trie is deterministic as it is."""
    edges: list = [{}]  # per state: byte set -> state
    accepting = [False]
    ends: dict = {}  # (state, character) -> the state after that character

    def new_state() -> int:
        edges.append({})
        accepting.append(False)
        return len(edges) - 1

    for value in values:
        state = 0
        for char in value:
            nxt = ends.get((state, char))
            if nxt is None:
                last_steps = []
                for spelling in encoding(ord(char), ord(char)):
                    position = state
                    for byte_set in spelling[:-1]:
                        position = edges[position].get(byte_set) or edges[position].setdefault(byte_set, new_state())
                    last_steps.append((position, spelling[-1]))
                nxt = ends[(state, char)] = new_state()
                for position, byte_set in last_steps:
                    edges[position][byte_set] = nxt
            state = nxt
        accepting[state] = True
    # Every state is created after the states that lead to it: equal subtrees merge from the leaves up,
    # which leaves the minimal automaton of these strings.
    merged = list(range(len(edges)))
    seen: dict = {}
    for state in range(len(edges) - 1, -1, -1):
        key = (accepting[state], frozenset([(byte_set, merged[t]) for byte_set, t in edges[state].items()]))
        merged[state] = seen.setdefault(key, state)
    kept = sorted(set(merged))
    number = {state: i for i, state in enumerate(kept)}
    transitions = np.full((len(kept), 256), -1, dtype=np.int32)
    for state in kept:
        for byte_set, target in edges[state].items():
            for lo, hi in byte_set:
                transitions[number[state], lo:hi + 1] = number[merged[target]]
    return DFA(transitions, np.array([accepting[state] for state in kept]))
