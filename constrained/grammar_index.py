"""A grammar over one vocabulary: which tokens are allowed in a (lexer state,
parser stack) situation, as packed masks.

Each terminal knows, per state of its DFA, how every token fares: which tokens
keep it alive, which die at their first byte, and which complete it and go on
(``_TerminalTokens.exits``, from its token table: index.py's trie walk over all
states for a small DFA; one row per state reached for a large one, from a pass
over the whole trie (once per vocabulary for the states with the same small
automaton below them, in any terminal) or, where most first bytes lead where
they lead from another state, from that state's exits and a walk of the other
tokens; for a literal or an enum, or a state whose bytes start few tokens,
from the trie walked below its live nodes only; the loops that read bytes are
compiled, walks.py). These are
shared by every grammar using the terminal. A lexer state where several
terminals are alive combines their exits (``_combine``), so no step walks the
whole vocabulary. Tokens whose first byte enters several of them are walked
through the lexer's automaton: where they are few (a quote before an object's
keys), all of them, once for all the contexts with the same acceptable
terminals; where there are more (letters inside a key), only those in the
terminals' groups, the others staying inside as a valid terminal's exits say
(unless a name that is not valid outranks it there); where most tokens' first
bytes do (a long string's chunk and tail), one pass over the trie through the
lexer's automaton costs less (``_walked_whole``). Grammars with the same
terminals alive in the same states (or, where few are, in states with the
same automata below: inside a key, "name" after "na" and "surname" after
"surna") share the combination and the walks of groups from there
(``_lexer_shape``).
Tokens that leave the lexeme are then followed from the parser
stack, lexeme after lexeme, in groups by the terminal emitted (only the tokens
whose next byte some terminal of the context lets in enter the next lexeme: a
few percent of a group, usually); the walk of a group through a lexeme is
remembered under the group, the lexeme's start state and its context, and a
group that several contexts meet is traced once with every terminal alive
(from the third, where many but not most of the vocabulary's tokens enter,
see ``_lexeme_walk``), the next contexts reading their walks off the trace.
A whole mask, and each group's way through the lexemes after one, is
remembered under the top states of the stack it read (lalr.SuffixMemo), so
the same situation at another nesting depth costs a dictionary lookup.
"""

import functools
import hashlib
import itertools
import os
import weakref
from collections import OrderedDict
from typing import NamedTuple

import numpy as np

from .dfa import DFA
from .index import walk_trie
from .lalr import SuffixMemo
from .models import cache_dir
from .recent import Recent
from .vocab import Vocabulary, padded_bytes
from .walks import (by_terminal, entering_tokens, exits_like, narrow_walk, next_two_bytes, numbered_below, pack_ids,
                    split_bytes, token_walk, trace_read, trace_tokens, trie_exits, trie_row, unpack_ids)

_MASK_CACHE = 50_000  # masks kept per grammar and vocabulary, keyed by stack suffix (equal masks share one array)
_FOLLOW_CACHE = 50_000  # groups followed through the lexemes after them, keyed likewise
_WALK_CACHE = 2_000  # token walks from a lexer state kept per grammar and vocabulary
_NODE_CACHE = 50_000  # walks of tokens that crossed into a new lexeme, kept likewise
_WALKS_UNTRACED = 2  # contexts that walk a group from a lexer state before the next ones trace it
_FEW_ENTERING = 1_000  # but a group of which at most this many tokens enter the lexeme in a context is walked
# and so is one of which more do: most of the vocabulary crossing a long string's chunk boundary. Its trace
# would cost the step that makes it two or three walks (~8 ms against ~3.5 for 110,000 tokens), and such a
# group meets few contexts (the chunk, tail and quote that the string's length bounds let in).
_MANY_ENTERING = 30_000
_TRACE_STATES = 8_000_000  # paths and tokens kept in traces (see _Trace) per grammar and vocabulary, ~20 bytes each
_SHARED_BYTES = 128 << 20  # walks shared across grammars (GrammarIndex._lexer_shape), per vocabulary
_TABLES_ON_DISK = 1 << 30  # bytes of terminal tables kept in the cache directory (the least recently used go)
# Terminals' token tables shared across grammars, per vocabulary: the most recent new ones, and as many of
# those that a second grammar used, apart for those walked a row per state (see _terminal_tokens).
_TERMINALS_KEPT = 64
_SMALL_STATES = 24  # terminals with at most this many DFA states get a whole token table, built in one trie walk
_WHOLE_TABLE_STATES = 200  # those with more than this get a token row per state reached
_TABLE_PAIRS = 1_000_000  # in between, a whole table pays up to about this many (state, token spelled in its bytes) pairs
_NARROW_BYTES = 40  # but no more than _SMALL_STATES where no state lets in more bytes than this (rows are cheap)
_EXITS_KEPT = 4096  # per terminal, states whose exits are kept (the most recently used)
# At most this many states below a state: it is named by the automaton below it (_below_digest), so that its
# exits are shared by every terminal's state with the same automaton below, and so are the walks from lexer
# states where it is alive with few others (_lexer_shape).
_BELOW_STATES = 64
_BELOW_KEPT = 256  # such exits kept per vocabulary (the most recently used)
_BELOW_DIGESTS_KEPT = 50_000  # (automaton, state) pairs whose _below_digest is kept, for every grammar
# Lexer states with at most this many terminals alive name them by the automaton below (_lexer_shape); at a
# key's start, hundreds of names are alive: digesting each would cost more than the rare grammar sharing it saves.
_SHAPE_BELOW = 4
_DONORS_TRIED = 8  # per terminal, the most recent states tried as donors (see _TerminalTokens._donor)
# A state of a terminal without a whole table where at most this many tokens start with a byte it lets in
# (a pattern's "-" before digits) walks them below the trie's live nodes, as a narrow terminal does, rather
# than passing over the whole trie.
_FEW_ALIVE = 4_000
# Token sets larger than this are read in one pass over the trie (~1 ms on Llama 3), not one by one (~25 ns a token).
_TRIE_WALKED = 40_000
# Lexer states where at most this many tokens start with a byte that enters several terminals walk them one by one.
_FEW_SHARED = 500


class _Walk:
    """How every token fares from one lexer state in one context, before the
    parser is asked anything: ``inside`` (packed) the tokens that stay inside the
    lexeme and end where a valid terminal can still complete; ``zero_bits``
    (packed) those whose first byte already starts a new lexeme, after the current
    one is emitted as ``zero_term``; ``later``: per terminal emitted, the tokens
    that leave the lexeme after one byte or more, with the offset of the byte that
    starts the next lexeme, as a ``_Group``."""

    __slots__ = ("inside", "zero_term", "zero_bits", "later")

    def __init__(self, inside, zero_term, zero_bits, later):
        self.inside, self.zero_term, self.zero_bits, self.later = inside, zero_term, zero_bits, later


