"""Regular expressions as minimal deterministic automata over UTF-8 bytes.

interegular parses the pattern into an automaton over characters; each character
transition is spelled out as UTF-8 byte sequences (so that a token may end inside
a character), then the byte automaton is minimised and trimmed to the states that
are reachable and can still reach an accepting state. Patterns follow Python's
``re.fullmatch`` with ``re.ASCII`` for ``\\d``, ``\\w``, ``\\s``; constructs that an
automaton cannot enforce exactly are refused, never approximated.
"""

import re
from dataclasses import dataclass
from functools import lru_cache

import interegular
import numpy as np
from interegular.fsm import anything_else

from .errors import ConstrainedError

try:  # Python 3.11+ keeps the regex parser here
    from re import _constants as sre_constants, _parser as sre_parser
except ImportError:  # pragma: no cover
    import sre_constants
    import sre_parse as sre_parser

MAX_CODE_POINT = 0x10FFFF
DEAD = -1


@dataclass(frozen=True, eq=False)
class DFA:
    """A deterministic automaton over bytes. ``transitions[s, b]`` is the state
    after byte ``b`` in state ``s``, or -1; every state is reachable from
    ``start`` (0) and can reach an accepting state."""

    transitions: np.ndarray  # (n_states, 256) int32
    accepting: np.ndarray  # (n_states,) bool

    start = 0

    @property
    def n_states(self) -> int:
        return len(self.accepting)

    def run(self, data: bytes, state: int = 0) -> int:
        """The state after ``data`` from ``state``, or -1."""
        for b in data:
            state = self.transitions[state, b]
            if state < 0:
                return DEAD
        return int(state)

    def forced(self, state: int) -> bytes:
        """The bytes every continuation from ``state`` starts with."""
        out = bytearray()
        while not self.accepting[state] and len(out) < 4096:
            live = np.flatnonzero(self.transitions[state] >= 0)
            if len(live) != 1:
                break
            out.append(int(live[0]))
            state = int(self.transitions[state, live[0]])
        return bytes(out)

    def matches(self, data: bytes) -> bool:
        state = self.run(data)
        return state >= 0 and bool(self.accepting[state])


@lru_cache(maxsize=256)
def from_regex(pattern: str) -> DFA:
    """The minimal byte-level DFA of ``pattern`` (whole-string match)."""
    if not isinstance(pattern, str):
        raise ConstrainedError(f"a regular expression is a str, got {type(pattern).__name__}")
    _check_supported(pattern)
    try:
        fsm = interegular.parse_pattern(_unicode_escapes_to_literals(pattern)).to_fsm()
    except interegular.patterns.Unsupported as e:
        raise ConstrainedError(f"regular expression {pattern!r} uses a construct that cannot be enforced: {e}") from None
    except Exception as e:  # interegular's parse errors have no common base class
        detail = f": {e}" if str(e) else ""
        raise ConstrainedError(f"cannot parse regular expression {pattern!r} ({type(e).__name__}{detail})") from None
    transitions, accepting = _byte_automaton(fsm)
    dfa = minimize(transitions, accepting)
    if dfa is None:
        raise ConstrainedError(f"regular expression {pattern!r} matches no string")
    return dfa


_CANNOT = "which an automaton cannot enforce exactly"
_REFUSED = {
    sre_constants.AT: "anchors or word boundaries (^, $, \\A, \\Z, \\b, \\B), which are not supported: "
    "the whole output is matched anyway, so leave out ^ and $",
    sre_constants.ASSERT: f"a lookaround, {_CANNOT}",
    sre_constants.ASSERT_NOT: f"a lookaround, {_CANNOT}",
    sre_constants.GROUPREF: f"a backreference, {_CANNOT}",
    sre_constants.GROUPREF_EXISTS: f"a conditional group, {_CANNOT}",
    sre_constants.ATOMIC_GROUP: f"an atomic group, {_CANNOT}",
    sre_constants.POSSESSIVE_REPEAT: f"a possessive quantifier, {_CANNOT}",
}
_REFUSED_FLAGS = {re.MULTILINE: "re.MULTILINE", re.VERBOSE: "re.VERBOSE", re.LOCALE: "re.LOCALE"}
_NON_ASCII = re.compile(r"[^\x00-\x7f]|\\[uUNx]")


def _check_supported(pattern: str) -> None:
    """Refuse what Python's own parser finds that an automaton cannot enforce."""
    try:
        parsed = sre_parser.parse(pattern)
    except re.error as e:
        raise ConstrainedError(f"invalid regular expression {pattern!r}: {e}") from None
    flags = parsed.state.flags
    stack = [parsed]
    while stack:
        for op, arg in stack.pop():
            if op in _REFUSED:
                raise ConstrainedError(f"regular expression {pattern!r} uses {_REFUSED[op]}")
            if op is sre_constants.SUBPATTERN:
                flags |= arg[1]
                stack.append(arg[-1])
            elif op in (sre_constants.MAX_REPEAT, sre_constants.MIN_REPEAT):
                stack.append(arg[2])
            elif op is sre_constants.BRANCH:
                stack.extend(arg[1])
    for flag, name in _REFUSED_FLAGS.items():
        if flags & flag:
            raise ConstrainedError(f"regular expression {pattern!r} uses the unsupported flag {name}")
    if flags & re.IGNORECASE and _NON_ASCII.search(pattern):
        raise ConstrainedError(
            f"regular expression {pattern!r}: case-insensitive matching is supported for ASCII letters only"
        )


