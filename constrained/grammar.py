"""Lark grammars as constraints: ``grammar(text_or_path, start="start")``.

Lark reads the grammar and builds its LALR(1) parse table; this module drives
that table itself, on terminal names only, and lexes byte by byte the way lark's
contextual lexer does:

* In a parser state, the *acceptable* terminals A are those with an action in
  the state's row of the parse table, plus the ``%ignore`` terminals (exactly
  the terminals lark's contextual lexer tries there).
* A lexeme grows greedily: the next byte extends it if some terminal of A can
  still complete after it. Otherwise the lexeme so far must be complete for a
  terminal of A, which is emitted (ties: higher priority first, then a string
  literal before a regex, which is what lark's "unless" rule does for keywords
  that a NAME-like regex also matches, then lark's own terminal order) and the
  byte starts the next lexeme, in the parser state after that terminal (ignored
  terminals leave the parser alone). No backtracking: a byte that fits nowhere
  is not allowed.
* A terminal is only *valid* if the parser really shifts it after its
  reductions (LALR may reduce before it notices an error); lexemes may only
  grow towards valid terminals, so there are no dead ends.
* EOS is allowed when the lexeme is empty or complete (it is emitted first) and
  the parser then accepts the end of input.
* Whitespace is bounded: an ``%ignore`` terminal matches at most
  ``max_ignored`` bytes, and two ignored lexemes never follow each other, so a
  generation cannot loop on whitespace forever.

Where lark's own lexer would split text differently from this longest match
(it takes the first terminal in its order that matches any prefix), the
grammar is refused at compile time with an example.

Grammars may also bring terminals as byte DFAs (``terminals=``, for
``%declare``'d names): that is how JSON Schemas compile. Lark cannot lex those,
so only the rules above apply.

How masks are computed (lexer.py holds the automaton, lalr.py the parser): for
a lexer state and a context (acceptable and valid terminals), index.py's trie
walk settles every token that stays inside the lexeme, and sorts the others by
where they leave it and as which terminal; that is cached per (lexer state,
context), whatever the stack. Tokens that leave the lexeme are then followed
from the parser stack, vectorised over tokens and over the stacks they reach,
keeping only those whose next byte can start a lexeme there. A whole mask is
remembered under the top states of the stack it read (lalr.SuffixMemo), so
the same situation at another nesting depth costs a dictionary lookup.
"""

import weakref
from collections import OrderedDict
from pathlib import Path

import numpy as np

from .constraint import Compiled
from .dfa import DFA, from_regex, gc_paused
from .errors import ConstrainedError
from .index import walk_trie
from .lalr import END, ParseTable, SuffixMemo
from .lexer import Lexer, bounded
from .matcher import TokenHistory
from .vocab import Vocabulary, padded_bytes

MAX_IGNORED = 48  # bytes an %ignore'd lexeme (whitespace, a comment) may span
_MASK_CACHE = 50_000  # packed masks kept per grammar and vocabulary (16 KB each on 128k tokens)
_WALK_CACHE = 2_000  # token walks kept per grammar and vocabulary
_CONTEXT_CACHE = 100_000  # parser stacks kept per grammar


