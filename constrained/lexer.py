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

from .dfa import DFA, minimize, ranges
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


def _segment_sums(values: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """Sums of ``values`` over the row segments ``bounds[i]:bounds[i + 1]`` (which may be
    empty; the last ends at the last row), wrapping for unsigned values."""
    starts = bounds[:-1]
    filled = bounds[1:] > starts
    sums = np.zeros((len(starts), values.shape[1]), dtype=values.dtype)
    if filled.any():  # reduceat gives an empty segment its first row: leave those out
        sums[filled] = np.add.reduceat(values, starts[filled], axis=0)
    return sums


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
                                       ((dfa.transitions[:, first_bytes], o) for dfa, o in zip(dfas, self.offset.tolist()))])


class _Growing:
    """A 1-D int64 array grown at the end, with room doubled as needed."""

    def __init__(self, values):
        self._room = np.array(values, dtype=np.int64)
        self._size = len(self._room)

    def extend(self, values) -> None:
        end = self._size + len(values)
        if end > len(self._room):
            self._room = np.concatenate([self._room, np.empty(max(end, 2 * len(self._room)) - len(self._room),
                                                              dtype=np.int64)])
        self._room[self._size:end] = values
        self._size = end

    @property
    def values(self) -> np.ndarray:
        return self._room[:self._size]


_SHARED_START_PAIRS = 100_000  # (state, live terminal) pairs explored from one start shared by all contexts
# Past this many terminals the product from one shared start outgrew _SHARED_START_PAIRS in every
# MaskBench schema tried (the 300 slowest to compile, up to 229 terminals where it did not): skip it.
_SHARED_START_TERMINALS = 250
_FEW_ENTRIES = 64  # levels with at most this many entries of several live terminals number their states in a dictionary
_MAX_STATE_TERMINALS = 50_000_000  # states x terminals of a lexer (its tables take about 10 bytes per pair)


class _TooLarge(Exception):
    """The product from the shared start outgrew its budget."""


