"""A grammar over one vocabulary: which tokens are allowed in a (lexer state,
parser stack) situation, as packed masks.

For a lexer state and a context (acceptable and valid terminals), every token
that stays inside the lexeme is settled by the terminals' own token tables
(index.py's trie walk, per terminal, shared by every grammar using the same
terminal); the others are sorted by where they leave the lexeme and as which
terminal. That is cached per (lexer state as the context sees it, context),
whatever the stack; inside most lexemes one terminal is left and the work is
shared across contexts and grammars (``_TerminalTokens.walk``). Tokens that
leave the lexeme are then followed from the parser stack, lexeme after lexeme,
grouped by the terminal emitted; each such walk is remembered under its path of
lexer states and contexts. A whole mask is remembered under the top states of
the stack it read (lalr.SuffixMemo), so the same situation at another nesting
depth costs a dictionary lookup.
"""

import hashlib
import os
import weakref
from collections import OrderedDict

import numpy as np

from .dfa import DFA
from .index import walk_trie
from .lalr import SuffixMemo
from .models import cache_dir
from .vocab import Vocabulary, padded_bytes

_MASK_CACHE = 50_000  # masks kept per grammar and vocabulary, keyed by stack suffix (equal masks share one array)
_WALK_CACHE = 2_000  # token walks from a lexer state kept per grammar and vocabulary
_NODE_CACHE = 50_000  # walks of tokens that crossed into a new lexeme, kept likewise
_TERMINALS_KEPT = 64  # terminals' token tables shared across grammars, per vocabulary (the most recent)


class _Walk:
    """How every token fares from one lexer state in one context, before the
    parser is asked anything: ``inside`` (packed) the tokens that stay inside the
    lexeme and end where a valid terminal can still complete; ``zero_bits``
    (packed) those whose first byte already starts a new lexeme, after the current
    one is emitted as ``zero_term``; ``later``: per terminal emitted, the tokens
    that leave the lexeme after one byte or more, with the offset of the byte that
    starts the next lexeme."""

    __slots__ = ("inside", "zero_term", "zero_bits", "later")

    def __init__(self, inside, zero_term, zero_bits, later):
        self.inside, self.zero_term, self.zero_bits, self.later = inside, zero_term, zero_bits, later


