"""Regular expressions as minimal deterministic automata over UTF-8 bytes.

Python's own regex parser reads the pattern, so the syntax and meaning are
exactly ``re.fullmatch(pattern, text, re.ASCII)``. The parse tree becomes a
Thompson NFA whose character sets are spelled out as UTF-8 byte sequences (a
token may end inside a character); subset construction over byte classes, with
a state budget, makes it deterministic; then it is minimised and trimmed to the
states that are reachable and can still reach an accepting state. Constructs an
automaton cannot enforce exactly are refused, never approximated.

(interegular was the first choice for parsing, but its automaton construction
ran for minutes on nested bounded repeats, with no way to bound it.)
"""

import gc
import hashlib
import re
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property, lru_cache

import numpy as np

from .errors import ConstrainedError
from .recent import Recent

try:  # Python 3.11+ keeps the regex parser here
    from re import _constants as sre, _parser as sre_parser
except ImportError:  # pragma: no cover
    import sre_constants as sre
    import sre_parse as sre_parser

MAX_CODE_POINT = 0x10FFFF
DEAD = -1
MAX_STATES = 20_000  # a pattern whose DFA grows past this is refused
# and so is one whose DFA's states hold more NFA states than this in all (the subset construction's work: a
# counted repeat after a star, ".*a{0,100000}", makes each state hold one position more than the last).
MAX_SUBSET_WORK = 3_000_000


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

    @cached_property
    def digest(self) -> str:
        """A name for the automaton: equal automata (same numbering) have the same."""
        found = hashlib.sha256(np.ascontiguousarray(self.transitions, dtype=np.int32))
        found.update(self.accepting.astype(bool))
        return found.hexdigest()[:32]

    @cached_property
    def finite(self) -> bool:
        """Whether it accepts finitely many strings (``is_finite``; makers that
        know it say so, ``known``: every declared name's terminal is asked)."""
        return is_finite(self)

    @cached_property
    def widest(self) -> int:
        """The most bytes one state lets in."""
        return int((self.transitions >= 0).sum(axis=1).max())

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
def from_regex(pattern: str, encoding=None) -> DFA:
    """The minimal byte-level DFA of ``pattern`` (whole-string match). Each
    character is spelled as ``encoding(low, high)`` spells the code points
    low..high: byte sequences, UTF-8 by default (see ``utf8_encoding``)."""
    if not isinstance(pattern, str):
        raise ConstrainedError(f"a regular expression is a str, got {type(pattern).__name__}")
    try:
        parsed = sre_parser.parse(pattern)
    except re.error as e:
        raise ConstrainedError(f"invalid regular expression {pattern!r}: {e}") from None
    except RecursionError:
        raise ConstrainedError(f"regular expression {pattern!r} is nested too deeply") from None
    nfa = _NFA(pattern, encoding or utf8_encoding)
    with gc_paused():
        try:
            start, end = nfa.sequence(parsed, parsed.state.flags)
        except RecursionError:
            raise ConstrainedError(f"regular expression {pattern!r} is nested too deeply") from None
        transitions, accepting = _determinize(nfa, start, end, pattern)
        dfa = minimize(transitions, accepting)
    if dfa is None:
        raise ConstrainedError(f"regular expression {pattern!r} matches no string")
    return dfa


