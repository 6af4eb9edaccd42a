"""The lexer side of a grammar: all terminals in one byte automaton, and what
a set of acceptable terminals makes of it.

The automaton is the product of the terminals' DFAs: a state is the tuple of
per-terminal states, and carries which terminals can still complete (``alive``)
and which are complete (``accepting``). Two start states exist: a fresh lexeme,
and a fresh lexeme right after an ``%ignore``'d one, where ignored terminals
may not start again (so whitespace is bounded). State ``n_states`` is a dead
sentinel, so that lookups never need a bounds check.

A ``LexContext`` is that automaton seen from one parser situation: which states
can still grow into a terminal lark's contextual lexer tries there
(``alive_lark``), into one the parser really shifts (``alive_valid``), and
which valid terminal a complete lexeme is emitted as (``choice``: higher
priority first, then a string literal before a regex, then lark's order).
"""

import numpy as np

from .dfa import DFA, byte_classes, minimize
from .errors import ConstrainedError


def bounded(dfa: DFA, limit: int) -> DFA:
    """``dfa`` restricted to strings of at most ``limit`` bytes."""
    n, width = dfa.n_states, limit + 1
    ids = np.arange(n)[:, None] * width + np.arange(width)[None, :]  # (state, bytes so far)
    transitions = np.full((n * width, 256), -1, dtype=np.int32)
    step = dfa.transitions[:, None, :]  # (n, 1, 256)
    target = np.where(step >= 0, step * width + (np.arange(width)[None, :, None] + 1), -1)
    target[:, -1, :] = -1  # no byte after the limit
    transitions[ids.ravel()] = target.reshape(n * width, 256)
    accepting = np.repeat(dfa.accepting, width)
    return minimize(transitions, accepting)


_ALL_BYTES = (1 << 256) - 1


class _ByteSets:
    """A DFA's transitions as bit sets of bytes (Python ints, bit b for byte b), per state on demand."""

    def __init__(self, dfa: DFA):
        byte_class, columns = byte_classes(dfa.transitions)
        self.columns = columns.tolist()
        members = [0] * columns.shape[1]
        for b, c in enumerate(byte_class.tolist()):
            members[c] |= 1 << b
        self.members = members
        self.known: dict = {}

    def moves(self, s: int) -> tuple:
        """([(live target, the bytes that lead there)], the bytes on which state s dies)."""
        hit = self.known.get(s)
        if hit is None:
            sets: dict = {}
            for c, target in enumerate(self.columns[s]):
                sets[target] = sets.get(target, 0) | self.members[c]
            hit = self.known[s] = ([(t, bits) for t, bits in sets.items() if t >= 0], sets.get(-1, 0))
        return hit


def _bytes_of(sets: list) -> np.ndarray:
    """(len(sets), 256) bools from bit sets of bytes."""
    data = b"".join(bits.to_bytes(32, "little") for bits in sets)
    return np.unpackbits(np.frombuffer(data, dtype=np.uint8), bitorder="little").reshape(len(sets), 256).view(bool)


class LexContext:
    """The automaton's states as seen with one set of acceptable and valid terminals."""

    __slots__ = ("key", "acceptable", "valid", "alive_lark", "alive_valid", "choice")

    def __init__(self, key, acceptable, valid, alive_lark, alive_valid, choice):
        self.key = key  # a small integer, unique per (acceptable, valid)
        self.acceptable = acceptable  # (terminals,) bool
        self.valid = valid  # (terminals,) bool
        self.alive_lark = alive_lark  # (n + 1,) bool, the sentinel is False
        self.alive_valid = alive_valid  # (n + 1,) bool
        self.choice = choice  # (n + 1,) int: the terminal a complete lexeme is emitted as, -1 for none