def grammar(
    text_or_path, start: str = "start", max_ignored: int = MAX_IGNORED, terminals: dict | None = None,
    strict: bool = False,
) -> "Grammar":
    """Output that lark parses with the grammar ``text_or_path`` (grammar text, or
    the path of a ``.lark`` file), from the rule ``start``.

    The grammar must be LALR(1) (lark's ``parser="lalr"``); shift/reduce conflicts
    are resolved as shifts, as lark does, or refused with ``strict=True``.
    ``%ignore``'d lexemes span at most ``max_ignored`` bytes, one between two
    terminals. ``terminals`` maps names the grammar ``%declare``s to byte DFAs
    (``constrained.dfa.DFA``) that define them; such a grammar is lexed by the
    rules above only (lark itself cannot lex it)."""
    text, import_paths, source = _read(text_or_path)
    if not isinstance(max_ignored, int) or max_ignored < 1:
        raise ConstrainedError(f"max_ignored is a positive number of bytes, got {max_ignored!r}")
    terminals = dict(terminals or {})
    for name, dfa in terminals.items():
        if not isinstance(dfa, DFA):
            raise ConstrainedError(f"terminal {name!r} must be given as a constrained.dfa.DFA, got {type(dfa).__name__}")
    lk = _lark(text, start, import_paths, strict)
    unknown = sorted(set(terminals) - _declared(lk))
    if unknown:
        raise ConstrainedError(f"terminals {unknown} are given as DFAs but the grammar does not %declare and use them")
    language = _compile(lk, start, max_ignored, terminals)
    return Grammar(lk, language, f"grammar from {source} (start={start!r})", lark_lexes=not terminals)


def _declared(lk) -> set:
    """Terminal names the grammar uses without a pattern (%declare)."""
    defined = {t.name for t in lk.terminals}
    table = lk.parser.parser.parser.parse_table
    rules = {rule.origin.name for rule in lk.rules}
    return {name for row in table.states.values() for name in row if name not in rules and name not in defined}


def _read(text_or_path):
    if isinstance(text_or_path, Path) or (
        isinstance(text_or_path, str) and "\n" not in text_or_path and text_or_path.endswith(".lark")
    ):
        path = Path(text_or_path)
        if not path.is_file():
            raise ConstrainedError(f"grammar file {str(path)!r} does not exist")
        return path.read_text(), [str(path.parent)], str(path)
    if not isinstance(text_or_path, str):
        raise ConstrainedError(f"a grammar is lark grammar text (str) or a path, got {type(text_or_path).__name__}")
    return text_or_path, [], "grammar text"


def _lark(text: str, start: str, import_paths, strict: bool = False):
    import lark
    from lark.exceptions import GrammarError, LarkError

    if not isinstance(start, str):
        raise ConstrainedError(f"start is the name of a rule, got {start!r}")
    try:
        return lark.Lark(text, parser="lalr", lexer="contextual", start=start, import_paths=import_paths, strict=strict)
    except GrammarError as e:
        message = str(e).strip()
        if "Shift/Reduce conflict" in message:
            raise ConstrainedError(
                f"the grammar is not LALR(1) (strict mode): a shift/reduce conflict. {message}"
            ) from None
        if "Reduce/Reduce collision" in message:
            raise ConstrainedError(
                f"the grammar is not LALR(1): a reduce/reduce conflict. {message}\n"
                "Both rules can end at the same place with the same next terminal: merge them or make them differ"
            ) from None
        if "Using an undefined rule" in message and start in message:
            raise ConstrainedError(f"invalid grammar: the start rule {start!r} is not defined (pass start=)") from None
        raise ConstrainedError(f"invalid grammar: {message}") from None
    except FileNotFoundError as e:
        raise ConstrainedError(
            f"invalid grammar: an %import names a grammar that does not exist ({e.filename}). "
            "lark's own terminals are imported as `%import common.NAME`; other grammars are looked up "
            "next to the grammar file"
        ) from None
    except LarkError as e:
        raise ConstrainedError(f"invalid grammar: {str(e).strip()}") from None
    except (ValueError, TypeError, KeyError, AssertionError) as e:  # lark's own checks on odd input
        raise ConstrainedError(f"invalid grammar: {type(e).__name__}: {e}") from None