class GrammarIndex:
    """A grammar over one vocabulary: token masks per (lexer state, parser stack),
    remembered under the top of the stack that decided them."""

    def __init__(self, language, vocab: Vocabulary):
        self.language = language
        self.lexer = language.lexer
        self.parser = language.parser
        self.vocab = vocab
        self.bytes, self.lengths = _token_matrix(vocab)
        self.eos = np.array(sorted(vocab.eos_ids), dtype=np.int64)
        usable = self.lengths > 0
        usable[self.eos] = False
        self._usable = np.flatnonzero(usable)
        self._first_byte = self.bytes[self._usable, 0]
        # Where each token leads from a lexer state while some terminal stays alive:
        # combined, per state on first use, from each terminal's own token table.
        self._terminals = [_terminal_tokens(dfa, vocab) for dfa in self.lexer.dfas]
        self._rows: dict = {}
        self.words = (vocab.size + 31) // 32
        self._walks: dict = {}
        self._nodes: dict = {}
        self._completing: dict = {}
        self._singles: dict = {}
        self._nothing = np.zeros(self.words, dtype=np.uint32)
        self._canon: dict = {}
        self._canon_ids: dict = {}
        self._masks = SuffixMemo(_MASK_CACHE)
        self._distinct: dict = {}
        self.bias_cache: OrderedDict = OrderedDict()
        self._eos_only = self._pack_ids(self.eos)

    def _row(self, q: int) -> np.ndarray:
        """For every token, the lexer state after its bytes from ``q`` while some
        terminal stays alive, else the dead sentinel (cached per state)."""
        row = self._rows.get(q)
        if row is not None:
            return row
        lexer = self.lexer
        n = lexer.n_states
        alive = np.flatnonzero(lexer.components[q] >= 0)
        if len(alive) == 1:  # inside most lexemes one terminal is left: one lookup per token
            k = int(alive[0])
            table, group = self._terminals[k].table, self._terminals[k].group
            row = self._single(k)[table[lexer.components[q, k], group]]
            row[self.eos] = n
            self._rows[q] = row
            return row
        # Each live terminal's state after each token, then one product state per distinct combination.
        ends = [self._terminals[k].table[lexer.components[q, k], self._terminals[k].group] for k in alive]
        code = np.zeros(self.vocab.size, dtype=np.int64)
        for end, k in zip(ends, alive):  # one code per distinct combination of the live terminals' states
            size = self._terminals[k].table.shape[0] + 1
            if int(code.max()) >= 2**62 // size:
                code = np.unique(code, return_inverse=True)[1].ravel().astype(np.int64)
            code = code * size + (end + 1)
        _, first, inverse = np.unique(code, return_index=True, return_inverse=True)
        state = np.full(lexer.components.shape[1], -1, dtype=np.int64)
        target = np.empty(len(first), dtype=np.int32)
        for i, t in enumerate(first.tolist()):
            state[alive] = [int(end[t]) for end in ends]
            target[i] = lexer.state_of.get(tuple(state.tolist()), n)
        row = target[inverse.ravel()].astype(np.int16 if n < 32767 else np.int32)
        row[self.eos] = n
        self._rows[q] = row
        return row

    def _single(self, k: int) -> np.ndarray:
        """Lexer states where terminal ``k`` alone is alive, by its DFA state (last
        entry, for -1: the dead sentinel)."""
        hit = self._singles.get(k)
        if hit is None:
            lexer = self.lexer
            hit = np.full(lexer.dfas[k].n_states + 1, lexer.n_states, dtype=np.int16 if lexer.n_states < 32767 else np.int32)
            state = [-1] * lexer.components.shape[1]
            for s in range(lexer.dfas[k].n_states):
                state[k] = s
                hit[s] = lexer.state_of.get(tuple(state), lexer.n_states)
            self._singles[k] = hit
        return hit

    def _may_complete(self, entry: np.ndarray) -> np.ndarray:
        """Per token, whether a byte before its last is one of ``entry`` (the bytes
        that enter a complete state): only such tokens can end a lexeme and go on."""
        key = entry.tobytes()
        hit = self._completing.get(key)
        if hit is None:
            words = np.bitwise_or.reduce(_bytes_before_last(self.vocab)[entry], axis=0)
            hit = self._completing[key] = np.unpackbits(words.view(np.uint8), bitorder="little")[: self.vocab.size].view(bool)
        return hit

    def _pack_ids(self, ids) -> np.ndarray:
        """Packed words with the bits of ``ids`` set."""
        allowed = np.zeros(self.words * 32, dtype=bool)
        allowed[ids] = True
        packed = np.packbits(allowed, bitorder="little").view(np.uint32)
        return packed

    def finished_mask(self) -> np.ndarray:
        return self._eos_only

    def step(self, q: int, stack: tuple, token: int):
        """(lexer state, stack) after ``token`` (not EOS), or None where it is not allowed."""
        data = self.vocab.tokens[token]
        if not data:
            return None
        row = self._rows.get(q)
        if row is not None:
            ctx = self.language.context(stack)[0]
            end = row[token]
            if ctx.alive_lark[end]:  # the token stays inside the lexeme: one lookup
                return (int(end), stack) if ctx.alive_valid[end] else None
        return self.language.step(q, stack, data)

    def mask(self, q: int, stack: tuple) -> np.ndarray:
        parser = self.parser
        ctx = self.language.context(stack)[0]
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
            seen = (q in lexer.starts, tuple(np.where(ctx.acceptable, lexer.components[q], -1).tolist()))
            hit = self._canon[key] = self._canon_ids.setdefault(seen, len(self._canon_ids))
        return hit

    def _shared(self, packed: np.ndarray) -> np.ndarray:
        """The one stored copy of a mask equal to ``packed`` (most stacks share a few masks)."""
        if len(self._distinct) >= _MASK_CACHE:
            self._distinct.clear()
        same = self._distinct.setdefault(hash(packed.tobytes()), packed)
        return same if same is packed or np.array_equal(same, packed) else packed

    def _mask(self, q: int, stack: tuple, ctx, seen: int) -> np.ndarray:
        language = self.language
        walk = self._walk_from(q, ctx, seen)
        words = walk.inside.copy()
        if walk.zero_term >= 0:
            words |= self.mask(*language.after(stack, walk.zero_term)) & walk.zero_bits
        found = []
        for term, (tok, off) in walk.later.items():
            found += self._follow((seen, ctx.key, term), tok, off, *language.after(stack, term))
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
        live = np.flatnonzero((self.lexer.components[q] >= 0) & ctx.acceptable)
        if len(live) == 1:  # inside most lexemes: one terminal, whatever the grammar around it
            k = int(live[0])
            stay, first_out, tok, off = self._terminals[k].walk(int(self.lexer.components[q, k]), self)
            if ctx.alive_valid[q]:  # k is valid here
                result = _Walk(stay, int(ctx.choice[q]), first_out, {k: (tok, off)} if len(tok) else {})
            else:
                result = _Walk(self._nothing, -1, None, {})
        else:
            result = self._walk_product(q, ctx)
        if len(self._walks) >= _WALK_CACHE:
            self._walks.clear()
        self._walks[key] = result
        return result

    def _walk_product(self, q: int, ctx) -> _Walk:
        """The ``_Walk`` from a lexer state where several terminals are alive."""
        usable = self._usable
        inside = np.zeros(self.vocab.size, dtype=bool)
        # Tokens whose first byte does not fit the lexeme leave it at once.
        first_out = ~ctx.alive_lark[self.lexer.trans[q]][self._first_byte]
        end = self._row(q)[usable]
        stays = ctx.alive_lark[end]  # the whole token stays inside the lexeme
        inside[usable[stays & ctx.alive_valid[end]]] = True
        # These leave the lexeme after a byte or more, or die. Leaving needs a complete
        # lexeme, entered by a byte before the token's last: the others die.
        entry = np.zeros(256, dtype=bool)
        for k in np.flatnonzero(self.lexer.components[q] >= 0).tolist():
            entry |= self._terminals[k].entry
        may_leave = self._may_complete(entry)[usable]
        tok = usable[~stays & ~first_out & may_leave]
        ended, end_state, b_tok, b_off, b_state = self._walk(tok, np.zeros(len(tok), dtype=np.int64), q, ctx.alive_lark)
        inside[ended[ctx.alive_valid[end_state]]] = True
        zero_term = int(ctx.choice[q])
        zero_bits = self._pack_ids(usable[first_out]) if zero_term >= 0 else None
        later = _by_terminal(b_tok, b_off, ctx.choice[b_state])
        return _Walk(self._pack_bool(inside), zero_term, zero_bits, later)

    def _pack_bool(self, allowed: np.ndarray) -> np.ndarray:
        words = np.zeros(self.words * 4, dtype=np.uint8)
        bits = np.packbits(allowed, bitorder="little")
        words[: len(bits)] = bits
        return words.view(np.uint32)

    def _follow(self, path: tuple, tok, off, q: int, stack) -> list:
        """Arrays of the tokens among ``tok`` whose bytes from ``off`` on are allowed
        from a fresh lexeme in state ``q`` with ``stack`` (None: rejected). The
        tokens are walked together through the lexeme, then grouped by the terminal
        emitted, lexeme after lexeme. Each walk is remembered under its path of
        lexer states and contexts (which decides ``tok``), so a new stack in a known
        situation only asks the parser again."""
        if stack is None:
            return []
        ctx = self.language.context(stack)[0]
        key = (path, self._canonical(q, ctx), ctx.key)
        node = self._nodes.get(key)
        if node is None:
            ended, end_state, b_tok, b_off, b_state = self._walk(tok, off, q, ctx.alive_lark)
            node = (ended[ctx.alive_valid[end_state]], _by_terminal(b_tok, b_off, ctx.choice[b_state]))
            if len(self._nodes) >= _NODE_CACHE:
                self._nodes.clear()
            self._nodes[key] = node
        found = [node[0]]
        for term, (tok2, off2) in node[1].items():
            found += self._follow((key, term), tok2, off2, *self.language.after(stack, term))
        return found

    def _walk(self, tok, off, q: int, alive, trans=None):
        """Walk tokens ``tok`` from byte ``off`` in state ``q`` of ``trans`` (the
        lexer's by default) until each ends (-> ended tokens and their states) or
        leaves the lexeme, where ``alive`` turns false (-> token, offset of the byte
        that does not fit, state before it)."""
        trans = self.lexer.trans if trans is None else trans
        lengths, matrix = self.lengths, self.bytes
        state = np.full(tok.shape, q, dtype=np.int64)
        pos = off.copy()
        ended, end_state, b_tok, b_off, b_p = [], [], [], [], []
        while len(tok):
            done = pos >= lengths[tok]
            if done.any():
                ended.append(tok[done])
                end_state.append(state[done])
                keep = ~done
                tok, pos, state = tok[keep], pos[keep], state[keep]
                if not len(tok):
                    break
            nxt = trans[state, matrix[tok, pos]]
            out = ~alive[nxt]
            if out.any():
                b_tok.append(tok[out])
                b_off.append(pos[out])
                b_p.append(state[out])
                keep = ~out
                tok, pos, nxt = tok[keep], pos[keep], nxt[keep]
            state = nxt.astype(np.int64)
            pos = pos + 1
        return _cat(ended), _cat(end_state), _cat(b_tok), _cat(b_off), _cat(b_p)