class Lexer:
    """The product automaton of a grammar's terminals (in lark's lexer order)."""

    def __init__(self, dfas: list, ignored: np.ndarray, choice_order: np.ndarray):
        self.dfas = dfas
        self.ignored = ignored
        self.choice_order = choice_order
        self._product(dfas)
        self._contexts: dict = {}

    def _product(self, dfas) -> None:
        # A state is keyed by its live terminals' (terminal, DFA state) pairs. Inside most
        # lexemes one terminal is left alive: once one such state is reached, all of that
        # terminal's states join as a block (``single_base[t]`` + its DFA state), whose
        # transitions are the DFA's own, shifted; only states with several live terminals
        # are explored one by one.
        n_terms = len(dfas)
        starts = [tuple((t, 0) for t in range(n_terms)), tuple((t, 0) for t in range(n_terms) if not self.ignored[t])]
        ids: dict = {}
        order: list = list(starts)  # the start states are kept apart from all others even when their tuples agree
        single_base = np.full(n_terms, -1, dtype=np.int64)
        self.q0, self.q0i = 0, 1
        self.starts = (0, 1)

        def state_id(live: tuple) -> int:
            if len(live) == 1:
                (t, s), = live
                if single_base[t] < 0:
                    single_base[t] = len(order)
                    order.extend(((t, c),) for c in range(dfas[t].n_states))
                return int(single_base[t]) + s
            if live not in ids:
                ids[live] = len(order)
                order.append(live)
            return ids[live]

        byte_sets = [None] * n_terms
        expanded = []  # the states explored one by one
        explored, sets, targets = [], [], []  # per part of their bytes: the state, the bytes, the target
        k = 0
        while k < len(order):
            live = order[k]
            if k in self.starts or len(live) > 1:
                expanded.append(k)
                # Split the 256 bytes by where each live terminal goes on them: few parts, as bit sets.
                parts = [(_ALL_BYTES, ())]
                for t, s in live:
                    if byte_sets[t] is None:
                        byte_sets[t] = _ByteSets(dfas[t])
                    moves, dying = byte_sets[t].moves(s)
                    parts = ([(both, key + ((t, c),)) for bits, key in parts for c, move in moves
                              if (both := bits & move)]
                             + [(rest, key) for bits, key in parts if (rest := bits & dying)])
                for bits, key in parts:
                    if key:
                        explored.append(k)
                        sets.append(bits)
                        targets.append(state_id(key))
            k += 1
        n = len(order)
        trans = np.full((n + 1, 256), n, dtype=np.int32)  # the last row: the dead sentinel
        comps = np.full((n, n_terms), -1, dtype=np.int64)
        if sets:
            part, byte = np.nonzero(_bytes_of(sets))
            trans[np.array(explored)[part], byte] = np.array(targets)[part]
        for k in expanded:
            for t, c in order[k]:
                comps[k, t] = c
        for t in np.flatnonzero(single_base >= 0).tolist():
            base, dfa = int(single_base[t]), dfas[t]
            trans[base:base + dfa.n_states] = np.where(dfa.transitions >= 0, dfa.transitions + base, n)
            comps[base:base + dfa.n_states, t] = np.arange(dfa.n_states)
        self.components = comps  # per state, each terminal's DFA state (-1: dead)
        self.single_base = single_base  # per terminal, the state where it alone is alive in its DFA state 0 (-1: none)
        self.n_states = n
        self.alive = comps >= 0
        self.alive_terminals = [[t for t, _ in live] for live in order] + [[]]  # the sentinel's: none
        self.accepting = np.zeros((n, n_terms), dtype=bool)
        for t, dfa in enumerate(dfas):
            live = comps[:, t] >= 0
            self.accepting[live, t] = dfa.accepting[comps[live, t]]
        self.trans = trans
        # For contexts: the live terminals as bits, and the states where some terminal is complete
        # with their complete terminals in choice order.
        self._alive_bits = np.packbits(self.alive, axis=1)
        self._completing = np.flatnonzero(self.accepting.any(axis=1))
        self._complete_in_order = self.accepting[self._completing][:, self.choice_order]

    def context(self, acceptable: frozenset, valid: frozenset) -> LexContext:
        """The interned context for these terminal sets (both include the ignored terminals)."""
        ctx = self._contexts.get((acceptable, valid))
        if ctx is None:
            ctx = self._contexts[(acceptable, valid)] = self._new_context(acceptable, valid)
        return ctx

    def _new_context(self, acceptable, valid) -> LexContext:
        n_terms = self.alive.shape[1]
        in_lark = np.zeros(n_terms, dtype=bool)
        in_lark[list(acceptable)] = True
        in_valid = np.zeros(n_terms, dtype=bool)
        in_valid[list(valid)] = True
        alive_lark = np.append((self._alive_bits & np.packbits(in_lark)).any(axis=1), False)
        alive_valid = np.append((self._alive_bits & np.packbits(in_valid)).any(axis=1), False)
        complete = self._complete_in_order & in_lark[self.choice_order]
        first = self.choice_order[complete.argmax(axis=1)]
        choice = np.full(self.n_states + 1, -1, dtype=np.int64)
        choice[self._completing] = np.where(complete.any(axis=1) & in_valid[first], first, -1)
        return LexContext(len(self._contexts), in_lark, in_valid, alive_lark, alive_valid, choice)

    def check_lark_agrees(self, acceptable_sets, names, is_str, priority) -> None:
        """Refuse terminals that lark's lexer would split differently from the
        longest match used here. Lark takes, among the terminals it tries, the
        first (in its order: priority, longest possible match, ...) that matches
        any prefix; here the lexeme is the longest one, emitted as the terminal
        the tie rule picks. They agree when, wherever a lexeme may end, the first
        terminal in lark's order that matched any prefix of it matches it whole
        and is the one picked (or is a regex that lark's "unless" rule turns into
        the string literal picked)."""
        n_terms = len(names)
        for acceptable in acceptable_sets:
            in_set = np.zeros(n_terms, dtype=bool)
            in_set[list(acceptable)] = True
            alive = np.append((self.alive & in_set).any(axis=1), False)
            accepting = self.accepting & in_set
            complete = accepting[:, self.choice_order]
            picked = np.where(complete.any(axis=1), self.choice_order[complete.argmax(axis=1)], -1)
            first_acc = np.where(accepting.any(axis=1), accepting.argmax(axis=1), n_terms)  # terminals are in lark's order
            seen = {(q, n_terms): b"" for q in self.starts}
            queue = list(seen)
            while queue:
                q, best = queue.pop()
                if picked[q] >= 0:
                    winner = min(best, int(first_acc[q]))
                    choice = int(picked[q])
                    ok = winner == choice or (
                        accepting[q, winner] and is_str[choice] and not is_str[winner]
                        and priority[winner] == priority[choice]
                    )
                    if not ok:
                        raise ConstrainedError(
                            f"terminals {names[winner]} and {names[choice]} overlap in a way lark's lexer "
                            f"resolves differently from the longest match: on {seen[(q, best)]!r} lark takes "
                            f"{names[winner]} (it comes first in lark's order: priority, then longest possible "
                            f"match{'' if accepting[q, winner] else ', even though it matches only a shorter prefix'}), "
                            f"the longest match is {names[choice]}. Make the terminals disjoint, or give "
                            f"{names[choice]} a higher priority"
                        )
                nbest = min(best, int(first_acc[q]))
                row = self.trans[q]
                for b in np.unique(row).tolist():
                    if b < self.n_states and alive[b] and (b, nbest) not in seen:
                        seen[(b, nbest)] = seen[(q, best)] + bytes([int(np.argmax(row == b))])
                        queue.append((b, nbest))