def _compile(lk, start: str, max_ignored: int, terminals: dict) -> "_Language":
    """The lexer and parse table of a loaded lark grammar."""
    defs = {t.name: t for t in lk.terminals}
    ignored_names = set(lk.ignore_tokens)
    rules = {rule.origin.name for rule in lk.rules}
    table = lk.parser.parser.parser.parse_table
    used = set(ignored_names)
    for row in table.states.values():
        used.update(name for name in row if name not in rules and name != "$END")
    missing = sorted(used - defs.keys() - terminals.keys())
    if missing:
        raise ConstrainedError(
            f"terminals {missing} have no pattern (%declare'd for a postlexer such as an Indenter), "
            "which grammar() does not support: define them with a string or a regex, or pass their DFAs "
            "as terminals="
        )
    _check_productive(lk, start)

    def order(name):  # lark's lexer order: priority, longest possible match, pattern length, name
        if name in terminals:
            return (0, 0, 0, name)
        d = defs[name]
        return (-d.priority, -d.pattern.max_width, -len(d.pattern.value), name)

    names = sorted(used, key=order)
    priority = np.array([0 if n in terminals else defs[n].priority for n in names])
    is_str = np.array([n not in terminals and type(defs[n].pattern).__name__ == "PatternStr" for n in names])
    ignored = np.array([n in ignored_names for n in names], dtype=bool)
    choice_order = np.array(sorted(range(len(names)), key=lambda k: (-priority[k], not is_str[k], k)), dtype=np.int64)
    dfas = []
    with gc_paused():
        for name in names:
            dfa = terminals[name] if name in terminals else _terminal_dfa(name, defs[name].pattern)
            dfas.append(bounded(dfa, max_ignored) if name in ignored_names else dfa)
        lexer = Lexer(dfas, ignored, choice_order)
    parser = ParseTable(lk, start, {name: k for k, name in enumerate(names)})
    language = _Language(names, lexer, parser)
    if not terminals:  # with DFA terminals lark cannot lex the grammar, so there is nothing to agree with
        lexer.check_lark_agrees(set(language.acceptable.values()), names, is_str, priority)
    return language


def _terminal_dfa(name: str, pattern) -> DFA:
    try:
        return from_regex(pattern.to_regexp())
    except ConstrainedError as e:
        hint = ""
        if name == "ESCAPED_STRING":
            hint = ("; lark's common.ESCAPED_STRING uses a lookbehind: define the string without it, "
                    'e.g. STRING: /"([^"\\\\]|\\\\.)*"/')
        raise ConstrainedError(f"terminal {name} ({pattern}) cannot be used: {e}{hint}") from None


def _check_productive(lk, start: str) -> None:
    """An empty language (a rule that can never finish) is refused."""
    productive: set = set()
    changed = True
    while changed:
        changed = False
        for rule in lk.rules:
            name = rule.origin.name
            if name not in productive and all(s.is_term or s.name in productive for s in rule.expansion):
                productive.add(name)
                changed = True
    if start not in productive:
        raise ConstrainedError(
            f"the grammar's language is empty: rule {start!r} never derives a finite string "
            "(every alternative needs a rule that never finishes, e.g. only left-recursive ones)"
        )