def _by_terminal(tok, off, term) -> dict:
    """{terminal: (tokens, offsets)} for tokens leaving a lexeme emitted as ``term`` (-1: dropped)."""
    return {t: (tok[term == t], off[term == t]) for t in np.unique(term[term >= 0]).tolist()}


def _cat(parts) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


_TOKEN_BYTES: "weakref.WeakKeyDictionary[Vocabulary, tuple]" = weakref.WeakKeyDictionary()


def _token_matrix(vocab: Vocabulary):
    """The vocabulary's bytes as a zero-padded (size, longest) uint8 matrix, and lengths."""
    hit = _TOKEN_BYTES.get(vocab)
    if hit is None:
        hit = _TOKEN_BYTES[vocab] = padded_bytes(vocab.tokens)
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


_TERMINALS: "weakref.WeakKeyDictionary[Vocabulary, dict]" = weakref.WeakKeyDictionary()


def _terminal_tokens(dfa: DFA, vocab: Vocabulary) -> "_TerminalTokens":
    """One terminal over a vocabulary, shared by every grammar with the same
    terminal (JSON strings, numbers, whitespace ...)."""
    per_vocab = _TERMINALS.setdefault(vocab, OrderedDict())
    key = hashlib.sha256(dfa.transitions.tobytes() + dfa.accepting.tobytes()).hexdigest()[:32]
    hit = per_vocab.get(key)
    if hit is None:
        hit = per_vocab[key] = _TerminalTokens(dfa, vocab, *_stored_table(dfa, vocab, key))
        if len(per_vocab) > _TERMINALS_KEPT:  # grammars that are gone keep theirs through their index
            per_vocab.popitem(last=False)
    else:
        per_vocab.move_to_end(key)
    return hit