_UNICODE_ESCAPE = re.compile(r"(\\\\)|\\u([0-9a-fA-F]{4})|\\U([0-9a-fA-F]{8})|\\N\{([^}]*)\}")


def _unicode_escapes_to_literals(pattern: str) -> str:
    """interegular does not read ``\\uXXXX``; spell such characters out (escaped)."""

    def literal(m: re.Match) -> str:
        if m.group(1):
            return m.group(1)
        if m.group(4) is not None:
            import unicodedata

            return re.escape(unicodedata.lookup(m.group(4)))
        return re.escape(chr(int(m.group(2) or m.group(3), 16)))

    return _UNICODE_ESCAPE.sub(literal, pattern)


def _ranges(code_points) -> list[tuple[int, int]]:
    out = []
    for c in sorted(code_points):
        if out and out[-1][1] == c - 1:
            out[-1] = (out[-1][0], c)
        else:
            out.append((c, c))
    return out


def _complement(ranges) -> list[tuple[int, int]]:
    out, lo = [], 0
    for a, b in ranges:
        if a > lo:
            out.append((lo, a - 1))
        lo = b + 1
    if lo <= MAX_CODE_POINT:
        out.append((lo, MAX_CODE_POINT))
    return out


@lru_cache(maxsize=4096)
def utf8_sequences(lo: int, hi: int) -> tuple[tuple[tuple[int, int], ...], ...]:
    """The code points ``lo..hi`` (surrogates left out) as UTF-8 byte-range
    sequences: each is a tuple of (low, high) byte ranges, one per byte."""
    out, todo = [], [(lo, hi)]
    while todo:
        lo, hi = todo.pop()
        if lo > hi:
            continue
        if lo <= 0xDFFF and hi >= 0xD800:
            todo += [(lo, 0xD7FF), (0xE000, hi)]
            continue
        split = next((b for b in (0x7F, 0x7FF, 0xFFFF) if lo <= b < hi), None)
        if split is not None:
            todo += [(lo, split), (split + 1, hi)]
            continue
        n = len(chr(lo).encode())
        for i in range(1, n):
            m = (1 << (6 * i)) - 1
            if lo & ~m != hi & ~m:
                if lo & m:
                    todo += [(lo, lo | m), ((lo | m) + 1, hi)]
                    break
                if hi & m != m:
                    todo += [(lo, (hi & ~m) - 1), (hi & ~m, hi)]
                    break
        else:
            out.append(tuple(zip(chr(lo).encode(), chr(hi).encode())))
    return tuple(sorted(out))


def _byte_automaton(fsm) -> tuple[np.ndarray, np.ndarray]:
    """Spell interegular's character automaton over UTF-8 bytes.

    A state in the middle of a character is named by the byte-range suffixes still
    pending and where each leads, so states that finish the same characters the
    same way are shared.
    """
    alphabet = fsm.alphabet
    # Case folding can give multi-character symbols ("SS" for "ß"); they never match one character.
    def single(c) -> bool:
        return c is not anything_else and len(c) == 1

    explicit = {ord(c) for c in alphabet if single(c)}
    chars_of_key: dict[int, list[tuple[int, int]]] = {}
    for key, symbols in alphabet.by_transition.items():
        points = {ord(c) for c in symbols if single(c)}
        ranges = _ranges(points)
        if anything_else in symbols:
            ranges = sorted(ranges + _complement(_ranges(explicit)))
        chars_of_key[key] = ranges

    ids = {("char", s): i for i, s in enumerate(sorted(fsm.states, key=lambda s: s != fsm.initial))}
    rows, accepting, todo = [], [], []

    def state_id(name) -> int:
        if name not in ids:
            ids[name] = len(ids)
            todo.append(name)
        return ids[name]

    def fill(row: np.ndarray, items) -> None:
        """items: (byte-range sequence, target character state)."""
        by_first: dict[tuple[int, int], set] = {}
        for seq, target in items:
            by_first.setdefault(seq[0], set()).add((seq[1:], target))
        bounds = sorted({b for lo, hi in by_first for b in (lo, hi + 1)})
        position = {b: i for i, b in enumerate(bounds)}
        covering = [set() for _ in bounds[1:]]
        for (lo, hi), rests in by_first.items():
            for k in range(position[lo], position[hi + 1]):
                covering[k] |= rests
        for k, rests in enumerate(covering):
            if not rests:
                continue
            ends = [target for rest, target in rests if not rest]
            # UTF-8 is prefix-free, so a byte that ends one character starts no other.
            if ends:
                row[bounds[k]:bounds[k + 1]] = ids[("char", ends[0])]
            else:
                row[bounds[k]:bounds[k + 1]] = state_id(("bytes", frozenset(rests)))

    by_id = sorted(ids, key=ids.get)
    todo.extend(by_id)
    done = 0
    while done < len(todo):
        name = todo[done]
        done += 1
        row = np.full(256, DEAD, dtype=np.int32)
        kind, what = name
        if kind == "char":
            items = [
                (seq, target)
                for key, target in fsm.map.get(what, {}).items()
                for lo, hi in chars_of_key.get(key, ())
                for seq in utf8_sequences(lo, hi)
            ]
            accepting_here = what in fsm.finals
        else:
            items, accepting_here = list(what), False
        fill(row, items)
        rows.append((ids[name], row, accepting_here))
    transitions = np.full((len(ids), 256), DEAD, dtype=np.int32)
    accept = np.zeros(len(ids), dtype=bool)
    for i, row, acc in rows:
        transitions[i] = row
        accept[i] = acc
    return transitions, accept


