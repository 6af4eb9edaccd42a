"""The lexer side of a grammar: all terminals in one byte automaton, and what
a set of acceptable terminals makes of it.

The automaton is the product of the terminals' DFAs: a state is the tuple of
per-terminal states, and carries which terminals can still complete (``alive``)
and which are complete (``accepting``). It is explored from start states, two
per set of terminals a lexeme may start as: a fresh lexeme, and a fresh lexeme
right after an ``%ignore``'d one, where ignored terminals may not start again
(so whitespace is bounded). One set of all the terminals serves every parser
state, unless the product from it grows too large (a schema with hundreds of
property names and string formats); then each parser state's set of terminals
has starts of its own, from which far fewer terminals are alive together.
State ``n_states`` is a dead sentinel, so that lookups never need a bounds
check.

A ``LexContext`` is that automaton seen from one parser situation: which states
can still grow into a terminal lark's contextual lexer tries there
(``alive_lark``), into one the parser really shifts (``alive_valid``; not
where a lexeme is emitted as a terminal the parser rejects and cannot grow
on, see ``Lexer.context``), and
which valid terminal a complete lexeme is emitted as (``choice``: higher
priority first, then a string literal before a regex, then lark's order).
"""

from functools import lru_cache

import numpy as np
from numba import njit, types
from numba.typed import Dict

from .dfa import DFA, minimize
from .errors import ConstrainedError
from .walks import compiled


@lru_cache(maxsize=64)
def bounded(dfa: DFA, limit: int) -> DFA:
    """``dfa`` restricted to strings of at most ``limit`` bytes (remembered: every
    schema bounds the same whitespace terminal, DFAs being compared by identity)."""
    n, width = dfa.n_states, limit + 1
    ids = np.arange(n)[:, None] * width + np.arange(width)[None, :]  # (state, bytes so far)
    transitions = np.full((n * width, 256), -1, dtype=np.int32)
    step = dfa.transitions[:, None, :]  # (n, 1, 256)
    target = np.where(step >= 0, step * width + (np.arange(width)[None, :, None] + 1), -1)
    target[:, -1, :] = -1  # no byte after the limit
    transitions[ids.ravel()] = target.reshape(n * width, 256)
    accepting = np.repeat(dfa.accepting, width)
    return minimize(transitions, accepting)


class _Layout:
    """The terminals' DFA states numbered one terminal after another (terminal t's
    state s is ``offset[t] + s``), and their transitions per byte class: runs of
    bytes on which every terminal's every state moves alike (runs, not the
    coarsest classes, as they take one pass to find and are nearly as few)."""

    def __init__(self, dfas: list):
        self.sizes = np.array([dfa.n_states for dfa in dfas], dtype=np.int64)
        self.offset = np.concatenate([[0], np.cumsum(self.sizes)[:-1]]).astype(np.int64)
        self.term_of = np.repeat(np.arange(len(dfas)), self.sizes)
        differs = np.zeros(255, dtype=bool)
        for dfa in dfas:
            differs |= (dfa.transitions[:, 1:] != dfa.transitions[:, :-1]).any(axis=0)
        self.byte_class = np.concatenate([[0], np.cumsum(differs)])
        first_bytes = np.flatnonzero(np.r_[True, differs])
        self.columns = np.concatenate([np.where(c >= 0, c + o, -1) for c, o in  # (global state, class)
                                       ((dfa.transitions[:, first_bytes], o) for dfa, o in zip(dfas, self.offset.tolist()))
                                       ]).astype(np.int64, order="C")


_SHARED_START_PAIRS = 100_000  # (state, live terminal) pairs explored from one start shared by all contexts
# Past this many terminals the product from one shared start outgrew _SHARED_START_PAIRS in every
# MaskBench schema tried (the 300 slowest to compile, up to 229 terminals where it did not): skip it.
_SHARED_START_TERMINALS = 250
_MAX_STATE_TERMINALS = 50_000_000  # states x terminals of a lexer (its tables take about 10 bytes per pair)
_ALIVE_ACCEPTED_KEPT = 50_000  # (state, context) pairs whose terminals are kept (Lexer.alive_accepted)


class _TooLarge(Exception):
    """The product from the shared start outgrew its budget."""