class _Language:
    """Everything about a grammar that does not depend on a vocabulary: how the
    lexer and the parser meet. A matcher's state is (lexer state, parser stack);
    the lexer state lives in the context of the stack that was there when the
    lexeme began (the stack does not change inside a lexeme)."""

    def __init__(self, names, lexer: Lexer, parser: ParseTable):
        self.names = names
        self.lexer = lexer
        self.parser = parser
        ignored = frozenset(np.flatnonzero(lexer.ignored).tolist())
        self.acceptable = {state: terms | ignored for state, terms in parser.acceptable.items()}
        self._contexts = SuffixMemo(_CONTEXT_CACHE)

    def start(self) -> tuple:
        return self.lexer.q0, self.parser.start_stack()

    def context(self, stack: tuple):
        """(LexContext, whether $END is accepted) for a parser stack. Valid terminals
        are the acceptable ones the parser really shifts (LALR may reduce before it
        notices an error); ignored terminals are always valid."""
        parser = self.parser
        hit = self._contexts.get(0, stack)
        if hit is not None:
            parser.read(stack, hit[0])
            return hit[1]
        with parser.reading(stack) as depth:
            acceptable = self.acceptable[stack[-1]]
            ignored = self.lexer.ignored
            valid = frozenset(k for k in acceptable if ignored[k] or parser.feed(stack, k) is not None)
            value = (self.lexer.context(acceptable, valid), parser.feed(stack, END) is not None)
            self._contexts.put(0, stack, depth(), value)
        return value

    def after(self, stack: tuple, term: int):
        """(fresh lexer state, stack) once the lexeme is emitted as ``term``."""
        if self.lexer.ignored[term]:
            return self.lexer.q0i, stack
        return self.lexer.q0, self.parser.feed(stack, term)

    def eos_ok(self, q: int, stack: tuple) -> bool:
        ctx, end_ok = self.context(stack)
        if q in self.lexer.starts:
            return end_ok
        term = int(ctx.choice[q])
        if term < 0:
            return False
        return self.context(self.after(stack, term)[1])[1]

    def step(self, q: int, stack: tuple, data: bytes):
        """(lexer state, stack) after ``data``, or None where it is not allowed."""
        ctx = self.context(stack)[0]
        trans = self.lexer.trans
        for b in data:
            nq = trans[q, b]
            if ctx.alive_lark[nq]:
                q = nq
                continue
            term = int(ctx.choice[q])
            if term < 0:
                return None
            q, stack = self.after(stack, term)
            ctx = self.context(stack)[0]
            nq = trans[q, b]
            if not ctx.alive_lark[nq]:
                return None
            q = nq
        if not ctx.alive_valid[q]:
            return None
        return int(q), stack

    def forced(self, q: int, stack: tuple) -> bytes:
        ctx, end_ok = self.context(stack)
        out = bytearray()
        while len(out) < 256:
            if ctx.choice[q] >= 0 or (q in self.lexer.starts and end_ok):
                break
            nxt = self.lexer.trans[q]
            live = np.flatnonzero(ctx.alive_valid[nxt])
            if len(live) != 1:
                break
            out.append(int(live[0]))
            q = int(nxt[live[0]])
        return bytes(out)

    def matches(self, data: bytes) -> bool:
        state = self.step(*self.start(), data)
        return state is not None and self.eos_ok(*state)


class Grammar(Compiled):
    """A compiled Lark grammar. ``matcher(tokenizer)`` follows one sequence;
    ``processor(tokenizer)`` is an mlx-lm logits processor for one generation."""

    def __init__(self, lk, language: _Language, description: str, lark_lexes: bool = True):
        super().__init__()
        self.lark = lk
        self.language = language
        self.description = description
        self._lark_lexes = lark_lexes

    def __repr__(self) -> str:
        return (f"<Grammar {self.description}: {len(self.language.names)} terminals, "
                f"{self.language.lexer.n_states} lexer states>")

    def _new_index(self, vocab: Vocabulary) -> "GrammarIndex":
        return GrammarIndex(self.language, vocab)

    def _new_matcher(self, index: "GrammarIndex") -> "GrammarMatcher":
        return GrammarMatcher(index)

    def matches(self, text: str) -> bool:
        """Whether ``text`` is in the language: lark parses it (grammars whose
        terminals lark can lex), else this engine accepts its bytes."""
        if not self._lark_lexes:
            return self.language.matches(text.encode())
        from lark.exceptions import LarkError

        try:
            self.lark.parse(text)
            return True
        except LarkError:
            return False


class _Walk:
    """How every token fares from one lexer state in one context, before the
    parser is asked anything: ``inside`` (packed) the tokens that stay inside the
    lexeme and end where a valid terminal can still complete; ``zero_bits``
    (packed) those whose first byte already starts a new lexeme, after the current
    one is emitted as ``zero_term``; ``later``: per terminal emitted, the tokens
    that leave the lexeme after one byte or more, sorted by the byte that starts
    the next lexeme (``offsets``: where it is; ``byte_starts``: bucket bounds)."""

    __slots__ = ("inside", "zero_term", "zero_bits", "later")

    def __init__(self, inside, zero_term, zero_bits, later):
        self.inside, self.zero_term, self.zero_bits, self.later = inside, zero_term, zero_bits, later