_MIXERS = np.random.default_rng(0x5EED).integers(1, 2**63, size=257, dtype=np.int64) | 1


def _renumber(keys: np.ndarray) -> np.ndarray:
    """Dense ids for equal keys (np.unique's inverse; a dict is faster on small arrays)."""
    if len(keys) > 2000:
        return np.unique(keys, return_inverse=True)[1].ravel()
    ids: dict = {}
    return np.array([ids.setdefault(k, len(ids)) for k in keys.tolist()], dtype=np.int64)


def _hash_rows(rows: np.ndarray) -> np.ndarray:
    """A 64-bit hash per row, for grouping equal rows; callers check the grouping."""
    weights = np.random.default_rng(rows.shape[1]).integers(1, 2**63, size=rows.shape[1], dtype=np.int64) | 1
    with np.errstate(over="ignore"):
        return (rows.astype(np.int64) * weights).sum(axis=1)


def byte_classes(transitions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Bytes no state tells apart share a class: returns (class of each byte, and
    the transitions with one column per class)."""
    byte_class = _renumber(_hash_rows(transitions.T))
    first = np.unique(byte_class, return_index=True)[1]
    columns = transitions[:, first]
    if not np.array_equal(columns[:, byte_class], transitions):  # a hash collision
        columns, byte_class = np.unique(transitions, axis=1, return_inverse=True)
    return byte_class.ravel(), columns


def _refine(block: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """Moore's partition refinement, every state at once: split blocks by the
    blocks their byte classes lead to until nothing splits. Rows are compared
    through a hash; the result is then checked to be a congruence, and refined
    exactly in the astronomically rare case of a collision."""
    block = _renumber(block)
    with np.errstate(over="ignore"):
        while True:
            new_block = _renumber(block * _MIXERS[0] + _hash_rows(block[columns]))
            if new_block.max() == block.max():
                break
            block = new_block
    successors = block[columns]
    representative = np.zeros(block.max() + 1, dtype=np.int64)
    representative[block[::-1]] = np.arange(len(block))[::-1]
    while not np.array_equal(successors, successors[representative[block]]):
        _, block = np.unique(np.column_stack([block, successors]), axis=0, return_inverse=True)
        block = block.ravel()
        successors = block[columns]
        representative = np.zeros(block.max() + 1, dtype=np.int64)
        representative[block[::-1]] = np.arange(len(block))[::-1]
    return block


def minimize(transitions: np.ndarray, accepting: np.ndarray, start: int = 0) -> DFA | None:
    """The minimal DFA equivalent to (transitions, accepting) from ``start``, with
    only live states, renumbered so that the start is 0; None if it accepts nothing."""
    n = len(accepting)
    sink = n
    full = np.vstack([transitions, np.full((1, 256), sink, dtype=np.int32)])
    full[full < 0] = sink
    _, columns = byte_classes(full)
    block = _refine(np.append(accepting, False).astype(np.int64), columns)
    n_blocks = int(block.max()) + 1
    dead_block = block[sink]
    if block[start] == dead_block:
        return None
    # One representative per block, blocks renumbered in breadth-first order from the start.
    representative = np.zeros(n_blocks, dtype=np.int64)
    representative[block[::-1]] = np.arange(n + 1)[::-1]
    order, seen = [block[start]], {block[start]}
    successors = block[columns].tolist()
    for b in order:
        for nb in successors[representative[b]]:
            if nb != dead_block and nb not in seen:
                seen.add(nb)
                order.append(nb)
    new_id = np.full(n_blocks, DEAD, dtype=np.int32)
    new_id[order] = np.arange(len(order))
    rep = representative[order]
    new_transitions = new_id[block[full[rep]]]
    return DFA(np.ascontiguousarray(new_transitions, dtype=np.int32), accepting[rep].copy())