class _Split(NamedTuple):
    """How the first bytes of tokens split among the terminals alive in a lexer
    state, for one set of acceptable terminals (``GrammarIndex._split``)."""

    live: list  # the terminals alive there that the set accepts, in the lexer's order
    entered: np.ndarray  # per first byte, how many of them it enters
    n_shared: int  # how many tokens start with a byte that enters several
    own: list  # per terminal, the first bytes that enter it and no other (None where none do)
    shares: list  # per terminal, whether some of its first bytes enter other terminals too
    walked: tuple | None  # those tokens walked from the state (walk's answer), where at most _FEW_SHARED; else None


class _Group:
    """Tokens with the offset of the byte each goes on from, and an id that is the
    same for equal groups (a digest): what happens to them in a lexeme depends
    only on the group and the lexeme's state and context, however the tokens got
    there."""

    __slots__ = ("id", "tok", "off", "next_bytes", "first_byte")

    def __init__(self, id, tok, off):
        self.id, self.tok, self.off = id, tok, off
        self.next_bytes = None  # walks.next_two_bytes' answer, once a lexeme asks (GrammarIndex._entering)
        self.first_byte = None  # each token's first byte, once a combination of terminals asks (GrammarIndex._combine)


class _Trace:
    """A group's tokens walked from lexer state ``q`` with every terminal alive,
    byte by byte, until each token ends or leaves them all. Tokens that pass
    through the same lexer states share one path, kept once: a tree with a level
    per byte (path i reaches ``state[i]``, extends path ``parent[i]``, or starts
    from q where that is -1, and is ``depth[i]`` bytes past the first). A
    context's walk of a token is its path up to the first state that no
    terminal the context accepts keeps alive, so each context reads its walks
    off the paths (``GrammarIndex._read``) instead of walking the bytes again.
    The tokens (``tok``, ``off``) are sorted by the path each one ends on
    (``end``). Made by ``walks.trace_tokens``."""

    __slots__ = ("q", "state", "parent", "depth", "tok", "off", "end")

    def __init__(self, q, state, parent, depth, tok, off, end):
        self.q, self.state, self.parent, self.depth = q, state, parent, depth
        self.tok, self.off, self.end = tok, off, end