class GrammarIndex:
    """A grammar over one vocabulary: token masks per (lexer state, parser stack),
    remembered under the top of the stack that decided them."""

    def __init__(self, language: _Language, vocab: Vocabulary):
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
        # Where each token leads from every lexer state while some terminal stays
        # alive: index.py's trie walk over the lexer's automaton.
        self._next_by_state, token_group = _state_table(self.lexer.dfa(), vocab.trie)
        self._usable_group = token_group[self._usable]
        self.words = (vocab.size + 31) // 32
        self._walks: OrderedDict = OrderedDict()
        self._masks = SuffixMemo(_MASK_CACHE)
        self.bias_cache: OrderedDict = OrderedDict()
        self._eos_only = self._pack_ids(self.eos)

    def _pack_ids(self, ids) -> np.ndarray:
        """Packed words with the bits of ``ids`` set."""
        allowed = np.zeros(self.words * 32, dtype=bool)
        allowed[ids] = True
        packed = np.packbits(allowed, bitorder="little").view(np.uint32)
        return packed

    def finished_mask(self) -> np.ndarray:
        return self._eos_only

    def mask(self, q: int, stack: tuple) -> np.ndarray:
        parser = self.parser
        hit = self._masks.get(q, stack)
        if hit is not None:
            parser.read(stack, hit[0])
            return hit[1]
        with parser.reading(stack) as depth:
            packed = self._mask(q, stack)
            self._masks.put(q, stack, depth(), packed)
        return packed

    def _mask(self, q: int, stack: tuple) -> np.ndarray:
        language, lexer = self.language, self.lexer
        ctx, _ = language.context(stack)
        walk = self._walk_from(q, ctx)
        words = walk.inside.copy()
        if walk.zero_term >= 0:
            words |= self.mask(*language.after(stack, walk.zero_term)) & walk.zero_bits
        found = []
        for term, (tok, offsets, byte_starts) in walk.later.items():
            q2, stack2 = language.after(stack, term)
            if stack2 is None:
                continue
            # Only tokens whose next byte can start a lexeme there go on.
            fits = np.flatnonzero(language.context(stack2)[0].alive_lark[lexer.trans[q2, :]])
            picked = [np.arange(byte_starts[b], byte_starts[b + 1]) for b in fits.tolist() if byte_starts[b + 1] > byte_starts[b]]
            if picked:
                pick = np.concatenate(picked)
                found.append(self._cross(tok[pick], offsets[pick], q2, stack2))
        if found:
            words |= self._pack_ids(np.concatenate(found))
        if language.eos_ok(q, stack):
            words |= self._eos_only
        words.flags.writeable = False
        return words

    def _walk_from(self, q: int, ctx) -> _Walk:
        """The ``_Walk`` from lexer state q in context ctx (cached)."""
        key = (q, ctx.key)
        hit = self._walks.get(key)
        if hit is not None:
            self._walks.move_to_end(key)
            return hit
        usable = self._usable
        inside = np.zeros(self.vocab.size, dtype=bool)
        # Tokens whose first byte does not fit the lexeme leave it at once.
        first_out = ~ctx.alive_lark[self.lexer.trans[q]][self._first_byte]
        end = self._next_by_state[q][self._usable_group]  # group -1 picks the last column, the sentinel
        stays = ctx.alive_lark[end]  # the whole token stays inside the lexeme
        inside[usable[stays & ctx.alive_valid[end]]] = True
        tok = usable[~stays & ~first_out]  # these leave the lexeme after a byte or more, or die
        ended, end_state, b_tok, b_off, b_state = self._walk(tok, np.zeros(len(tok), dtype=np.int64), q, ctx)
        inside[ended[ctx.alive_valid[end_state]]] = True
        zero_term = int(ctx.choice[q])
        zero_bits = self._pack_ids(usable[first_out]) if zero_term >= 0 else None
        later = {}
        term = ctx.choice[b_state]
        for t in np.unique(term[term >= 0]).tolist():
            sel = term == t
            tok_t, off_t = b_tok[sel], b_off[sel]
            nxt = self.bytes[tok_t, off_t]
            order = np.argsort(nxt, kind="stable")
            byte_starts = np.searchsorted(nxt[order], np.arange(257))
            later[t] = (tok_t[order].astype(np.int32), off_t[order].astype(np.int16), byte_starts)
        result = _Walk(self._pack_bool(inside), zero_term, zero_bits, later)
        self._walks[key] = result
        if len(self._walks) > _WALK_CACHE:
            self._walks.popitem(last=False)
        return result

    def _pack_bool(self, allowed: np.ndarray) -> np.ndarray:
        words = np.zeros(self.words * 4, dtype=np.uint8)
        bits = np.packbits(allowed, bitorder="little")
        words[: len(bits)] = bits
        return words.view(np.uint32)

    def _walk(self, tok, off, q, ctx):
        """Walk tokens ``tok`` from byte ``off`` in lexer state ``q`` until each ends
        (-> ended tokens and their states) or leaves the lexeme (-> token, offset
        of the byte that does not fit, state before it)."""
        trans, lengths, matrix = self.lexer.trans, self.lengths, self.bytes
        alive = ctx.alive_lark
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

    def _cross(self, tok, off, q: int, stack: tuple) -> np.ndarray:
        """Tokens that, from a fresh lexeme in state ``q`` with ``stack``, can spell
        their bytes from ``off`` on: all followed at once, whatever parser stacks
        they reach. Each token carries a lexer state and a stack id; every byte
        position is one vectorised step, and the parser only runs once per distinct
        (stack, emitted terminal) pair."""
        language, trans, matrix = self.language, self.lexer.trans, self.bytes
        stacks: list = []
        sid_of: dict = {}
        width = self.lexer.n_states + 1
        # Per stack id: the context's arrays, in rows of matrices that grow by doubling.
        rows = {"lark": np.zeros((4, width), dtype=bool), "valid": np.zeros((4, width), dtype=bool),
                "choice": np.full((4, width), -1, dtype=np.int64)}
        emitted: dict = {}  # (stack id, terminal) -> (stack id, fresh lexer state), or None if rejected

        def sid(st: tuple) -> int:
            i = sid_of.get(st)
            if i is None:
                i = sid_of[st] = len(stacks)
                stacks.append(st)
                if i == len(rows["lark"]):
                    for name, m in rows.items():
                        grown = np.empty((2 * len(m), width), dtype=m.dtype)
                        grown[: len(m)] = m
                        rows[name] = grown
                ctx = language.context(st)[0]
                rows["lark"][i], rows["valid"][i], rows["choice"][i] = ctx.alive_lark, ctx.alive_valid, ctx.choice
            return i

        def emit(sids, terms):
            """(stack ids, fresh lexer states) after emitting ``terms``."""
            n_terms = len(language.names)
            uniq, inverse = np.unique(sids * n_terms + terms, return_inverse=True)
            new_sid = np.empty(len(uniq), dtype=np.int64)
            new_q = np.empty(len(uniq), dtype=np.int64)
            for j, key in enumerate(uniq.tolist()):
                hit = emitted.get(key)
                if hit is None:
                    s_id, t = divmod(key, n_terms)
                    q2, st2 = language.after(stacks[s_id], t)
                    hit = emitted[key] = (sid(st2), q2)
                new_sid[j], new_q[j] = hit
            return new_sid[inverse.ravel()], new_q[inverse.ravel()]

        tok = tok.astype(np.int64)
        pos = off.astype(np.int64)
        cur = np.full(len(tok), sid(stack), dtype=np.int64)
        state = trans[q, matrix[tok, pos]].astype(np.int64)  # the caller checked this byte fits
        pos = pos + 1
        lengths = self.lengths[tok]
        found = []
        while len(tok):
            lark, valid, choice = rows["lark"], rows["valid"], rows["choice"]
            done = pos >= lengths
            if done.any():
                found.append(tok[done][valid[cur[done], state[done]]])
                keep = ~done
                tok, pos, state, cur, lengths = tok[keep], pos[keep], state[keep], cur[keep], lengths[keep]
                if not len(tok):
                    break
            byte = matrix[tok, pos]
            nxt = trans[state, byte]
            out = ~lark[cur, nxt]
            if out.any():
                # The lexeme ends before this byte: emit its terminal, start the next one with the byte.
                t = choice[cur[out], state[out]]
                emits = t >= 0
                idx = np.flatnonzero(out)
                drop = idx[~emits]
                idx = idx[emits]
                if len(idx):
                    s2, q2 = emit(cur[idx], t[emits])
                    lark = rows["lark"]  # new stacks may have been added (and the matrix grown)
                    n2 = trans[q2, byte[idx]]
                    fits = lark[s2, n2]
                    cur[idx], nxt[idx] = s2, n2
                    drop = np.concatenate([drop, idx[~fits]])
                if len(drop):
                    keep = np.ones(len(tok), dtype=bool)
                    keep[drop] = False
                    tok, pos, cur, lengths, nxt = tok[keep], pos[keep], cur[keep], lengths[keep], nxt[keep]
            state = nxt.astype(np.int64)
            pos = pos + 1
        return _cat(found)