def _stored_table(dfa: DFA, vocab: Vocabulary, key: str):
    """A terminal's token table (see ``_TerminalTokens``), kept on disk when it was
    slow to build (a JSON string's takes ~0.15 s on 128k tokens; a keyword's,
    milliseconds)."""
    path = cache_dir() / "tables" / f"{vocab.fingerprint}-{key}.npz"
    try:
        with np.load(path) as data:
            return data["table"], data["token_group"]
    except (OSError, KeyError, ValueError):
        pass
    token_group, group_next = walk_trie(dfa, vocab.trie)
    table = np.full((dfa.n_states, group_next.shape[0] + 1), -1, dtype=group_next.dtype)
    table[:, :-1] = group_next.T
    if table.size > 100_000:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp.npz")
        np.savez(tmp, table=table, token_group=token_group)
        os.replace(tmp, path)
    return table, token_group


class _TerminalTokens:
    """A terminal's token table: ``table[s, group[t]]`` is its state after token t
    from state s, -1 when it dies (also in the last column, for tokens dead
    everywhere); and, per state, how the vocabulary fares when this terminal is
    the only one left in the lexeme (``walk``)."""

    def __init__(self, dfa: DFA, vocab: Vocabulary, table: np.ndarray, group: np.ndarray):
        self.dfa, self.table, self.group = dfa, table, group
        n = dfa.n_states
        self.trans = np.vstack([np.where(dfa.transitions < 0, n, dfa.transitions), np.full((1, 256), n)]).astype(np.int32)
        self.alive = np.append(np.ones(n, dtype=bool), False)
        accepting = np.append(dfa.accepting, False)
        self.accepting = accepting
        self.entry = accepting[self.trans[:n]].any(axis=0)  # bytes that enter a complete state
        self._walks: dict = {}

    def walk(self, s: int, index: "GrammarIndex"):
        """From state s: (packed tokens staying alive, packed tokens whose first byte
        kills it, and the tokens that complete it and leave it later with the
        offset of the byte that starts the next lexeme)."""
        hit = self._walks.get(s)
        if hit is None:
            usable = index._usable
            stays = self.table[s, self.group[usable]] >= 0
            first_out = ~self.alive[self.trans[s]][index._first_byte]
            tok = usable[~stays & ~first_out & index._may_complete(self.entry)[usable]]
            _, _, b_tok, b_off, b_state = index._walk(tok, np.zeros(len(tok), dtype=np.int64), s, self.alive, self.trans)
            complete = self.accepting[b_state]
            hit = self._walks[s] = (index._pack_ids(usable[stays]), index._pack_ids(usable[first_out]),
                                    b_tok[complete], b_off[complete])
        return hit