class GrammarIndex:
    """A grammar over one vocabulary: token masks per (lexer state, parser stack),
    remembered under the top of the stack that decided them."""

    def __init__(self, language, vocab: Vocabulary):
        self.language = language
        self.lexer = language.lexer
        self.parser = language.parser
        self.vocab = vocab
        self.bytes, self.lengths = _token_matrix(vocab)
        self._data, self._starts = _token_data(vocab)  # for the compiled walks (walks.py)
        self.eos = np.array(sorted(vocab.eos_ids), dtype=np.int64)
        self.usable = _usable(vocab)  # tokens with bytes that are not EOS
        self._first_byte = self.bytes[:, 0]
        self._choice_rank = np.argsort(self.lexer.choice_order).tolist()  # per terminal, its place in the lexer's choice
        self._shapes: dict = {}  # (lexer state, context key): _lexer_shape
        self._shared_walks = _SHARED.setdefault(vocab, Recent(_SHARED_BYTES))
        self.shared_below = _BELOW.setdefault(vocab, Recent(_BELOW_KEPT))  # see _below_digest
        # The usable tokens by first byte (ascending within each): byte b's are
        # _by_first_ids[_first_starts[b]:_first_starts[b + 1]], first_byte_counts[b] of them.
        self._by_first, self._byte_set_masks, self._by_first_ids, self._first_starts, self.first_byte_counts = \
            _by_first_byte(vocab)
        # How every token fares from one state of one terminal, per terminal (shared across grammars):
        # those with a whole token table now (below), the others when first alive in a mask, since many
        # never are (other branches of a schema) and each state they reach costs a pass of its own anyway.
        self._terminals: list = [None] * len(self.lexer.dfas)
        self.words = (vocab.size + 31) // 32
        self._walks: dict = {}
        self._splits: dict = {}  # (lexer state, acceptable terminals): _Split
        self._nodes: dict = {}
        self._walked: dict = {}  # (group, state): how many contexts walked it so far (see _lexeme_walk)
        self._traces = Recent(_TRACE_STATES)
        self._nothing = np.zeros(self.words, dtype=np.uint32)
        self._canon: dict = {}
        self._canon_ids: dict = {}
        self._masks = SuffixMemo(_MASK_CACHE)
        self._follows = SuffixMemo(_FOLLOW_CACHE)
        self._distinct: dict = {}
        self.bias_cache: OrderedDict = OrderedDict()
        self._eos_only = self._pack_ids(self.eos)
        _build_vocabulary_tables(vocab)
        # Terminals with a whole token table (small automata: a number, a scalar's alternatives) get it now:
        # built at a mask step (a walk over the trie from every state, or a load from disk), it would make
        # that step one of the slowest of a generation.
        for k, dfa in enumerate(self.lexer.dfas):
            if _whole_table_pays(dfa, vocab, _narrow(dfa)):
                self.terminal(k)

    def terminal(self, k: int) -> "_TerminalTokens":
        """How the vocabulary fares in terminal ``k`` (``_TerminalTokens``)."""
        found = self._terminals[k]
        if found is None:
            found = self._terminals[k] = _terminal_tokens(self.lexer.dfas[k], self.vocab)
        return found

    def _may_complete(self, entry: np.ndarray) -> np.ndarray:
        """The tokens (packed) with a byte before their last in ``entry`` (the bytes
        that enter a complete state): only such tokens can end a lexeme and go on."""
        key = (False, entry.tobytes())
        hit = self._byte_set_masks.get(key)
        if hit is None:
            hit = self._byte_set_masks[key] = np.bitwise_or.reduce(_bytes_before_last(self.vocab)[entry], axis=0)
        return hit

    def starting_with(self, first: np.ndarray) -> np.ndarray:
        """The usable tokens (with bytes, not EOS) whose first byte is one of
        ``first`` (256 bools), packed: ORs the fewer of the bytes in or out.
        Terminals' states share a few such sets (every byte but a quote ...)."""
        key = (True, first.tobytes())
        hit = self._byte_set_masks.get(key)
        if hit is None:
            if first.sum() <= 128:
                hit = np.bitwise_or.reduce(self._by_first[:256][first], axis=0, initial=0)
            else:
                hit = self._by_first[256] & ~np.bitwise_or.reduce(self._by_first[:256][~first], axis=0, initial=0)
            hit.flags.writeable = False
            self._byte_set_masks[key] = hit
        return hit

    def _pack_bools(self, allowed: np.ndarray) -> np.ndarray:
        """Packed words with the bits of the tokens ``allowed`` (one bool per token) set."""
        packed = np.zeros(self.words * 4, dtype=np.uint8)
        packed[: (len(allowed) + 7) // 8] = np.packbits(allowed, bitorder="little")
        return packed.view(np.uint32)

    def _ids(self, packed: np.ndarray) -> np.ndarray:
        """The tokens whose bits are set in ``packed``, ascending."""
        return unpack_ids(_writable(packed))

    def _pack_ids(self, ids) -> np.ndarray:
        """Packed words with the bits of ``ids`` set."""
        return pack_ids(_writable(_int64(ids)), self.words)

    def finished_mask(self) -> np.ndarray:
        return self._eos_only

    def step(self, q: int, stack: tuple, token: int):
        """(lexer state, stack) after ``token`` (not EOS), or None where it is not allowed."""
        data = self.vocab.tokens[token]
        return self.language.step(q, stack, data) if data else None

    def mask(self, q: int, stack: tuple) -> np.ndarray:
        parser = self.parser
        ctx = self.language.context(stack)
        seen = self._canonical(q, ctx)
        hit = self._masks.get(seen, stack)
        if hit is not None:
            parser.read(stack, hit[0])
            return hit[1]
        with parser.reading(stack) as depth:
            packed = self._shared(self._mask(q, stack, ctx, seen))
            self._masks.put(seen, stack, depth(), packed)
        return packed

    def _canonical(self, q: int, ctx) -> int:
        """One id for the lexer states that agree on the terminals ``ctx`` accepts:
        the others cannot change what happens in this lexeme, so these states share
        walks and masks (after "us", a name is a name whether or not USING was alive)."""
        key = (q, ctx.key)
        hit = self._canon.get(key)
        if hit is None:
            lexer = self.lexer
            seen = (q in lexer.starts, np.where(ctx.acceptable, lexer.components[q], -1).tobytes())
            hit = self._canon[key] = self._canon_ids.setdefault(seen, len(self._canon_ids))
        return hit

    def _shared(self, packed: np.ndarray) -> np.ndarray:
        """The one stored copy of a mask equal to ``packed`` (most stacks share a few masks)."""
        if len(self._distinct) >= _MASK_CACHE:
            self._distinct.clear()
        data = packed.tobytes()
        same = self._distinct.setdefault(hash(data), packed)
        return same if same is packed or same.tobytes() == data else packed

    def _mask(self, q: int, stack: tuple, ctx, seen: int) -> np.ndarray:
        language = self.language
        walk = self._walk_from(q, ctx, seen)
        words = walk.inside.copy()
        if walk.zero_term >= 0:
            words |= self.mask(*language.after(stack, walk.zero_term)) & walk.zero_bits
        found = []
        for term, group in walk.later.items():
            found += self._follow(group, *language.after(stack, term))
        if found:
            words |= self._pack_ids(np.concatenate(found))
        if language.eos_ok(q, stack):
            words |= self._eos_only
        words.flags.writeable = False
        return words

    def _walk_from(self, q: int, ctx, seen: int) -> _Walk:
        """The ``_Walk`` from lexer state q in context ctx (cached by canonical state)."""
        key = (seen, ctx.key)
        hit = self._walks.get(key)
        if hit is not None:
            return hit
        components = self.lexer.components[q]
        live = self.lexer.alive_accepted(q, ctx)
        if not live or (len(live) == 1 and not ctx.valid[live[0]]):  # no terminal the parser shifts here
            result = _Walk(self._nothing, -1, None, {})
        elif len(live) == 1:  # inside most lexemes: one terminal, whatever the grammar around it
            k = live[0]
            stay, first_out, group, _ = self.terminal(k).exits(int(components[k]), self)
            result = _Walk(stay, int(ctx.choice[q]), first_out, {k: group} if len(group.tok) else {})
        else:
            result = self._combined(q, ctx)
        if len(self._walks) >= _WALK_CACHE:
            self._walks.clear()
        self._walks[key] = result
        return result

    def _lexer_shape(self, q: int, ctx) -> tuple:
        """(the terminals alive in lexer state q that ``ctx`` accepts, in the order
        the lexer picks among them; a key naming them whatever the grammar: each
        one's state, by the automaton below it (``_below_digest``) where at most
        _SHAPE_BELOW terminals are alive and that automaton is small, else by
        its DFA's digest and the state's number; and their validity). A walk
        from q in ctx depends on nothing else (the lexer states it reaches are
        decided, as far as ctx sees them, by those automata, that order and that
        validity), so grammars over this vocabulary with the same shape share walks
        (``_combined``, ``_lexeme``): a long string's chunk and tail meet in every
        schema with one, the tokens after a string's closing quote meet a comma
        or a closing brace in most, and inside a key, a declared name with the
        same letters left to go ("name" after "na", "surname" after "surna")
        beside an undeclared name meets in many."""
        key = (q, ctx.key)
        hit = self._shapes.get(key)
        if hit is None:
            live = sorted(self.lexer.alive_accepted(q, ctx), key=self._choice_rank.__getitem__)
            dfas, at = self.lexer.dfas, np.array(live, dtype=np.int64)
            states = self.lexer.components[q][at]
            if len(live) <= _SHAPE_BELOW:
                named = tuple(_below_digest(dfas[k], s) or (dfas[k].digest, s) for k, s in zip(live, states.tolist()))
            else:
                named = (tuple(dfas[k].digest for k in live), states.tobytes())
            hit = self._shapes[key] = (live, (named, ctx.valid[at].tobytes()))
        return hit

    def _combined(self, q: int, ctx) -> _Walk:
        """``_combine``'s walk, shared by the grammars with the same shape at q
        (``_lexer_shape``): the terminals' exits are asked only where it is not."""
        terminals, shape = self._lexer_shape(q, ctx)
        hit = self._shared_walks.get(shape)
        if hit is None:
            if self._split(q, ctx).n_shared > _TRIE_WALKED:  # one pass over the trie costs less than _combine
                walk = self._walked_whole(q, ctx)
            else:
                walk = self._combine(q, ctx)
            place = {k: j for j, k in enumerate(terminals)}  # a terminal's place in the shape
            hit = (walk.inside, walk.zero_bits, place.get(walk.zero_term, -1), {place[k]: g for k, g in walk.later.items()})
            self._shared_walks.put(shape, hit, walk.inside.nbytes, _sizes(walk.later.values()))
        inside, zero_bits, zero, later = hit
        return _Walk(inside, terminals[zero] if zero >= 0 else -1, zero_bits, {terminals[j]: g for j, g in later.items()})

    def _walked_whole(self, q: int, ctx) -> _Walk:
        """The ``_Walk`` from lexer state q, from one pass over the trie through
        the lexer's automaton. Where most tokens' first bytes enter several
        terminals (a long string's chunk and tail), ``_combine`` would, on a
        first visit, pass over most of the vocabulary once per terminal for its
        exits, then once through the lexer for the tokens they share. (The
        groups are new ones, in token order: a terminal whose exits' group
        ``_combine`` would pass on whole does not pass on that group's id.)"""
        off, state = self._trie_pass(q, ctx.alive_lark, self.lexer.trans)
        inside = self._pack_bools(self.usable & (off < 0) & ctx.alive_valid[state])
        leaving = np.flatnonzero(self.usable & (off > 0))
        later = self._by_terminal(leaving, off[leaving], ctx.choice[state[leaving]])
        zero_term = int(ctx.choice[q])
        first_out = self.starting_with(~ctx.alive_lark[self.lexer.trans[q]])
        return _Walk(inside, zero_term, first_out if zero_term >= 0 else None, later)

    def _combine(self, q: int, ctx) -> _Walk:
        """The ``_Walk`` from a lexer state where several terminals are alive.
        A token whose first byte enters one of them only fares as in that one's
        exits (whitespace before a word), and a terminal whose first bytes all
        do so passes its group on whole, keeping its id. The tokens whose first
        byte enters several (a quote before an object's keys: a few hundred)
        are walked through the lexer where they are few (``_split``); where
        they are many (letters before keywords and names), they stay inside if
        they stay inside a valid terminal (``_not_outranked``), and those of
        the terminals' groups are walked to learn which terminal the lexer
        emits."""
        components = self.lexer.components[q]
        live, entered, _, own, shares, walked = self._split(q, ctx)
        inside, few_inside, kept, parts, mixed, outranking = [], [], [], [], [], []
        for i, k in enumerate(live):
            if walked is not None and own[i] is None:  # all its tokens were walked
                continue
            if not ctx.valid[k]:  # a token it emits adds nothing: one the lexer emits as a valid terminal completes
                # that one where it leaves, so it is in that one's group too
                if walked is None and shares[i] and ctx.outranked:
                    outranking.append(self.terminal(k).exits(int(components[k]), self)[0])
                continue
            stays, _, group, few = self.terminal(k).exits(int(components[k]), self)
            own_only = walked is not None and shares[i]  # its tokens on shared first bytes were walked
            if few is None:
                inside.append(stays & self.starting_with(own[i]) if own_only else stays)
            else:  # (a hundred names' few tokens: one union of ids costs less than a hundred of packed sets)
                few_inside.append(few[own[i][self._first_byte[few]]] if own_only else few)
            if not shares[i]:
                if len(group.tok):
                    kept.append((k, group))
                continue
            if not len(group.tok):
                continue
            if own[i] is None:
                mixed.append(group.tok)
                continue
            by_one = own[i][self._first_bytes(group)]  # tokens whose first byte enters this terminal only
            parts.append((group.tok[by_one], group.off[by_one], np.full(int(by_one.sum()), k)))
            if walked is None:
                mixed.append(group.tok[~by_one])
        inside = _union(inside, self._nothing)
        if few_inside:
            inside = inside | self._pack_ids(np.concatenate(few_inside))
        if walked is not None:
            ended, end_state, b_tok, b_off, b_state = walked
            inside = inside | self._pack_ids(ended[ctx.alive_valid[end_state]])
            parts.append((b_tok, b_off, ctx.choice[b_state]))
        else:
            stays = inside
            if outranking:
                inside = self._not_outranked(inside, outranking, q, ctx)
            mixed = _cat(mixed)
            if len(mixed):
                b_tok, b_off, b_state = self._leaving(self._ids(self._pack_ids(mixed) & ~stays), q, ctx.alive_lark)
                parts.append((b_tok, b_off, ctx.choice[b_state]))
        later = self._by_terminal(*(np.concatenate(column) for column in zip(*parts))) if parts else {}
        later.update(kept)  # (no token of the others is emitted as one of these: it dies at its first byte)
        zero_term = int(ctx.choice[q])
        return _Walk(inside, zero_term, self.starting_with(entered == 0) if zero_term >= 0 else None, later)

    def _split(self, q: int, ctx) -> _Split:
        """The ``_Split`` at lexer state q for ctx's acceptable terminals: the same
        for every context with those (an object's key positions differ in the
        names still valid only), so they share it, and its walk."""
        key = (q, ctx.acceptable.tobytes())
        hit = self._splits.get(key)
        if hit is None:
            lexer = self.lexer
            live = lexer.alive_accepted(q, ctx)
            entered, alone, any_alone, shares = split_bytes(lexer.trans[q], lexer.alive, np.array(live, dtype=np.int64))
            shared = entered > 1
            n_shared = int(self.first_byte_counts[shared].sum())
            walked = None
            if n_shared <= _FEW_SHARED:
                walked = self.walk(self._ids(self.starting_with(shared)), None, q, ctx.alive_lark)
            if len(self._splits) >= _WALK_CACHE:
                self._splits.clear()
            own = [row if some else None for row, some in zip(alone, any_alone.tolist())]
            hit = self._splits[key] = _Split(live, entered, n_shared, own, shares.tolist(), walked)
        return hit

    def _not_outranked(self, inside: np.ndarray, outranking: list, q: int, ctx) -> np.ndarray:
        """``inside`` (packed: the tokens staying inside a valid terminal) but
        those, among the ones that keep an invalid terminal alive too (in
        ``outranking``, packed), that end where an invalid terminal would be
        emitted and the lexeme cannot grow on (``ctx.alive_valid`` is false
        there, see Lexer.context: a declared name shadowing an undeclared key)."""
        suspects = inside & _union(outranking, self._nothing)
        if not suspects.any():
            return inside
        tok = self._ids(suspects)
        ended, end_state = self.walk(tok, None, q, ctx.alive_lark)[:2]
        dead = ended[~ctx.alive_valid[end_state]]
        return inside & ~self._pack_ids(dead) if len(dead) else inside

    def _first_bytes(self, group: _Group) -> np.ndarray:
        """Each token's first byte in ``group`` (kept on the group)."""
        if group.first_byte is None:
            group.first_byte = self._first_byte[group.tok]
        return group.first_byte

    def _follow(self, group: _Group, q: int, stack) -> list:
        """Arrays of the tokens of ``group`` whose bytes from their offset on are
        allowed from a fresh lexeme in state ``q`` with ``stack`` (None: rejected).
        The tokens are walked together through the lexeme (``_lexeme``), then
        grouped by the terminal emitted, lexeme after lexeme. The result is
        remembered under the top of the stack it read, as masks are: a token that
        closes many brackets reads deep, but the lexemes after it do not."""
        if stack is None:
            return []
        parser = self.parser
        ctx = self.language.context(stack)
        key = (group.id, self._canonical(q, ctx), ctx.key)
        hit = self._follows.get(key, stack)
        if hit is not None:
            parser.read(stack, hit[0])
            return hit[1]
        with parser.reading(stack) as depth:
            accepted, going_on = self._lexeme(key, group, q, ctx)
            found = [accepted]
            for term, next_group in going_on.items():
                found += self._follow(next_group, *self.language.after(stack, term))
            self._follows.put(key, stack, depth(), found)
        return found

    def _lexeme(self, key, group: _Group, q: int, ctx) -> tuple:
        """(the tokens of ``group`` that end inside the lexeme from ``q`` where a
        valid terminal of ``ctx`` can still complete, {terminal emitted: the
        ``_Group`` going on after it}). Remembered under ``key`` (the group, the
        lexeme's state and its context, which decide it), so a new stack or
        another path to the same situation only asks the parser again; and
        shared with the grammars with the same shape at q (``_lexer_shape``)."""
        node = self._nodes.get(key)
        if node is None:
            terminals, shape = self._lexer_shape(q, ctx)
            found = self._shared_walks.get((group.id, shape))
            if found is None:
                accepted, leaving = self._lexeme_walk(group, q, ctx)
                place = {k: j for j, k in enumerate(terminals)}
                found = (accepted, {place[k]: g for k, g in leaving.items()})
                self._shared_walks.put((group.id, shape), found, accepted.nbytes, _sizes(leaving.values()))
            node = (found[0], {terminals[j]: g for j, g in found[1].items()})
            if len(self._nodes) >= _NODE_CACHE:
                self._nodes.clear()
            self._nodes[key] = node
        return node

    def _lexeme_walk(self, group: _Group, q: int, ctx) -> tuple:
        """``_lexeme``'s answer, computed: a group that more than _WALKS_UNTRACED
        contexts meet is traced (``_Trace``) rather than walked again, where
        more than _FEW_ENTERING of its tokens enter the lexeme in this context;
        the first contexts just walk it (a trace costs a few walks, and most
        groups meet one or two), and so does every context that lets few of
        them in (a trace holds every token some terminal lets in: after a
        space, a string's body takes almost any of them, where a value's
        start takes a quote) or more than _MANY_ENTERING in."""
        tok, off = self._entering(group, q, ctx)
        times_walked = self._walked.get((group.id, q), 0)
        if _FEW_ENTERING < len(tok) <= _MANY_ENTERING and times_walked >= _WALKS_UNTRACED:  # trace it once for all
            accepted, b_tok, b_off, b_state = self._read(self._trace(group, q), ctx)
        else:
            if len(self._walked) >= _NODE_CACHE:
                self._walked.clear()
            self._walked[(group.id, q)] = times_walked + 1
            ended, end_state, b_tok, b_off, b_state = self.walk(tok, off, q, ctx.alive_lark)
            accepted = ended[ctx.alive_valid[end_state]]
        return accepted, self._by_terminal(b_tok, b_off, ctx.choice[b_state])

    def _entering(self, group: _Group, q: int, ctx=None):
        """(tokens, offsets) of the tokens of ``group`` that may get past the
        first lexeme from lexer state q, where a lexeme starts: those whose next
        byte some terminal lets in, and, where no terminal is complete after
        that byte, whose byte after it keeps one alive (``walks.entering_tokens``);
        with ``ctx``, only the terminals it accepts count, and only those it
        emits count as complete. The others (most: a group holds every token
        that goes on after a lexeme, and after " t" few go on as "true" does)
        die before any terminal completes (none matches the empty string:
        grammar.py refuses such terminals), so no walk need read them."""
        if group.next_bytes is None:
            group.next_bytes = next_two_bytes(self._data, self._starts, self.lengths, group.tok, group.off)
        lexer = self.lexer
        alive, completes = (lexer.live, lexer.completes) if ctx is None else (ctx.alive_lark, ctx.emits)
        kept = entering_tokens(*group.next_bytes, lexer.trans, alive, completes, q)
        return group.tok[kept], group.off[kept]

    def _trace(self, group: _Group, q: int) -> _Trace:
        """The ``_Trace`` of the tokens of ``group`` entering a lexeme at q
        (made once, kept while room)."""
        key = (group.id, q)
        hit = self._traces.get(key)
        if hit is None:
            tokens, offsets = self._entering(group, q)
            hit = _Trace(q, *trace_tokens(self._data, self._starts, self.lengths, self.lexer.trans, q, tokens, offsets))
            self._traces.put(key, hit, len(hit.tok) + len(hit.state))
        return hit

    def _read(self, trace: _Trace, ctx):
        """``ctx``'s walk of a trace's tokens: the tokens that end inside the lexeme
        where a valid terminal can still complete, then those that leave it (where
        ``ctx.alive_lark`` turns false): token, offset of the byte that does not
        fit, state before it (``walks.trace_read``)."""
        return trace_read(trace.parent, trace.state, trace.end, trace.depth, trace.tok, trace.off,
                          ctx.alive_lark, ctx.alive_valid, trace.q)

    def _leaving(self, tok, q: int, alive, trans=None):
        """``walk``'s tokens that leave the lexeme (token, offset of the byte
        that does not fit, state before it), for tokens read from their first
        byte. Past _TRIE_WALKED tokens, one pass over the trie says where every
        token leaves q (``walks.trie_exits``), reading shared prefixes once."""
        trans = self.lexer.trans if trans is None else trans
        if len(tok) <= _TRIE_WALKED:
            return self.walk(tok, None, q, alive, trans)[2:]
        off, before = self._trie_pass(q, alive, trans)
        tok = tok[off[tok] >= 0]
        return tok, off[tok], before[tok]

    def _trie_pass(self, q: int, alive, trans):
        """Per token, (the offset of the byte that leaves where ``alive`` turns
        false, -1 where none does; the state before it, or after the token where
        none does, -1 for a token without bytes), read from q in one pass over
        the trie (``walks.trie_exits``)."""
        trie = self.vocab.trie
        return trie_exits(trie.parent, trie.byte, trie.level_start, trie.token_node, trans, q, alive)

    def _by_terminal(self, tok, off, term) -> dict:
        """{terminal: _Group} for tokens leaving a lexeme emitted as ``term`` (-1: dropped)."""
        if not len(term):  # (a third of the time)
            return {}
        terms, bounds, tok, off = by_terminal(_int64(tok), _int64(off), _int64(term))
        bounds = bounds.tolist()
        return {t: _group(tok[a:b], off[a:b]) for t, a, b in zip(terms.tolist(), bounds, bounds[1:])}

    def walk(self, tok, off, q: int, alive, trans=None):
        """Walk tokens ``tok`` from byte ``off`` (None: their first) in state ``q``
        of ``trans`` (the lexer's by default) until each ends (-> ended tokens and
        their states) or leaves the lexeme, where ``alive`` turns false (-> token,
        offset of the byte that does not fit, state before it): see
        ``walks.token_walk``."""
        trans = self.lexer.trans if trans is None else trans
        off = np.zeros(len(tok), dtype=np.int64) if off is None else off
        return token_walk(self._data, self._starts, self.lengths, trans, alive, tok, off, q)


def _below_digest(dfa: DFA, s: int):
    """A digest of the automaton below state s of ``dfa`` (``walks.numbered_below``),
    or None where it has over _BELOW_STATES states. Two states with the same
    one, in any automata, let the same tokens through the same way: a string's
    body below an undeclared name's first byte is the body of every JSON string.
    Kept for every grammar of the process (a string's or a number's terminal
    is in most of them)."""
    key = (dfa.digest, s)
    found = _BELOW_DIGESTS.get(key, False)
    if found is False:
        if len(_BELOW_DIGESTS) >= _BELOW_DIGESTS_KEPT:
            _BELOW_DIGESTS.clear()
        order, table = numbered_below(np.ascontiguousarray(dfa.transitions, dtype=np.int32), s, _BELOW_STATES)
        found = _BELOW_DIGESTS[key] = (
            hashlib.sha256(table.tobytes() + dfa.accepting[order].tobytes()).digest() if len(order) else None)
    return found


def _sizes(groups) -> list:
    """(id, bytes) of each group, with what a group may cache later (per token
    7 bytes: its byte after next as int16, its place by its next byte as
    int32, its first byte; and where each next byte's places begin, 257
    int32): parts that the shared walks count once however many walks hold
    them (a name's or a string's exits are in most walks from a key's start)."""
    return [(g.id, g.tok.nbytes + g.off.nbytes + 7 * len(g.tok) + 257 * 4) for g in groups]


def _group(tok: np.ndarray, off: np.ndarray) -> _Group:
    """``tok`` and ``off`` as a ``_Group`` (int64, the type the compiled walks
    take), whose id is a digest of both (as narrow integers: hashing is most of
    the cost of a large group)."""
    digest = hashlib.sha256(str(len(tok)).encode())
    digest.update(tok.astype(np.int32))
    digest.update(off.astype(np.int32))
    return _Group(digest.digest(), _int64(tok), _int64(off))


def _int64(array: np.ndarray) -> np.ndarray:
    """``array`` as contiguous int64, the type the compiled loops take."""
    return np.ascontiguousarray(array, dtype=np.int64)


def _writable(array: np.ndarray) -> np.ndarray:
    """``array``, or a copy where it is read-only (shared masks are): the
    compiled loops take writable arrays only."""
    return array if array.flags.writeable else array.copy()


def _cat(parts) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def _union(packed: list, nothing: np.ndarray) -> np.ndarray:
    """The union of packed token sets (``nothing`` for none)."""
    if not packed:
        return nothing
    found = packed[0].copy()
    for other in packed[1:]:
        found |= other
    return found


def _build_vocabulary_tables(vocab: Vocabulary) -> None:
    """Build the vocabulary's tables that masks use (each once per process), so
    that the first index of a process pays for them rather than a mask step."""
    vocab.trie.subtrees, vocab.trie.tokens_by_node  # cached properties
    vocab.fingerprint  # names stored terminal tables
    _bytes_before_last(vocab)


_TOKEN_BYTES: "weakref.WeakKeyDictionary[Vocabulary, tuple]" = weakref.WeakKeyDictionary()


def _token_matrix(vocab: Vocabulary):
    """The vocabulary's bytes as a zero-padded (size, longest) uint8 matrix, and lengths."""
    hit = _TOKEN_BYTES.get(vocab)
    if hit is None:
        hit = _TOKEN_BYTES[vocab] = padded_bytes(vocab.tokens)
    return hit


_TOKEN_DATA: "weakref.WeakKeyDictionary[Vocabulary, tuple]" = weakref.WeakKeyDictionary()


def _token_data(vocab: Vocabulary):
    """The vocabulary's bytes one token after the other, and where each token starts."""
    hit = _TOKEN_DATA.get(vocab)
    if hit is None:
        lengths = _token_matrix(vocab)[1]
        hit = _TOKEN_DATA[vocab] = (np.frombuffer(b"".join(vocab.tokens), dtype=np.uint8).copy(),
                                    np.cumsum(lengths) - lengths)
    return hit


_USABLE: "weakref.WeakKeyDictionary[Vocabulary, np.ndarray]" = weakref.WeakKeyDictionary()


def _usable(vocab: Vocabulary) -> np.ndarray:
    """Per token, whether it has bytes and is not EOS (read-only)."""
    hit = _USABLE.get(vocab)
    if hit is None:
        hit = _USABLE[vocab] = _token_matrix(vocab)[1] > 0
        hit[sorted(vocab.eos_ids)] = False
        hit.flags.writeable = False
    return hit


_BY_FIRST: "weakref.WeakKeyDictionary[Vocabulary, tuple]" = weakref.WeakKeyDictionary()


def _by_first_byte(vocab: Vocabulary):
    """(257, words) packed: for each byte, the usable tokens (with bytes, not EOS)
    it starts, then all usable tokens; a cache for ``GrammarIndex.starting_with``
    and ``GrammarIndex._may_complete``; and the usable tokens as ids sorted by
    first byte, where each byte's begin, and how many each byte starts: the same
    for every grammar over this vocabulary."""
    hit = _BY_FIRST.get(vocab)
    if hit is None:
        matrix = _token_matrix(vocab)[0]
        usable = _usable(vocab)
        found = np.zeros((257, ((vocab.size + 31) // 32) * 32), dtype=bool)
        ids = np.flatnonzero(usable)
        first = matrix[ids, 0]
        found[first, ids] = True
        found[256, ids] = True
        counts = np.bincount(first, minlength=256)
        hit = _BY_FIRST[vocab] = (np.packbits(found, axis=1, bitorder="little").view(np.uint32), {},
                                  ids[np.argsort(first, kind="stable")], np.concatenate([[0], np.cumsum(counts)]),
                                  counts)
    return hit


_BEFORE_LAST: "weakref.WeakKeyDictionary[Vocabulary, np.ndarray]" = weakref.WeakKeyDictionary()


def _bytes_before_last(vocab: Vocabulary) -> np.ndarray:
    """(256, words) packed: for each byte, the tokens holding it before their last byte."""
    hit = _BEFORE_LAST.get(vocab)
    if hit is None:
        matrix, lengths = _token_matrix(vocab)
        found = np.zeros((256, ((vocab.size + 31) // 32) * 32), dtype=bool)
        for j in range(matrix.shape[1] - 1):
            rows = np.flatnonzero(lengths > j + 1)
            found[matrix[rows, j], rows] = True
        hit = _BEFORE_LAST[vocab] = np.packbits(found, axis=1, bitorder="little").view(np.uint32)
    return hit


_TERMINALS: "weakref.WeakKeyDictionary[Vocabulary, tuple]" = weakref.WeakKeyDictionary()
_SHARED: "weakref.WeakKeyDictionary[Vocabulary, Recent]" = weakref.WeakKeyDictionary()  # see GrammarIndex._lexer_shape
# Per vocabulary, by the automaton below a state (_below_digest): the state's exits (tokens that stay, group
# of those that leave), where they took a pass over the trie.
_BELOW: "weakref.WeakKeyDictionary[Vocabulary, Recent]" = weakref.WeakKeyDictionary()
_BELOW_DIGESTS: dict = {}  # (DFA digest, state): _below_digest


def _terminal_tokens(dfa: DFA, vocab: Vocabulary) -> "_TerminalTokens":
    """One terminal over a vocabulary, shared by every grammar with the same
    terminal (JSON strings, numbers, whitespace ...). Grammars that are gone
    keep theirs through their index; of the others, the most recently used
    are kept in three parts: those only one grammar has used so far; and of
    those several have, the ones walked a row per state (a long string's
    text, a format: milliseconds a state to walk again) and the others, so
    that the terminals many schemas share outlive the key sets and literals
    each schema brings, and the costly ones outlive the names and literals
    that a few schemas share."""
    new, shared, rowed = _TERMINALS.setdefault(vocab, (OrderedDict(), OrderedDict(), OrderedDict()))
    key = dfa.digest
    for pool in (rowed, shared):
        hit = pool.get(key)
        if hit is not None:
            pool.move_to_end(key)
            return hit
    hit = new.pop(key, None)
    if hit is None:
        hit, kept = _TerminalTokens(dfa, vocab, key), new
    else:
        kept = rowed if hit.table is None and not hit._narrow else shared
    kept[key] = hit
    while len(kept) > _TERMINALS_KEPT:
        kept.popitem(last=False)
    return hit


def _stored_table(dfa: DFA, vocab: Vocabulary, key: str):
    """A small terminal's token table (see ``_TerminalTokens``), kept on disk when
    it was slow to build: one of over 100,000 entries takes about 6 ms to build
    on 128k tokens, and 1 ms to load."""
    path = cache_dir() / "tables" / f"{vocab.fingerprint}-{key}.npz"
    try:
        with np.load(path) as data:
            found = data["table"], data["token_group"]
        os.utime(path)  # recently used: kept longest
        return found
    except (OSError, KeyError, ValueError):
        pass
    token_group, group_next = walk_trie(dfa, vocab.trie)
    table = np.full((dfa.n_states, group_next.shape[0] + 1), -1, dtype=group_next.dtype)
    table[:, :-1] = group_next.T
    if 100_000 < table.size <= 8_000_000:  # worth keeping, and at most 16 MB
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp.npz")
        np.savez(tmp, table=table, token_group=token_group)
        os.replace(tmp, path)
        _trim(path.parent, _TABLES_ON_DISK)
    return table, token_group


def _trim(directory, limit: int) -> None:
    """Delete the least recently used files of ``directory`` until it holds at most ``limit`` bytes."""
    files = []
    for entry in os.scandir(directory):
        if entry.name.endswith(".tmp.npz"):  # being written by another process
            continue
        try:
            stat = entry.stat()
        except OSError:  # deleted meanwhile by another process
            continue
        files.append((stat.st_mtime, stat.st_size, entry.path))
    total = sum(size for _, size, _ in files)
    for _, size, name in sorted(files):
        if total <= limit:
            break
        try:
            os.remove(name)
        except OSError:
            pass
        total -= size


def _whole_table_pays(dfa: DFA, vocab: Vocabulary, narrow: bool) -> bool:
    """Whether one trie walk over all states beats a row per state reached. The
    walk costs about (states x tokens alive); a DFA whose bytes spell most of
    the vocabulary (a string of at most n characters, a URL) keeps it alive in
    every state, and a generation reaches few of its states. One where every
    state lets in a few bytes gets rows too past a few states, and a literal or
    an enum (a finite language) always: each row walks only the few tokens
    alive from its state (``_TerminalTokens._narrow_walk``)."""
    small = dfa.n_states <= _SMALL_STATES
    if narrow and (not small or dfa.finite):  # (finiteness costs more than the rest: asked last)
        return False
    if small:
        return True
    if dfa.n_states > _WHOLE_TABLE_STATES:
        return False
    return dfa.n_states * _tokens_within((dfa.transitions >= 0).any(axis=0), vocab) <= _TABLE_PAIRS


def _narrow(dfa: DFA) -> bool:
    """Whether no state lets in more than _NARROW_BYTES bytes."""
    return dfa.widest <= _NARROW_BYTES


_WITHIN: "weakref.WeakKeyDictionary[Vocabulary, dict]" = weakref.WeakKeyDictionary()


def _tokens_within(alphabet: np.ndarray, vocab: Vocabulary) -> int:
    """How many tokens with bytes use only bytes of ``alphabet`` (256 bools):
    a pass over the trie with one state that the other bytes kill. Kept per
    alphabet, which many terminals share (every byte but a quote ...)."""
    counts = _WITHIN.setdefault(vocab, {})
    key = np.packbits(alphabet).tobytes()
    if key not in counts:
        trans = np.ones((2, 256), dtype=np.int32)  # state 1: dead
        trans[0, alphabet] = 0
        trie = vocab.trie
        counts[key] = int((trie_row(trie.parent, trie.byte, trie.token_node, trans, 0) >= 0).sum())
    return counts[key]


class _TerminalTokens:
    """How a terminal's DFA fares on every token: ``next_states(s)``, its
    state after each token from state s (-1 when it dies); and, per state, how
    the vocabulary leaves it (``exits``). A small DFA has one table for all its
    states (``table[s, group[t]]``, groups of tokens no state tells apart, built
    in one trie walk); a large one (a string of at most 64 characters has ~1,300
    states) gets a row per state on first use, since only the states a
    generation reaches are needed (``walks.trie_row``: one pass over the trie),
    or, for a state whose tokens mostly fare as from another (inside a key that
    a name may not be, as in the string's body), only the tokens whose first
    byte tells the two apart (``_donor``). A narrow one (no state lets in more
    than _NARROW_BYTES bytes: literals, enums) walks only the few tokens alive
    from each state it meets (``_narrow_walk``), and so does any one without a
    whole table from a state whose bytes start few tokens (_FEW_ALIVE)."""

    def __init__(self, dfa: DFA, vocab: Vocabulary, key: str):
        self.dfa, self.vocab = dfa, vocab
        n = dfa.n_states
        self._narrow = _narrow(dfa)
        whole = _whole_table_pays(dfa, vocab, self._narrow)
        self.table, self.group = _stored_table(dfa, vocab, key) if whole else (None, None)
        self.trans = np.empty((n + 1, 256), dtype=np.int32)  # the last row: the dead sink every byte leads to
        self.trans[:n] = dfa.transitions
        self.trans[self.trans < 0] = n
        self.trans[n] = n
        self.alive = np.arange(n + 1) < n
        self.accepting = np.zeros(n + 1, dtype=bool)
        self.accepting[:n] = dfa.accepting
        self._exits: OrderedDict = OrderedDict()

    @functools.cached_property
    def entry(self) -> np.ndarray:
        """The bytes that enter a complete state (literals and enums never ask)."""
        return self.accepting[self.trans[:-1]].any(axis=0)

    def next_states(self, s: int) -> np.ndarray:
        """Per token, the state after it from s (-1: dead)."""
        if self.table is not None:
            return np.take(self.table[s], self.group)
        trie = self.vocab.trie
        return trie_row(trie.parent, trie.byte, trie.token_node, self.trans, s)

    def _narrow_walk(self, s: int):
        """The trie walked from s below the nodes where the DFA lives only: (the
        tokens alive from s, ascending; the tokens that complete it and go on,
        with the offset of the byte that does not fit), by ``walks.narrow_walk``."""
        trie = self.vocab.trie
        spelled, spelled_start = trie.tokens_by_node
        below, below_first, below_end = trie.subtrees
        return narrow_walk(trie.child_start, trie.byte, int(trie.level_start[0]), int(trie.level_start[1]), self.trans,
                           s, self.alive, self.accepting, spelled, spelled_start, below, below_first, below_end)

    def exits(self, s: int, index: "GrammarIndex"):
        """How the usable tokens fare from state s: (packed tokens that keep it
        alive, packed tokens whose first byte kills it, the ``_Group`` of the
        tokens that complete it and leave it later, with the offset of the byte
        that starts the next lexeme, and the tokens that keep it alive as ids
        where they were walked below the trie's live nodes, being few (a
        literal's, an enum's, a state's that lets in rare bytes); else None)."""
        hit = self._exits.get(s)
        if hit is not None:
            self._exits.move_to_end(s)
            return hit
        alive_bytes = self.trans[s] < self.dfa.n_states
        few = None
        if self.table is None and (self._narrow or index.first_byte_counts[alive_bytes].sum() <= _FEW_ALIVE):
            few, left = self._exits_narrow(s, index)
            stays = index._pack_ids(few)
        elif (donor := self._donor(s, index)) is not None:
            stays, left = self._exits_like(s, donor, index)
        else:
            stays, left = self._exits_walked(s, alive_bytes, index)
        hit = self._exits[s] = (stays, index.starting_with(~alive_bytes), left, few)
        if len(self._exits) > _EXITS_KEPT:
            self._exits.popitem(last=False)
        return hit

    def _exits_narrow(self, s: int, index: "GrammarIndex"):
        """(the tokens that keep s alive, ascending, the ``_Group`` of those that
        complete it and go on) where few tokens live: one walk of them says it all."""
        tokens, b_tok, b_off = self._narrow_walk(s)
        usable = index.usable[b_tok]  # in the walk's order: the same every time, so the group's id is too
        return tokens[index.usable[tokens]], _group(b_tok[usable], b_off[usable])

    def _exits_walked(self, s: int, alive_bytes: np.ndarray, index: "GrammarIndex"):
        """(packed tokens that keep s alive, the ``_Group`` of those that complete
        it and go on) from s's row and a walk of the tokens that die in it; or,
        where another state in any terminal has the same automaton below it,
        that state's (by ``_below_digest``)."""
        key = _below_digest(self.dfa, s)
        found = index.shared_below.get(key) if key is not None else None
        if found is not None:
            return found
        entering = index.starting_with(alive_bytes)
        stays = entering & index._pack_bools(self.next_states(s) >= 0)
        dying = index._ids(entering & ~stays & index._may_complete(self.entry))  # the others die incomplete
        b_tok, b_off, b_state = index._leaving(dying, s, self.alive, self.trans)
        complete = self.accepting[b_state]
        found = stays, _group(b_tok[complete], b_off[complete])
        if key is not None:
            index.shared_below.put(key, found, 1)
        return found

    def _donor(self, s: int, index: "GrammarIndex"):
        """A state whose exits give most of s's, or None: after a token's first
        byte, the rest of the token reads the same from the same state, so
        wherever s and the donor go to the same state on a first byte, their
        tokens starting with it fare alike. The donor is a recent state, or the
        state most tokens enter from s by their first byte where that state does
        the same from itself (a string's body, past the keys a name may not be),
        and serves where the tokens left to walk are under a quarter of those
        alive from s. Counted strings find none: each byte moves the count."""
        if self.table is not None:
            return None
        trans, dead, weights = self.trans, self.dfa.n_states, index.first_byte_counts
        alive = trans[s] < dead
        most = int(np.argmax(np.bincount(trans[s][alive], weights=weights[alive], minlength=dead + 1)))
        candidates = list(itertools.islice(reversed(self._exits), _DONORS_TRIED))
        if most not in self._exits:
            own = trans[most] < dead
            if int(np.argmax(np.bincount(trans[most][own], weights=weights[own], minlength=dead + 1))) == most:
                candidates.append(most)
        candidates = [h for h in candidates if h != s]
        if not candidates:
            return None
        cost = ((trans[candidates] != trans[s]) & alive) @ weights
        best = int(np.argmin(cost))
        return candidates[best] if cost[best] * 4 < weights[alive].sum() else None

    def _exits_like(self, s: int, donor: int, index: "GrammarIndex"):
        """(packed tokens that keep s alive, the ``_Group`` of those that complete
        it and go on) from the donor's exits: tokens whose first byte takes both
        to the same state are read off the donor's, the others walked
        (``walks.exits_like``)."""
        d_stays, _, d_left, _ = self.exits(donor, index)
        stays, tok, off = exits_like(
            index._data, index._starts, index.lengths, index._by_first_ids, index._first_starts, self.trans,
            self.alive, self.accepting, s, donor, _writable(d_stays), d_left.tok, d_left.off)
        return stays, _group(tok, off)