class LexContext:
    """The automaton's states as seen with one set of acceptable and valid terminals."""

    __slots__ = ("key", "acceptable", "valid", "alive_lark", "alive_valid", "choice", "emits", "outranked")

    def __init__(self, key, acceptable, valid, alive_lark, alive_valid, choice, outranked):
        self.key = key  # a small integer, unique per (acceptable, valid)
        self.acceptable = acceptable  # (terminals,) bool
        self.valid = valid  # (terminals,) bool
        self.alive_lark = alive_lark  # (n + 1,) bool, the sentinel is False
        self.alive_valid = alive_valid  # (n + 1,) bool
        self.choice = choice  # (n + 1,) int: the terminal a complete lexeme is emitted as, -1 for none
        self.emits = choice >= 0  # (n + 1,) bool
        self.outranked = outranked  # whether a state complete for a valid terminal is dead (Lexer.context)


def _words(bits: np.ndarray) -> np.ndarray:
    """Rows of bools as rows of 64-bit words: column c is bit c % 64 of word c // 64."""
    padded = np.zeros((bits.shape[0], -(-bits.shape[1] // 64) * 64), dtype=bool)
    padded[:, : bits.shape[1]] = bits
    return np.packbits(padded, axis=1, bitorder="little").view("<u8")


@compiled("(boolean[::1], boolean[::1], int64[::1], int64[::1], uint64[:, ::1], int64[::1], int64[::1], "
          "uint64[:, ::1], int64[::1], int32[:, ::1])")
def _context_arrays(in_lark, in_valid, sole, several, several_words, completing_sole, completing_several,
                    complete_in_order, choice_order, trans):
    """(alive_lark, alive_valid, choice, outranked) of a ``LexContext`` whose
    terminals are ``in_lark`` and ``in_valid`` (see ``Lexer.__init__`` for the
    tables)."""
    n_words = several_words.shape[1]
    lark_words = np.zeros(n_words, np.uint64)
    valid_words = np.zeros(n_words, np.uint64)
    ordered_words = np.zeros(complete_in_order.shape[1], np.uint64)  # in_lark in choice order
    for t in range(len(in_lark)):
        bit = np.uint64(1) << np.uint64(t % 64)
        if in_lark[t]:
            lark_words[t // 64] |= bit
        if in_valid[t]:
            valid_words[t // 64] |= bit
    for i in range(len(choice_order)):
        if in_lark[choice_order[i]]:
            ordered_words[i // 64] |= np.uint64(1) << np.uint64(i % 64)
    alive_lark = np.zeros(len(sole), np.bool_)
    alive_valid = np.zeros(len(sole), np.bool_)
    for s in range(len(sole)):
        if sole[s] >= 0:
            alive_lark[s], alive_valid[s] = in_lark[sole[s]], in_valid[sole[s]]
    for i in range(len(several)):
        for j in range(n_words):
            if several_words[i, j] & lark_words[j]:
                alive_lark[several[i]] = True
            if several_words[i, j] & valid_words[j]:
                alive_valid[several[i]] = True
    choice = np.full(len(sole), -1, np.int64)
    for s in completing_sole:
        if in_lark[sole[s]] and in_valid[sole[s]]:
            choice[s] = sole[s]
    for i in range(len(completing_several)):
        for j in range(len(ordered_words)):
            both = complete_in_order[i, j] & ordered_words[j]
            if both:
                at = 0
                while not (both >> np.uint64(at)) & np.uint64(1):
                    at += 1
                first = choice_order[64 * j + at]
                if in_valid[first]:
                    choice[completing_several[i]] = first
                break
    # Where a valid terminal is complete but an invalid one outranks it (is emitted instead), the lexeme
    # is valid only if a byte leads on to a state alive for a valid terminal (see Lexer.context).
    outranked = False
    changed = True
    while changed:
        changed = False
        for s in completing_several:
            if alive_valid[s] and choice[s] < 0:
                leads_on = False
                for b in range(256):
                    if alive_valid[trans[s, b]]:
                        leads_on = True
                        break
                if not leads_on:
                    alive_valid[s] = False
                    changed = outranked = True
    return alive_lark, alive_valid, choice, outranked


@njit  # compiled into _explore, and cached with it
def _same_members(members, a, b, live, k):
    if b - a != k:
        return False
    for j in range(k):
        if members[a + j] != live[j]:
            return False
    return True


@njit
def _grown(array, rows):
    """``array`` copied into a longer one (of ``rows`` rows or more: twice as many as it had)."""
    out = np.empty((max(rows, 2 * array.shape[0]),) + array.shape[1:], array.dtype)
    out[:array.shape[0]] = array
    return out


@compiled("(int64[:, ::1], int64[::1], int64[::1], uint64[::1], int64, int64)")
def _explore(columns, start_members, start_begin, weight, most_members, budget):
    """The product automaton's start states (state i's members, global DFA
    states ascending, are ``start_members[start_begin[i]:start_begin[i + 1]]``)
    and the states with several live terminals they lead to, explored in the
    order they are found: (every state's members, one state after another;
    where each state's members begin, and end after the last; per state and
    byte class, its successor: a state, -1 dead, or -2 - g for the block state
    of global DFA state g, where g alone lives on). ``columns`` gives each
    global DFA state's successor per byte class (-1: dead). A set of several
    members is found by its digest, the sum of its members' ``weight``s, in a
    table probed from there on, so sets with the same digest stay apart. A
    state has at most ``most_members``; past ``budget`` members in all (-1: no
    budget), the exploration stops and returns no states."""
    n_classes = columns.shape[1]
    n = len(start_begin) - 1
    n_members = len(start_members)
    members = np.empty(max(1024, 2 * n_members), np.int64)
    members[:n_members] = start_members
    begin = np.empty(max(1024, 2 * n + 1), np.int64)
    begin[:n + 1] = start_begin
    code = np.empty((max(64, 2 * n), n_classes), np.int64)
    known = Dict.empty(key_type=types.uint64, value_type=types.int64)
    live = np.empty(most_members, np.int64)
    s = 0
    while s < n:
        for c in range(n_classes):
            k = 0
            digest = np.uint64(0)
            for i in range(begin[s], begin[s + 1]):
                t = columns[members[i], c]
                if t >= 0:
                    live[k] = t
                    k += 1
                    digest += weight[t]
            if k < 2:
                code[s, c] = -1 if k == 0 else -2 - live[0]
                continue
            found = known[digest] if digest in known else -1
            while found >= 0 and not _same_members(members, begin[found], begin[found + 1], live, k):
                digest += np.uint64(1)
                found = known[digest] if digest in known else -1
            if found < 0:  # a new state
                found = n
                known[digest] = n
                n += 1
                if n_members + k > len(members):
                    members = _grown(members, n_members + k)
                if n + 1 > len(begin):
                    begin = _grown(begin, n + 1)
                if n > code.shape[0]:
                    code = _grown(code, n)
                members[n_members:n_members + k] = live[:k]
                n_members += k
                begin[n] = n_members
                if 0 <= budget < n_members:
                    return members[:0], begin[:0], code[:0]
            code[s, c] = found
        s += 1
    return members[:n_members], begin[:n + 1], code[:n]


class Lexer:
    """The product automaton of a grammar's terminals (in lark's lexer order)."""

    def __init__(self, dfas: list, ignored: np.ndarray, choice_order: np.ndarray, start_sets):
        """``start_sets``: the sets of terminals a lexeme may be (one per parser
        state). One start for all of them serves best (the index then traces
        a group of tokens once for every context) until the product from it
        grows past _SHARED_START_PAIRS (or there are _SHARED_START_TERMINALS);
        then each set gets its own starts."""
        self.dfas = dfas
        self.ignored = ignored
        self.choice_order = choice_order
        everything = frozenset(range(len(dfas)))
        layout = _Layout(dfas)
        try:
            if len(dfas) >= _SHARED_START_TERMINALS:
                raise _TooLarge
            self._product(dfas, layout, [everything], _SHARED_START_PAIRS)
            self._shared = everything
        except _TooLarge:
            self._product(dfas, layout, list(start_sets), None)
            self._shared = None
        self._contexts: dict = {}
        self._closed: dict = {}  # per state asked: see closed
        self._alive_accepted: dict = {}  # (state, context key) asked: see alive_accepted

    def start(self, terms: frozenset) -> tuple:
        """(fresh lexeme, fresh lexeme after an ignored one) where a lexeme may be one of ``terms``."""
        return self.start_of[terms if self._shared is None else self._shared]

    def _product(self, dfas, layout: "_Layout", start_sets: list, budget) -> None:
        # A state is the set of its live terminals' DFA states, numbered globally (see _Layout).
        # Inside most lexemes one terminal is left alive: once one such state is reached, all of
        # that terminal's states join as a block (``single_base[t]`` + its DFA state), whose
        # transitions are the DFA's own, shifted. The start states and the states with several
        # live terminals are explored (``_explore``).
        n_terms = len(dfas)
        sizes, offset, term_of = layout.sizes, layout.offset, layout.term_of
        byte_class, columns = layout.byte_class, layout.columns
        # Start states: each set's terminals in their DFAs' state 0, and so without the ignored ones;
        # equal sets share a state.
        ignored = set(np.flatnonzero(self.ignored).tolist())
        firsts: dict = {}
        self.start_of = {terms: (firsts.setdefault(frozenset(terms), len(firsts)),
                                 firsts.setdefault(frozenset(terms) - ignored, len(firsts)))
                         for terms in start_sets}  # per set: (fresh lexeme, fresh lexeme after an ignored one)
        self.starts = frozenset(firsts.values())
        firsts = [offset[sorted(terms)] for terms in firsts]
        start_begin = np.concatenate([[0], np.cumsum([len(members) for members in firsts])]).astype(np.int64)
        weight = np.random.default_rng(0).integers(0, 2**64, size=len(columns), dtype=np.uint64)
        members, begin, code = _explore(columns, np.concatenate(firsts).astype(np.int64), start_begin, weight,
                                        n_terms, -1 if budget is None else budget)
        if not len(begin):
            raise _TooLarge
        n_explored = len(begin) - 1
        owner = np.repeat(np.arange(n_explored), np.diff(begin))  # the state of each member
        # Blocks for the terminals reached alone, after the explored states; then the dead sentinel.
        singles = -2 - code[code <= -2]
        reached = np.unique(term_of[singles])
        single_base = np.full(n_terms, -1, dtype=np.int64)
        single_base[reached] = n_explored + np.concatenate([[0], np.cumsum(sizes[reached])[:-1]]).astype(np.int64)
        n = n_explored + int(sizes[reached].sum())
        if n * n_terms > _MAX_STATE_TERMINALS:
            raise ConstrainedError(
                f"the grammar is too complex to compile: its lexer would need {n} states over {n_terms} terminals "
                "(for a schema: many property names, formats and patterns; split it, or give fewer of them)")
        trans = np.full((n + 1, 256), n, dtype=np.int32)
        g = np.maximum(-2 - code, 0)
        t = term_of[g]
        trans[:n_explored] = np.where(code >= 0, code, np.where(code == -1, n, single_base[t] + g - offset[t]))[:, byte_class]
        comps = np.full((n, n_terms), -1, dtype=np.int16 if sizes.max() < 2**15 else np.int32)  # half the bytes
        accepting = np.zeros((n, n_terms), dtype=bool)
        terms = term_of[members]
        comps[owner, terms] = members - offset[terms]
        accepting[owner, terms] = np.concatenate([dfa.accepting for dfa in dfas])[members]
        terms = terms.tolist()
        ends = begin.tolist()
        alive_terminals = [terms[a:b] for a, b in zip(ends, ends[1:])]
        for t in reached.tolist():
            base, dfa = int(single_base[t]), dfas[t]
            trans[base:base + dfa.n_states] = np.where(dfa.transitions >= 0, dfa.transitions + base, n)
            comps[base:base + dfa.n_states, t] = np.arange(dfa.n_states)
            accepting[base:base + dfa.n_states, t] = dfa.accepting
            alive_terminals.extend([[t]] * dfa.n_states)
        self.components = comps  # per state, each terminal's DFA state (-1: dead)
        self.n_states = n
        self.alive = comps >= 0
        self.alive_terminals = alive_terminals + [[]]  # the sentinel's: none
        self.accepting = accepting
        self.completes = np.append(accepting.any(axis=1), False)  # per state, whether some terminal is complete
        self.live = np.append(self.alive.any(axis=1), False)  # per state, whether some terminal is alive
        self.trans = trans
        # For contexts: per state, its one live terminal (-1: several; the sentinel: none), as most
        # states have one; the others' live terminals as bits; the states where some terminal is
        # complete, those with one live terminal and the others, with their complete terminals in
        # choice order.
        self._sole = np.append(np.where(self.alive.sum(axis=1) == 1, self.alive.argmax(axis=1), -1), -1)
        self._several = np.flatnonzero(self._sole[:n] < 0)
        self._several_words = _words(self.alive[self._several])
        completing = np.flatnonzero(self.accepting.any(axis=1))
        self._completing_sole = completing[self._sole[completing] >= 0]
        self._completing_several = completing[self._sole[completing] < 0]
        self._complete_in_order = _words(self.accepting[self._completing_several][:, self.choice_order])

    def alive_accepted(self, q: int, ctx: "LexContext") -> list:
        """The terminals alive in state q that ``ctx`` accepts (at a
        key's start, hundreds of names are alive: a mask step asks several times)."""
        key = (q, ctx.key)
        hit = self._alive_accepted.get(key)
        if hit is None:
            if len(self._alive_accepted) >= _ALIVE_ACCEPTED_KEPT:
                self._alive_accepted.clear()
            alive = np.array(self.alive_terminals[q], dtype=np.int64)
            hit = self._alive_accepted[key] = alive[ctx.acceptable[alive]].tolist()
        return hit

    def closed(self, q: int) -> bool:
        """Whether no byte leads on from state q (after a comma, a closing quote):
        a lexeme there is over, whatever the context."""
        hit = self._closed.get(q)
        if hit is None:
            hit = self._closed[q] = bool((self.trans[q] == self.n_states).all())
        return hit

    def context(self, acceptable: frozenset, valid: frozenset) -> LexContext:
        """The interned context for these terminal sets (both include the ignored
        terminals). A lexeme complete for a valid terminal but emitted as an
        invalid one that outranks it (a shadow, grammar.grammar_from_rules) is
        not valid: where it cannot grow on either, its state is dead for the
        valid terminals too, and so in turn is a complete state whose every
        next byte leads to a dead one. States where no terminal is complete
        are not revisited: where shadows make them so, grammar_from_rules'
        conditions leave each a lexeme to finish as the terminal shadowed (of
        infinitely many endings, the shadows take finitely many)."""
        ctx = self._contexts.get((acceptable, valid))
        if ctx is None:
            ctx = self._contexts[(acceptable, valid)] = self._new_context(acceptable, valid)
        return ctx

    def _new_context(self, acceptable, valid) -> LexContext:
        in_lark = np.zeros(self.alive.shape[1], dtype=bool)
        in_lark[list(acceptable)] = True
        in_valid = in_lark
        if valid != acceptable:  # (most are)
            in_valid = np.zeros(self.alive.shape[1], dtype=bool)
            in_valid[list(valid)] = True
        alive_lark, alive_valid, choice, outranked = _context_arrays(
            in_lark, in_valid, self._sole, self._several, self._several_words, self._completing_sole,
            self._completing_several, self._complete_in_order, self.choice_order, self.trans)
        if valid == acceptable:
            alive_valid = alive_lark
        return LexContext(len(self._contexts), in_lark, in_valid, alive_lark, alive_valid, choice, outranked)

    def check_lark_agrees(self, starts: dict, names, is_str, priority) -> None:
        """Refuse terminals that lark's lexer would split differently from the
        longest match used here. Lark takes, among the terminals it tries, the
        first (in its order: priority, longest possible match, ...) that matches
        any prefix; here the lexeme is the longest one, emitted as the terminal
        the tie rule picks. They agree when, wherever a lexeme may end, the first
        terminal in lark's order that matched any prefix of it matches it whole
        and is the one picked (or is a regex that lark's "unless" rule turns into
        the string literal picked). ``starts`` maps each acceptable set to the start
        states its lexemes begin in."""
        n_terms = len(names)
        for acceptable, first_states in starts.items():
            in_set = np.zeros(n_terms, dtype=bool)
            in_set[list(acceptable)] = True
            alive = np.append((self.alive & in_set).any(axis=1), False)
            accepting = self.accepting & in_set
            complete = accepting[:, self.choice_order]
            picked = np.where(complete.any(axis=1), self.choice_order[complete.argmax(axis=1)], -1)
            first_acc = np.where(accepting.any(axis=1), accepting.argmax(axis=1), n_terms)  # terminals are in lark's order
            seen = {(q, n_terms): b"" for q in first_states}
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