@contextmanager
def gc_paused():
    """Compilers allocate many small objects that live until they finish: the
    cyclic garbage collector's passes over them cost more than the work itself."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


_CANNOT = "which an automaton cannot enforce exactly"
_REFUSED = {
    sre.AT: "anchors or word boundaries (^, $, \\A, \\Z, \\b, \\B), which are not supported: "
    "the whole output is matched anyway, so leave out ^ and $",
    sre.ASSERT: f"a lookaround, {_CANNOT}",
    sre.ASSERT_NOT: f"a lookaround, {_CANNOT}",
    sre.GROUPREF: f"a backreference, {_CANNOT}",
    sre.GROUPREF_EXISTS: f"a conditional group, {_CANNOT}",
    sre.ATOMIC_GROUP: f"an atomic group, {_CANNOT}",
    sre.POSSESSIVE_REPEAT: f"a possessive quantifier, {_CANNOT}",
}
_REFUSED_FLAGS = {re.MULTILINE: "re.MULTILINE", re.VERBOSE: "re.VERBOSE", re.LOCALE: "re.LOCALE"}

# re.ASCII meanings of the classes
_CATEGORIES = {
    sre.CATEGORY_DIGIT: ([(48, 57)], False),
    sre.CATEGORY_NOT_DIGIT: ([(48, 57)], True),
    sre.CATEGORY_SPACE: ([(9, 13), (32, 32)], False),
    sre.CATEGORY_NOT_SPACE: ([(9, 13), (32, 32)], True),
    sre.CATEGORY_WORD: ([(48, 57), (65, 90), (95, 95), (97, 122)], False),
    sre.CATEGORY_NOT_WORD: ([(48, 57), (65, 90), (95, 95), (97, 122)], True),
}


def normalize_ranges(ranges) -> list[tuple[int, int]]:
    out = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(hi, out[-1][1]))
        else:
            out.append((lo, hi))
    return out


def complement_ranges(ranges) -> list[tuple[int, int]]:
    out, lo = [], 0
    for a, b in normalize_ranges(ranges):
        if a > lo:
            out.append((lo, a - 1))
        lo = b + 1
    if lo <= MAX_CODE_POINT:
        out.append((lo, MAX_CODE_POINT))
    return out


def _cased(ranges, flags) -> list[tuple[int, int]]:
    """With IGNORECASE, ASCII letters match either case (re.ASCII's rule)."""
    if not flags & re.IGNORECASE:
        return normalize_ranges(ranges)
    extra = []
    for lo, hi in ranges:
        for a, b, shift in ((65, 90, 32), (97, 122, -32)):
            x, y = max(lo, a), min(hi, b)
            if x <= y:
                extra.append((x + shift, y + shift))
    return normalize_ranges(list(ranges) + extra)


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


def utf8_encoding(lo: int, hi: int) -> tuple[tuple[tuple[tuple[int, int], ...], ...], ...]:
    """The code points ``lo..hi`` as alternative byte sequences, each a tuple of
    byte sets, each set a tuple of (low, high) byte ranges: the encoding
    interface of from_regex, here plain UTF-8."""
    return tuple(tuple((byte_range,) for byte_range in seq) for seq in utf8_sequences(lo, hi))


class _NFA:
    """A Thompson NFA over bytes, built from Python's regex parse tree. Each
    builder returns a fragment (start state, end state)."""

    def __init__(self, pattern: str, encoding):
        self.pattern = pattern
        self.encoding = encoding
        self.epsilon: list[list[int]] = []
        self.edges: list[list[tuple[int, int, int]]] = []  # (low byte, high byte, target)

    def state(self) -> int:
        self.epsilon.append([])
        self.edges.append([])
        if len(self.edges) > 50 * MAX_STATES:
            raise ConstrainedError(f"regular expression {self.pattern!r} is too large to compile")
        return len(self.edges) - 1

    def sequence(self, items, flags) -> tuple[int, int]:
        for flag, name in _REFUSED_FLAGS.items():
            if flags & flag:
                raise ConstrainedError(f"regular expression {self.pattern!r} uses the unsupported flag {name}")
        start = end = self.state()
        for op, arg in items:
            a, b = self.item(op, arg, flags)
            self.epsilon[end].append(a)
            end = b
        return start, end

    def item(self, op, arg, flags) -> tuple[int, int]:
        if op in _REFUSED:
            raise ConstrainedError(f"regular expression {self.pattern!r} uses {_REFUSED[op]}")
        if op is sre.LITERAL:
            return self.chars(_cased([(arg, arg)], flags))
        if op is sre.NOT_LITERAL:
            return self.chars(complement_ranges(_cased([(arg, arg)], flags)))
        if op is sre.ANY:
            return self.chars([(0, MAX_CODE_POINT)] if flags & re.DOTALL else complement_ranges([(10, 10)]))
        if op is sre.IN:
            return self.chars(self.char_set(arg, flags))
        if op is sre.BRANCH:
            start, end = self.state(), self.state()
            for branch in arg[1]:
                a, b = self.sequence(branch, flags)
                self.epsilon[start].append(a)
                self.epsilon[b].append(end)
            return start, end
        if op is sre.SUBPATTERN:
            _group, add, remove, items = arg
            return self.sequence(items, (flags | add) & ~remove)
        if op in (sre.MAX_REPEAT, sre.MIN_REPEAT):  # laziness does not change the language
            low, high, items = arg
            return self.repeat(items, low, None if high is sre.MAXREPEAT else high, flags)
        raise ConstrainedError(f"regular expression {self.pattern!r} uses {op}, which is not supported")

    def char_set(self, items, flags) -> list[tuple[int, int]]:
        ranges, negate = [], False
        for op, arg in items:
            if op is sre.NEGATE:
                negate = True
            elif op is sre.LITERAL:
                ranges.append((arg, arg))
            elif op is sre.RANGE:
                ranges.append(arg)
            elif op is sre.CATEGORY:
                category, inverted = _CATEGORIES[arg]
                ranges += complement_ranges(category) if inverted else category
            else:
                raise ConstrainedError(f"regular expression {self.pattern!r}: unsupported set item {op}")
        ranges = _cased(ranges, flags)
        return complement_ranges(ranges) if negate else ranges

    def chars(self, ranges) -> tuple[int, int]:
        """A fragment matching one character of ``ranges``, spelled by the
        encoding: a copy of the minimal automaton of those spellings, whose
        last state is the fragment's end (a trie of them has about twice the
        states, 61 against 30 for ``.``, and a counted repeat multiplies them)."""
        edges = _spelling_edges(tuple(map(tuple, ranges)), self.encoding)
        states = [self.state() for _ in edges] + [self.state()]
        for state, out in zip(states, edges):
            self.edges[state] += [(a, b, states[target]) for a, b, target in out]
        return states[0], states[-1]

    def repeat(self, items, low: int, high: int | None, flags) -> tuple[int, int]:
        start = end = self.state()
        for _ in range(low):
            a, b = self.sequence(items, flags)
            self.epsilon[end].append(a)
            end = b
        if high is None:
            a, b = self.sequence(items, flags)
            loop = self.state()
            self.epsilon[end].append(loop)
            self.epsilon[loop].append(a)
            self.epsilon[b].append(loop)
            return start, loop
        exit_ = self.state()
        self.epsilon[end].append(exit_)
        for _ in range(high - low):
            a, b = self.sequence(items, flags)
            self.epsilon[end].append(a)
            self.epsilon[b].append(exit_)
            end = b
        return start, exit_


@lru_cache(maxsize=1024)
def _spelling_edges(ranges: tuple, encoding) -> list:
    """The minimal automaton of the spellings of one character of ``ranges``,
    as (low byte, high byte, target) edges per state but the accepting one,
    which is numbered last: the spellings are prefix-free, so it is the only
    one, and nothing leaves it."""
    trie = _NFA("", encoding)
    start, end = trie.state(), trie.state()
    inner: dict[tuple, int] = {}
    for lo, hi in ranges:
        for seq in encoding(lo, hi):
            state = start
            for i, byte_set in enumerate(seq):
                if i == len(seq) - 1:
                    target = end
                else:
                    target = inner.get(seq[: i + 1])
                    if target is None:
                        target = inner[seq[: i + 1]] = trie.state()
                trie.edges[state] += [(a, b, target) for a, b in byte_set]
                state = target
    dfa = minimize(*_determinize(trie, start, end, "a character class"))
    if dfa is None:  # an empty class: a start with no way out
        return [[]]
    (final,) = np.flatnonzero(dfa.accepting)
    order = [q for q in range(dfa.n_states) if q != final] + [final]
    number = {q: k for k, q in enumerate(order)}
    edges = []
    for q in order[:-1]:  # runs of bytes with the same target, as ranges
        row = dfa.transitions[q]
        lows = np.flatnonzero(np.diff(row, prepend=DEAD - 1))
        highs = np.append(lows[1:], 256) - 1
        edges.append([(lo, hi, number[t]) for lo, hi, t in zip(lows.tolist(), highs.tolist(), row[lows].tolist())
                      if t >= 0])
    return edges


def _determinize(nfa: _NFA, start: int, end: int, pattern: str) -> tuple[np.ndarray, np.ndarray]:
    """Subset construction over byte classes (bytes no edge tells apart)."""
    bounds = sorted({0, 256} | {b for edges in nfa.edges for lo, hi, _ in edges for b in (lo, hi + 1)})
    class_of_byte = np.zeros(256, dtype=np.int64)
    for k, (a, b) in enumerate(zip(bounds, bounds[1:])):
        class_of_byte[a:b] = k
    n_classes = len(bounds) - 1
    first_class = {b: k for k, b in enumerate(bounds)}

    closures: dict[int, frozenset] = {}

    def closure(state: int) -> frozenset:
        if state not in closures:
            seen, todo = {state}, [state]
            while todo:
                for nxt in nfa.epsilon[todo.pop()]:
                    if nxt not in seen:
                        seen.add(nxt)
                        todo.append(nxt)
            closures[state] = frozenset(seen)
        return closures[state]

    moves: dict[int, list[tuple[int, frozenset]]] = {}

    def moves_of(state: int):
        if state not in moves:
            moves[state] = [
                (k, closure(target))
                for lo, hi, target in nfa.edges[state]
                for k in range(first_class[lo], first_class[hi + 1])
            ]
        return moves[state]

    initial = closure(start)
    ids = {initial: 0}
    order = [initial]
    rows = []
    work = 0
    for subset in order:
        work += len(subset)
        if work > MAX_SUBSET_WORK:
            raise ConstrainedError(f"regular expression {pattern!r} is too complex: its automaton's states track over "
                                   f"{MAX_SUBSET_WORK:,} positions of the pattern in all")
        targets: list[set | None] = [None] * n_classes
        for state in subset:
            for k, reached in moves_of(state):
                if targets[k] is None:
                    targets[k] = set(reached)
                else:
                    targets[k] |= reached
        row = np.full(n_classes, DEAD, dtype=np.int32)
        for k, reached in enumerate(targets):
            if reached:
                key = frozenset(reached)
                if key not in ids:
                    if len(ids) >= MAX_STATES:
                        raise ConstrainedError(
                            f"regular expression {pattern!r} is too complex: its automaton exceeds {MAX_STATES} states"
                        )
                    ids[key] = len(order)
                    order.append(key)
                row[k] = ids[key]
        rows.append(row)
    transitions = np.stack(rows)[:, class_of_byte]
    accepting = np.array([end in subset for subset in order], dtype=bool)
    return np.ascontiguousarray(transitions, dtype=np.int32), accepting


_MIXERS = np.random.default_rng(0x5EED).integers(1, 2**63, size=257, dtype=np.int64) | 1


def _renumber(keys: np.ndarray) -> np.ndarray:
    """Dense ids for equal keys (np.unique's inverse; a dict is faster on small arrays)."""
    if len(keys) > 2000:
        return np.unique(keys, return_inverse=True)[1].ravel()
    ids: dict = {}
    return np.array([ids.setdefault(k, len(ids)) for k in keys.tolist()], dtype=np.int64)


@lru_cache(maxsize=None)
def _hash_weights(width: int) -> np.ndarray:
    return np.random.default_rng(width).integers(1, 2**63, size=width, dtype=np.int64) | 1


def _hash_rows(rows: np.ndarray) -> np.ndarray:
    """A 64-bit hash per row (wrapping arithmetic), for grouping equal rows;
    callers check the grouping."""
    with np.errstate(over="ignore"):
        return rows.astype(np.int64, copy=False) @ _hash_weights(rows.shape[1])


def byte_classes(transitions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Bytes no state tells apart share a class: returns (class of each byte, and
    the transitions with one column per class)."""
    byte_class = _renumber(_hash_rows(transitions.T))
    first = np.unique(byte_class, return_index=True)[1]
    columns = transitions[:, first]
    if not np.array_equal(columns[:, byte_class], transitions):  # a hash collision
        columns, byte_class = np.unique(transitions, axis=1, return_inverse=True)
    # C order: picked columns come out in Fortran order, whose tolist() is 100x slower
    return byte_class.ravel(), np.ascontiguousarray(columns)


def _refine(block: np.ndarray, columns: np.ndarray) -> np.ndarray:
    """Moore's partition refinement, every state at once: split blocks by the
    blocks their byte classes lead to until nothing splits. Rows are compared
    through a hash; the result is then checked to be a congruence, and refined
    exactly in the astronomically rare case of a collision."""
    block = _renumber(block)
    n_blocks = block.max()
    with np.errstate(over="ignore"):
        while True:
            new_block = _renumber(block * _MIXERS[0] + _hash_rows(block[columns]))
            new_n_blocks = new_block.max()
            if new_n_blocks == n_blocks:
                break
            block, n_blocks = new_block, new_n_blocks
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


def _successors(columns: np.ndarray) -> tuple[list, list]:
    """Each state's distinct successors, in the order its byte classes first
    name them: (successors one state after another, where each state's begin
    and the last ends), as lists. Rows are wide (a class per byte run) and
    name a handful of states, so loops over the graph walk these instead."""
    n, width = columns.shape
    by_target = np.argsort(columns, axis=1, kind="stable")
    ranked = np.take_along_axis(columns, by_target, axis=1)
    first = np.ones((n, width), dtype=bool)
    first[:, 1:] = ranked[:, 1:] != ranked[:, :-1]
    state, _ = np.nonzero(first)
    in_column_order = np.argsort(state * width + by_target[first], kind="stable")
    begin = np.concatenate([[0], np.cumsum(first.sum(axis=1))])
    return ranked[first][in_column_order].tolist(), begin.tolist()


def _predecessors(successors: list, begin: list) -> tuple[list, list]:
    """Each state's distinct predecessors, laid out as _successors lays out successors."""
    targets = np.array(successors, dtype=np.int64)
    sources = np.repeat(np.arange(len(begin) - 1), np.diff(begin))
    by_target = np.argsort(targets, kind="stable")
    return sources[by_target].tolist(), np.searchsorted(targets[by_target], np.arange(len(begin))).tolist()


def _sparse_rows(columns: np.ndarray) -> tuple[list, list, list]:
    """Each state's row of byte classes without its transitions to the sink (the
    last state): (per state, an id of where its row leaves the sink; the targets
    there, one state after another; where each state's begin). Minimisation sends
    every dead transition to the sink first, so no other target has the sink's
    language: two rows are equal exactly when they leave the sink at the same
    places for states of the same language, and a state's key is its acceptance,
    its id and those few targets' languages, not a whole row."""
    elsewhere = columns != len(columns) - 1
    patterns: dict = {}
    pattern = [patterns.setdefault(row, len(patterns)) for row in map(bytes, np.packbits(elsewhere, axis=1))]
    begin = np.concatenate([[0], np.cumsum(elsewhere.sum(axis=1))])
    return pattern, columns[elsewhere].tolist(), begin.tolist()


def _finite_classes(columns: np.ndarray, accepting: np.ndarray, successors: tuple, rows: tuple) -> np.ndarray:
    """Revuz's minimisation of the acyclic part, leaves first: a state all of
    whose paths end (its language is finite) gets an id from its acceptance and
    its successors' ids, so ids are equal exactly when languages are; the empty
    language is 0. States on or leading to a cycle get -1. ``columns`` has the
    sink (the last state, the empty language) wherever a transition is dead;
    ``successors`` and ``rows`` are its _successors and _sparse_rows.

    Counted repeats make long acyclic chains, on which Moore's refinement needs
    as many whole-table rounds as the chain is long; this is one pass."""
    sink = len(columns) - 1
    pattern, targets, at = rows
    after, after_begin = successors
    before, begin = _predecessors(after, after_begin)
    remaining = (np.diff(after_begin) - (columns == sink).any(axis=1)).tolist()  # successors but the sink
    accepts = accepting.tolist()
    language = [-1] * sink + [0]
    ids = {(False, pattern[sink]): 0}
    ready = [state for state in range(sink) if remaining[state] == 0]
    for state in ready:  # grows while it is read: a topological order from the leaves
        key = (accepts[state], pattern[state], *[language[t] for t in targets[at[state]:at[state + 1]]])
        language[state] = ids.setdefault(key, len(ids))
        for earlier in before[begin[state]:begin[state + 1]]:
            remaining[earlier] -= 1
            if remaining[earlier] == 0:
                ready.append(earlier)
    return np.array(language, dtype=np.int64)


def _live(columns: np.ndarray, accepting: np.ndarray) -> np.ndarray:
    """The states from which an accepting state is reachable."""
    before, begin = _predecessors(*_successors(columns))
    live = accepting.tolist()
    todo = [state for state, yes in enumerate(live) if yes]
    for state in todo:
        for earlier in before[begin[state]:begin[state + 1]]:
            if not live[earlier]:
                live[earlier] = True
                todo.append(earlier)
    return np.array(live, dtype=bool)


def _above_cycles(successors: list, begin: list) -> list[int]:
    """The states no cycle leads to, each before the states it leads to (peeled
    from the top: a state goes once every state before it has gone), given each
    state's successors as _successors lays them out."""
    waiting = np.bincount(successors, minlength=len(begin) - 1).tolist()
    order = [state for state, count in enumerate(waiting) if count == 0]
    for state in order:  # grows while it is read
        for target in successors[begin[state]:begin[state + 1]]:
            waiting[target] -= 1
            if waiting[target] == 0:
                order.append(target)
    return order


def _class_above(block: np.ndarray, above: list, rows: tuple, accepting: np.ndarray, kept: np.ndarray) -> None:
    """Blocks for the states ``above`` (see _above_cycles), leaves first: a state's
    block is given by its acceptance and its successors' blocks (keyed as in
    _finite_classes, ``rows`` being the _sparse_rows), the same key as a refined
    block with that language has."""
    pattern, targets, at = rows
    blocks, accepts = block.tolist(), accepting.tolist()
    ids = {}
    for state in kept.tolist():
        ids.setdefault((accepts[state], pattern[state], *[blocks[t] for t in targets[at[state]:at[state + 1]]]),
                       blocks[state])
    for state in reversed(above):
        key = (accepts[state], pattern[state], *[blocks[t] for t in targets[at[state]:at[state + 1]]])
        blocks[state] = ids.setdefault(key, len(ids))
    block[above] = np.array(blocks)[above]


def minimize(transitions: np.ndarray, accepting: np.ndarray, start: int = 0) -> DFA | None:
    """The minimal DFA equivalent to (transitions, accepting) from ``start``, with
    only live states, renumbered so that the start is 0; None if it accepts nothing."""
    n = len(accepting)
    sink = n
    full = _with_sink(transitions)
    _, columns = byte_classes(full)
    accepting_full = np.append(accepting, False)
    # States that cannot reach an accepting state go to the sink first, so that
    # every remaining cycle is live and "finite language" means "acyclic".
    with gc_paused():
        columns = np.where(_live(columns, accepting_full)[columns], columns, sink)
        graph, rows = _successors(columns), _sparse_rows(columns)
        finite = _finite_classes(columns, accepting_full, graph, rows)
    # Moore's refinement for the states a cycle leads to, from a partition that
    # already separates every finite language: cyclic states start as accepting
    # or not. The states above them (a trie of keys in front of a string loop)
    # are classed after, leaves first, in one pass.
    start_block = np.where(finite >= 0, finite, np.where(accepting_full, finite.max() + 1, finite.max() + 2))
    with gc_paused():
        above = _above_cycles(*graph)
    if above:
        below = np.ones(n + 1, dtype=bool)
        below[above] = False
        kept = np.flatnonzero(below)
        renamed = np.full(n + 1, -1, dtype=np.int64)
        renamed[kept] = np.arange(len(kept))
        block = np.empty(n + 1, dtype=np.int64)
        block[kept] = _refine(start_block[kept], renamed[columns[kept]])
        with gc_paused():
            _class_above(block, above, rows, accepting_full, kept)
    else:
        block = _refine(start_block, columns)
    n_blocks = int(block.max()) + 1
    dead_block = block[sink]
    if block[start] == dead_block:
        return None
    # One representative per block, blocks renumbered in breadth-first order from the start.
    representative = np.zeros(n_blocks, dtype=np.int64)
    representative[block[::-1]] = np.arange(n + 1)[::-1]
    order, seen = [block[start]], {block[start], dead_block}
    successors, begin = _successors(block[columns[representative]])
    for b in order:
        for nb in successors[begin[b]:begin[b + 1]]:
            if nb not in seen:
                seen.add(nb)
                order.append(nb)
    new_id = np.full(n_blocks, DEAD, dtype=np.int32)
    new_id[order] = np.arange(len(order))
    rep = representative[order]
    new_transitions = new_id[block[full[rep]]]
    return DFA(np.ascontiguousarray(new_transitions, dtype=np.int32), accepting[rep].copy())


# Operations on languages. Each returns a minimal DFA; the empty language is the
# one DFA whose start state is dead (one state, not accepting, no transitions):
# test for it with is_empty() before handing a DFA to the token index.


def empty() -> DFA:
    """The DFA of the empty language."""
    return DFA(np.full((1, 256), DEAD, dtype=np.int32), np.zeros(1, dtype=bool))


def is_finite(a: DFA) -> bool:
    """Whether ``a`` (trimmed, as every DFA here is) accepts finitely many
    strings: no state lies on a cycle."""
    live = a.transitions >= 0
    if (a.transitions > np.arange(a.n_states)[:, None])[live].all():  # numbered along every path (a literal)
        return True
    return bool(finite_after(a)[a.start])


def endless(a: DFA) -> bool:
    """Whether every unfinished string of ``a`` (trimmed) can end in infinitely
    many ways: no state that is not accepting has finitely many endings."""
    return not (finite_after(a) & ~a.accepting).any()


def _edges(a: DFA, reverse: bool = False) -> tuple[list, list]:
    """The distinct edges of ``a`` as adjacency lists (begin, ends): the states
    one byte after s (before it, with ``reverse``) are ends[begin[s]:begin[s + 1]]."""
    live = a.transitions >= 0
    sources, targets = np.nonzero(live)[0].astype(np.int64), a.transitions[live].astype(np.int64)
    if reverse:
        sources, targets = targets, sources
    start, end = np.divmod(np.unique(sources * a.n_states + targets), a.n_states)
    return np.searchsorted(start, np.arange(a.n_states + 1)).tolist(), end.tolist()


def finite_after(a: DFA) -> np.ndarray:
    """Per state of ``a`` (trimmed), whether finitely many strings lead from it
    to acceptance: no cycle lies ahead of it."""
    begin, sources = _edges(a, reverse=True)
    finite = np.zeros(a.n_states, dtype=bool)
    finite[_above_cycles(sources, begin)] = True  # (no cycle leads to them, reversed)
    return finite


def ending_counts(a: DFA, cap: int) -> np.ndarray:
    """Per state of ``a`` (not necessarily trimmed), how many strings lead from
    it to acceptance, up to ``cap``, which also stands for infinitely many (a
    live cycle lies ahead)."""
    before_begin, before = _edges(a, reverse=True)
    live = a.accepting.tolist()
    todo = [s for s, yes in enumerate(live) if yes]
    for s in todo:  # grows while it is read
        for earlier in before[before_begin[s]:before_begin[s + 1]]:
            if not live[earlier]:
                live[earlier] = True
                todo.append(earlier)
    live = np.array(live, dtype=bool)
    trimmed = DFA(np.where(live[np.maximum(a.transitions, 0)], a.transitions, -1).astype(np.int32), a.accepting & live)
    counts = np.full(a.n_states, cap, dtype=np.int64)
    counts[~live] = 0
    begin, targets = _edges(trimmed, reverse=True)
    for s in _above_cycles(targets, begin):  # each after the states it leads to
        row = trimmed.transitions[s]
        counts[s] = min(cap, int(a.accepting[s]) + int(counts[row[row >= 0]].sum()))
    return counts


def longest(a: DFA) -> int | None:
    """How many bytes the longest string ``a`` (trimmed) accepts has (0 for the
    empty language), or None where it accepts infinitely many: where some state
    lies on or after a cycle (every state of a trimmed DFA follows the start);
    else the longest path from the start, in _above_cycles' order."""
    begin, targets = _edges(a)
    order = _above_cycles(targets, begin)
    if len(order) < a.n_states:
        return None
    depth = [0] * a.n_states
    for s in order:
        for t in targets[begin[s]:begin[s + 1]]:
            depth[t] = max(depth[t], depth[s] + 1)
    return max((d for d, accepting in zip(depth, a.accepting.tolist()) if accepting), default=0)


def is_empty(a: DFA) -> bool:
    return not a.accepting.any()


def is_subset(a: DFA, b: DFA) -> bool:
    """Whether every string of ``a`` (trimmed) is one of ``b``: the pairs of
    states the two reach together, walked until ``a`` accepts where ``b`` does
    not or goes on where ``b`` dies. (Cheaper than ``difference`` when ``a`` is
    small, as a literal is: no product to minimise.)"""
    sources, labels = np.nonzero(a.transitions >= 0)
    begin = np.searchsorted(sources, np.arange(a.n_states + 1)).tolist()
    labels, targets = labels.tolist(), a.transitions[sources, labels].tolist()
    accepting_a, accepting_b, next_b = a.accepting.tolist(), b.accepting.tolist(), b.transitions
    seen, todo = {(0, 0)}, [(0, 0)]
    while todo:
        s, t = todo.pop()
        if accepting_a[s] and not accepting_b[t]:
            return False
        for edge in range(begin[s], begin[s + 1]):
            target = int(next_b[t, labels[edge]])
            if target < 0:
                return False
            pair = (targets[edge], target)
            if pair not in seen:
                seen.add(pair)
                todo.append(pair)
    return True


def _minimal(transitions: np.ndarray, accepting: np.ndarray) -> DFA:
    dfa = minimize(transitions, accepting)
    return empty() if dfa is None else dfa


def literal(data: bytes) -> DFA:
    """The DFA accepting exactly ``data``."""
    n = len(data)
    transitions = np.full((n + 1, 256), DEAD, dtype=np.int32)
    transitions[np.arange(n), np.frombuffer(data, dtype=np.uint8)] = np.arange(1, n + 1)
    accepting = np.zeros(n + 1, dtype=bool)
    accepting[n] = True
    return known(DFA(transitions, accepting), finite=True, widest=min(n, 1))


def known(a: DFA, **properties) -> DFA:
    """``a`` with cached properties (``finite``, ``widest``) that its maker knows
    set rather than computed: an object's first key asks them of each declared
    name's terminal, where computing them costs more than the rest of its table."""
    a.__dict__.update(properties)
    return a


def complement(a: DFA) -> DFA:
    """Every byte string ``a`` rejects (invalid UTF-8 included: intersect with
    the language you mean)."""
    return _minimal(_with_sink(a.transitions), ~np.append(a.accepting, False))


def _with_sink(transitions: np.ndarray) -> np.ndarray:
    """``transitions`` with a sink state after the others (looping on every
    byte), where the dead transitions (-1) now go."""
    sink = len(transitions)
    full = np.vstack([transitions, np.full((1, 256), sink, dtype=np.int32)])
    full[full < 0] = sink
    return full


def intersect(a: DFA, b: DFA) -> DFA:
    return _product(a, b, "and")


def difference(a: DFA, b: DFA) -> DFA:
    """The strings of ``a`` that ``b`` rejects."""
    return _product(a, b, "minus")


def union(*dfas: DFA) -> DFA:
    if not dfas:
        return empty()
    while len(dfas) > 1:  # pairwise, so that every product is of two small automata
        pairs = [_product(a, b, "or") for a, b in zip(dfas[::2], dfas[1::2])]
        dfas = pairs + list(dfas[len(pairs) * 2 :])
    return dfas[0]


def minus_finite(a: DFA, b: DFA) -> DFA:
    """The strings of ``a`` but those of ``b``, a finite language all of whose
    strings ``a`` accepts, with no minimisation. A state of the product is a pair
    (p, q) whose language is ``a``'s from p but ``b``'s from q, a finite set
    inside it. Two pairs with the same p differ since b's states do (b is
    minimal); two with different p differ where no two states of ``a`` differ
    on finitely many strings only, as in json_strings.string() (a test checks
    it): then the product, without its dead ends, is already minimal."""
    columns, byte_class, accepting = _product_table(a, b, *_OPERATIONS["minus"])
    sink = len(accepting)
    with gc_paused():
        live = _live(np.where(columns >= 0, columns, sink), np.append(accepting, False))[:sink]
    if not live[0]:
        return empty()
    number = np.where(live, np.cumsum(live) - 1, DEAD)  # the start pair is live and stays 0
    kept = np.flatnonzero(live)
    table = columns[kept][:, byte_class]
    return DFA(np.where(table >= 0, number[np.maximum(table, 0)], DEAD).astype(np.int32), accepting[kept])


# Per operation: whether a pair of states needs a's side alive to accept, b's side, and which pairs accept.
_OPERATIONS = {"and": (True, True, np.logical_and), "or": (False, False, np.logical_or),
               "minus": (True, False, lambda x, y: x & ~y)}
# Products by their operation and operands' digests, up to this many bytes of transitions: schemas
# repeat the same ones ("string or null", a format within strings), and each costs about a millisecond.
_PRODUCTS = Recent(64 << 20)


def _product(a: DFA, b: DFA, operation: str) -> DFA:
    key = (operation, a.digest, b.digest)
    found = _PRODUCTS.get(key)
    if found is None:
        columns, byte_class, accepting = _product_table(a, b, *_OPERATIONS[operation])
        found = _minimal(columns[:, byte_class].astype(np.int32), accepting)
        _PRODUCTS.put(key, found, found.transitions.nbytes)
    return found


def _product_table(a: DFA, b: DFA, need_a: bool, need_b: bool, accept) -> tuple:
    """The product automaton of the state pairs reachable from (start, start),
    built breadth first, a whole frontier at a time, as (transitions per byte
    class, the class of each byte, accepting).
    A pair where a side is dead is kept only if that side is not needed
    (``need_a``, ``need_b``) to accept: every state of a trimmed DFA is live, so
    that prunes exactly the pairs that can never accept. States are numbered
    ``state_a * width + state_b`` with the dead state as the last number on
    each side while exploring, then in the order they were found (the start 0)."""
    dead_a, dead_b = a.n_states, b.n_states
    width = dead_b + 1
    table_a = np.vstack([a.transitions, np.full((1, 256), DEAD, dtype=np.int32)])
    table_b = np.vstack([b.transitions, np.full((1, 256), DEAD, dtype=np.int32)])
    table_a[table_a < 0] = dead_a
    table_b[table_b < 0] = dead_b
    byte_class, _ = byte_classes(np.vstack([table_a, table_b]))
    first_byte = np.unique(byte_class, return_index=True)[1]
    table_a, table_b = table_a[:, first_byte].astype(np.int64), table_b[:, first_byte].astype(np.int64)

    known_keys = np.zeros(1, dtype=np.int64)  # sorted; the start pair (0, 0) is 0
    known_ids = np.zeros(1, dtype=np.int64)
    frontier = known_keys
    levels, rows = [], []
    while len(frontier):
        levels.append(frontier)
        next_a, next_b = table_a[frontier // width], table_b[frontier % width]
        alive = (next_a != dead_a) | (next_b != dead_b)
        if need_a:
            alive &= next_a != dead_a
        if need_b:
            alive &= next_b != dead_b
        keys = np.where(alive, next_a * width + next_b, DEAD)
        rows.append(keys)
        candidates = np.unique(keys[alive])
        position = np.minimum(np.searchsorted(known_keys, candidates), len(known_keys) - 1)
        frontier = candidates[known_keys[position] != candidates]
        if len(known_keys) + len(frontier) > MAX_STATES:
            raise ConstrainedError(
                f"the combined automaton is too complex: it exceeds {MAX_STATES} states; "
                "simplify the constraints that are combined (shorter bounds, fewer alternatives)"
            )
        order = np.argsort(np.concatenate([known_keys, frontier]), kind="stable")
        known_keys = np.concatenate([known_keys, frontier])[order]
        known_ids = np.concatenate([known_ids, np.arange(len(known_ids), len(known_ids) + len(frontier))])[order]

    keys = np.concatenate(rows)
    ids = np.where(keys >= 0, known_ids[np.searchsorted(known_keys, np.maximum(keys, 0))], DEAD)
    states = np.concatenate(levels)
    accepting_a = np.append(a.accepting, False)[states // width]
    accepting_b = np.append(b.accepting, False)[states % width]
    return ids, byte_class, accept(accepting_a, accepting_b)