class LexContext:
    """The automaton's states as seen with one set of acceptable and valid terminals."""

    __slots__ = ("key", "acceptable", "valid", "alive_lark", "alive_valid", "choice", "outranked")

    def __init__(self, key, acceptable, valid, alive_lark, alive_valid, choice, outranked):
        self.key = key  # a small integer, unique per (acceptable, valid)
        self.acceptable = acceptable  # (terminals,) bool
        self.valid = valid  # (terminals,) bool
        self.alive_lark = alive_lark  # (n + 1,) bool, the sentinel is False
        self.alive_valid = alive_valid  # (n + 1,) bool
        self.choice = choice  # (n + 1,) int: the terminal a complete lexeme is emitted as, -1 for none
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

    def start(self, terms: frozenset) -> tuple:
        """(fresh lexeme, fresh lexeme after an ignored one) where a lexeme may be one of ``terms``."""
        return self.start_of[terms if self._shared is None else self._shared]

    def _product(self, dfas, layout: "_Layout", start_sets: list, budget) -> None:
        # A state is the set of its live terminals' DFA states, numbered globally (see _Layout).
        # Inside most lexemes one terminal is left alive: once one such state is reached, all of
        # that terminal's states join as a block (``single_base[t]`` + its DFA state), whose
        # transitions are the DFA's own, shifted. The states with several live terminals (and the
        # start states) are explored a level at a time, all of a level's states and byte classes at
        # once; their successors are told apart by a 64-bit digest of the set, and each grouping is
        # then checked member by member.
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
        for seed in range(3):  # a digest collision (odds 2**-64 a pair) is caught and retried
            found = self._explore(columns, firsts, np.random.default_rng(seed), budget)
            if found is not None:
                break
        else:  # pragma: no cover
            raise ConstrainedError("the lexer automaton could not be built (repeated digest collisions)")
        members, begin, levels = found
        n_explored = len(begin) - 1
        owner = np.repeat(np.arange(n_explored), np.diff(begin))  # the state of each member
        # Blocks for the terminals reached alone, after the explored states; then the dead sentinel.
        singles = np.concatenate([-2 - code[code <= -2] for _, code in levels] + [np.zeros(0, dtype=np.int64)])
        reached = np.unique(term_of[singles])
        single_base = np.full(n_terms, -1, dtype=np.int64)
        single_base[reached] = n_explored + np.concatenate([[0], np.cumsum(sizes[reached])[:-1]]).astype(np.int64)
        n = n_explored + int(sizes[reached].sum())
        if n * n_terms > _MAX_STATE_TERMINALS:
            raise ConstrainedError(
                f"the grammar is too complex to compile: its lexer would need {n} states over {n_terms} terminals "
                "(for a schema: many property names, formats and patterns; split it, or give fewer of them)")
        trans = np.full((n + 1, 256), n, dtype=np.int32)
        for ids, code in levels:
            g = np.maximum(-2 - code, 0)
            t = term_of[g]
            target = np.where(code >= 0, code, np.where(code == -1, n, single_base[t] + g - offset[t]))
            trans[ids] = target[:, byte_class]
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
        self.single_base = single_base  # per terminal, the state where it alone is alive in its DFA state 0 (-1: none)
        self.n_states = n
        self.alive = comps >= 0
        self.alive_terminals = alive_terminals + [[]]  # the sentinel's: none
        self.accepting = accepting
        self.completes = np.append(accepting.any(axis=1), False)  # per state, whether some terminal is complete
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

    def _explore(self, columns, starts, rng, budget):
        """The start states (``starts``: their members) and the states with several
        live terminals, breadth first: (every state's members, global DFA states
        ascending, one after the other; where each state's members begin, and
        end after the last; per level, the level's states and their successor
        codes per byte class: a state, -1 dead, or -2 - g for the block state of
        global DFA state g). None where two sets share a digest; _TooLarge past
        ``budget`` (state, live terminal) pairs."""
        # Per (global DFA state, class), what a live target adds to its set's sum: 1 to the count
        # (low 24 bits) and itself above them. A set of several is told by its digest, the sum of
        # its members' random weights.
        counted = np.where(columns >= 0, (columns.astype(np.uint64) << 24) | 1, np.uint64(0))
        weight = rng.integers(0, 2**63, size=len(columns), dtype=np.int64).astype(np.uint64)
        n = len(starts)
        flat = np.concatenate(starts).astype(np.int64)
        bounds = np.concatenate([[0], np.cumsum([len(start) for start in starts])])
        members = _Growing(flat)  # every state's members, one state after another
        begin = _Growing(bounds)  # where each state's members begin, and where the last ends
        level_ids = np.arange(n)
        known: dict = {}  # digest -> state, for the states with several live terminals
        levels = []
        while len(level_ids):
            if budget is not None and len(members.values) > budget:
                raise _TooLarge
            targets = columns[flat]  # (member, class)
            packed = _segment_sums(counted[flat], bounds)  # (state, class)
            count = (packed & 0xFFFFFF).astype(np.int64)
            code = np.where(count == 1, -2 - (packed >> 24).astype(np.int64), -1)
            several = np.nonzero(count >= 2)
            # Every such entry's live targets in order (ascending, as its state's members are).
            lengths = bounds[several[0] + 1] - bounds[several[0]]
            entries = targets[ranges(bounds[several[0]], lengths), np.repeat(several[1], lengths)]
            entries = entries[entries >= 0]
            counts = count[several]
            firsts = np.concatenate([[0], np.cumsum(counts)])
            digest = np.add.reduceat(weight[entries], firsts[:-1]) if len(counts) else np.zeros(0, dtype=np.uint64)
            # Each entry's state: known by its digest, or new. Most levels are small, where a dictionary
            # beats sorting (np.unique).
            if len(digest) <= _FEW_ENTRIES:
                named, first = [], []  # per entry its state; per new state its first entry
                for k, d in enumerate(digest.tolist()):
                    found = known.get(d)
                    if found is None:
                        found = known[d] = n + len(first)
                        first.append(k)
                    named.append(found)
                code[several] = named
                first = np.array(first, dtype=np.int64)
            else:
                unique, first, inverse = np.unique(digest, return_index=True, return_inverse=True)
                ids = np.array([known.get(d, -1) for d in unique.tolist()], dtype=np.int64)
                new = np.flatnonzero(ids < 0)
                ids[new] = np.arange(n, n + len(new))
                known.update(zip(unique[new].tolist(), ids[new].tolist()))
                code[several] = ids[inverse.ravel()]
                first = first[new]
            # The new states' members: those of the first entry with their digest.
            picked = entries[ranges(firsts[first], counts[first])]
            begin.extend(len(members.values) + np.cumsum(counts[first]))
            members.extend(picked)
            new_ids = np.arange(n, n + len(first))
            n += len(first)
            # Every entry must be exactly the set its digest named: the same members, in order.
            starts_of = begin.values[:-1]
            if not np.array_equal(np.diff(begin.values)[code[several]], counts):
                return None
            if not np.array_equal(members.values[ranges(starts_of[code[several]], counts)], entries):
                return None
            levels.append((level_ids, code))
            state, cls = several[0][first], several[1][first]
            level_ids, flat, bounds = new_ids, picked, np.concatenate([[0], np.cumsum(count[state, cls])])
        return members.values, begin.values, levels

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