def _cat(parts) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


_TOKEN_BYTES: "weakref.WeakKeyDictionary[Vocabulary, tuple]" = weakref.WeakKeyDictionary()


def _token_matrix(vocab: Vocabulary):
    """The vocabulary's bytes as a zero-padded (size, longest) uint8 matrix, and lengths."""
    hit = _TOKEN_BYTES.get(vocab)
    if hit is None:
        hit = _TOKEN_BYTES[vocab] = padded_bytes(vocab.tokens)
    return hit


def _state_table(dfa: DFA, trie):
    """(table, token_group): ``table[q, token_group[t]]`` is the lexer state after
    token t's bytes from state q while some terminal stays alive, else the
    sentinel n (also for group -1, the last column)."""
    token_group, group_next = walk_trie(dfa, trie)
    n = dfa.n_states
    dtype = np.int16 if n < 32767 else np.int32
    table = np.full((n + 1, group_next.shape[0] + 1), n, dtype=dtype)
    table[:n, :-1] = np.where(group_next < 0, n, group_next).T
    return table, token_group


class GrammarMatcher(TokenHistory):
    """One sequence's position in a grammar: a lexer state and a parser stack per token."""

    def __init__(self, index: GrammarIndex):
        super().__init__(index, index.language.start())
        self.language = index.language

    def is_finished(self) -> bool:
        return self._states[-1] is None

    def is_accepting(self) -> bool:
        state = self._states[-1]
        return state is None or self.language.eos_ok(*state)

    def mask(self) -> np.ndarray:
        state = self._states[-1]
        return self.index.finished_mask() if state is None else self.index.mask(*state)

    def advance(self, token: int) -> None:
        token = self.vocab.check_token(token)
        state = self._states[-1]
        if token in self.vocab.eos_ids:
            if state is not None and not self.language.eos_ok(*state):
                raise ConstrainedError(
                    f"EOS (token {token}) is not allowed after {self.text()!r}: the output is not complete"
                )
            nxt = None
        elif state is None:
            raise ConstrainedError(f"cannot advance by token {token} after EOS: the output is complete")
        else:
            data = self.vocab.tokens[token]
            nxt = self.language.step(state[0], state[1], data) if data else None
            if nxt is None:
                raise ConstrainedError(
                    f"token {token} ({data!r}) is not allowed after {self.text()!r} by the grammar"
                )
        self._states.append(nxt)
        self._tokens.append(token)

    def forced(self) -> bytes:
        state = self._states[-1]
        return b"" if state is None else self.language.forced(*state)
