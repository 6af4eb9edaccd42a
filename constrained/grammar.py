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

All terminals share one byte automaton, the product of their DFAs, whose
states carry which terminals can still complete (``alive``) and which are
complete (``accepting``). index.py's trie walk over it gives, for every lexer
state, where each token leads if it stays inside one lexeme; with the parser
state's acceptable terminals that settles most tokens at once, per (lexer
state, acceptable terminals), cached. Tokens that cross a lexeme boundary are
followed, vectorised over tokens and over the parser stacks they reach, with
the parser run once per distinct (stack, emitted terminal). Whole masks are
cached per (lexer state, parser stack), so a repeated situation costs one
dictionary lookup.
"""

import weakref
from collections import OrderedDict
from pathlib import Path

import numpy as np

from .constraint import Compiled
from .dfa import DFA, from_regex, gc_paused, minimize
from .errors import ConstrainedError
from .index import walk_trie
from .matcher import TokenHistory
from .vocab import Trie, Vocabulary, padded_bytes

MAX_IGNORED = 48  # bytes an %ignore'd lexeme (whitespace, a comment) may span
END = -1  # the parser's end-of-input terminal, $END
_MASK_CACHE = 1024  # packed masks kept per grammar and vocabulary
_WALK_CACHE = 96  # first-level token walks kept per grammar and vocabulary (up to ~1 MB each)
_CONTEXT_CACHE = 100_000  # parser stacks kept per grammar
_MAX_TABLE = 40_000_000  # token groups x lexer states kept for the inside-a-lexeme walk


def grammar(text_or_path, start: str = "start", max_ignored: int = MAX_IGNORED) -> "Grammar":
    """Output that lark parses with the grammar ``text_or_path`` (grammar text, or
    the path of a ``.lark`` file), from the rule ``start``.

    The grammar must be LALR(1) (lark's ``parser="lalr"``); shift/reduce conflicts
    are resolved as shifts, as lark does. ``%ignore``'d lexemes span at most
    ``max_ignored`` bytes, one between two terminals."""
    text, import_paths, source = _read(text_or_path)
    if not isinstance(max_ignored, int) or max_ignored < 1:
        raise ConstrainedError(f"max_ignored is a positive number of bytes, got {max_ignored!r}")
    lk = _lark(text, start, import_paths)
    return Grammar(lk, text, start, _Tables(lk, start, max_ignored), source)


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


def _lark(text: str, start: str, import_paths):
    import lark
    from lark.exceptions import GrammarError, LarkError

    if not isinstance(start, str):
        raise ConstrainedError(f"start is the name of a rule, got {start!r}")
    try:
        return lark.Lark(text, parser="lalr", lexer="contextual", start=start, import_paths=import_paths)
    except GrammarError as e:
        message = str(e).strip()
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


def _bounded(dfa: DFA, limit: int) -> DFA:
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


class _Context:
    """What a parser stack means to the lexer: acceptable terminals (lark's), valid
    ones (that the parser really shifts), and per lexer state whether a lexeme can
    still grow and which terminal it is emitted as."""

    __slots__ = ("alive_lark", "alive_valid", "choice", "end_ok")

    def __init__(self, alive_lark, alive_valid, choice, end_ok):
        self.alive_lark = alive_lark  # (n + 1,) bool, sentinel state n is False
        self.alive_valid = alive_valid  # (n + 1,) bool
        self.choice = choice  # (n + 1,) int: the valid terminal emitted there, -1 for none
        self.end_ok = end_ok  # whether $END is accepted with this stack


class _Tables:
    """Everything about a grammar that does not depend on a vocabulary."""

    def __init__(self, lk, start: str, max_ignored: int):
        from lark.parsers.lalr_analysis import Shift

        table = lk.parser.parser.parser.parse_table
        self.start_state = table.start_states[start]
        self.end_state = table.end_states[start]
        defs = {t.name: t for t in lk.terminals}
        ignored_names = set(lk.ignore_tokens)
        rules = {rule.origin.name for rule in lk.rules}
        used = set(ignored_names)
        for row in table.states.values():
            used.update(name for name in row if name not in rules and name != "$END")
        missing = sorted(used - defs.keys())
        if missing:
            raise ConstrainedError(
                f"terminals {missing} have no pattern (%declare'd for a postlexer such as an Indenter), "
                "which grammar() does not support: define them with a string or a regex"
            )
        # Lark's lexer order: priority, then longest possible match, then pattern length, then name.
        self.names = sorted(
            used, key=lambda n: (-defs[n].priority, -defs[n].pattern.max_width, -len(defs[n].pattern.value), n)
        )
        self.index = {name: k for k, name in enumerate(self.names)}
        n_terms = len(self.names)
        self.ignored = np.array([name in ignored_names for name in self.names], dtype=bool)
        is_str = [type(defs[n].pattern).__name__ == "PatternStr" for n in self.names]
        self.choice_order = np.array(
            sorted(range(n_terms), key=lambda k: (-defs[self.names[k]].priority, not is_str[k], k)), dtype=np.int64
        )

        # The parse table on terminal indices ($END is END).
        self.actions: dict = {}
        self.goto: dict = {}
        self.accepts: dict = {}
        for state, row in table.states.items():
            acts, gotos = {}, {}
            for name, (action, arg) in row.items():
                key = END if name == "$END" else self.index.get(name)
                if key is None:  # a rule: the goto part
                    gotos[name] = arg
                elif action is Shift:
                    acts[key] = (True, arg, 0)
                else:
                    acts[key] = (False, arg.origin.name, len(arg.expansion))
            self.actions[state] = acts
            self.goto[state] = gotos
            self.accepts[state] = frozenset(k for k in acts if k != END) | frozenset(np.flatnonzero(self.ignored).tolist())
        self._check_productive(lk, start)

        dfas = []
        with gc_paused():
            for name in self.names:
                pattern = defs[name].pattern
                try:
                    dfa = from_regex(pattern.to_regexp())
                except ConstrainedError as e:
                    hint = ""
                    if name == "ESCAPED_STRING":
                        hint = ("; lark's common.ESCAPED_STRING uses a lookbehind: define the string without it, "
                                'e.g. STRING: /"([^"\\\\]|\\\\.)*"/')
                    raise ConstrainedError(f"terminal {name} ({pattern}) cannot be used: {e}{hint}") from None
                if name in ignored_names:
                    dfa = _bounded(dfa, max_ignored)
                dfas.append(dfa)
            self._product(dfas)
        self._is_str = np.array(is_str, dtype=bool)
        self._priority = np.array([defs[n].priority for n in self.names])
        self._check_lexer_order(defs)
        self._contexts: OrderedDict = OrderedDict()
        self._feeds: dict = {}
        self._arrays: dict = {}

    def _check_productive(self, lk, start: str) -> None:
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

    def _product(self, dfas) -> None:
        """The combined automaton: states are tuples of per-terminal states (-1 dead);
        the two start states (a fresh lexeme, and a fresh lexeme right after an
        ignored one, where ignored terminals may not start) are distinct from
        every other state."""
        n_terms = len(dfas)
        starts = [
            (True, tuple(0 for _ in dfas)),
            (True, tuple(-1 if self.ignored[k] else 0 for k in range(n_terms))),
        ]
        ids: dict = {}
        order: list = []
        for s in starts:
            if s not in ids:
                ids[s] = len(order)
                order.append(s)
        self.q0, self.q0i = ids[starts[0]], ids[starts[1]]
        dead_row = np.full(256, -1, dtype=np.int32)
        rows = []
        for _, comps in order:
            nxt = np.stack([dfas[k].transitions[s] if s >= 0 else dead_row for k, s in enumerate(comps)])
            cols, inverse = np.unique(nxt.T, axis=0, return_inverse=True)
            targets = np.empty(len(cols), dtype=np.int32)
            for i, col in enumerate(cols):
                if (col < 0).all():
                    targets[i] = -1
                    continue
                key = (False, tuple(col.tolist()))
                if key not in ids:
                    ids[key] = len(order)
                    order.append(key)
                targets[i] = ids[key]
            rows.append(targets[inverse.ravel()])
        n = len(order)
        comps = np.array([c for _, c in order], dtype=np.int64).reshape(n, n_terms)
        self.n_states = n
        self.alive = comps >= 0
        self.accepting = np.zeros((n, n_terms), dtype=bool)
        for k, dfa in enumerate(dfas):
            live = comps[:, k] >= 0
            self.accepting[live, k] = dfa.accepting[comps[live, k]]
        trans = np.vstack(rows + [np.full(256, n, dtype=np.int32)])
        trans[trans < 0] = n  # the sentinel dead state n
        self.trans = np.ascontiguousarray(trans, dtype=np.int32)
        self.starts = (self.q0, self.q0i)

    def _check_lexer_order(self, defs) -> None:
        """Refuse terminals that lark's lexer would split differently from the
        longest match used here. Lark takes, among the terminals it tries, the
        first (in its order: priority, longest possible match, ...) that matches
        any prefix; here the lexeme is the longest one, emitted as the terminal
        the tie rule picks. They agree when, wherever a lexeme may end, the first
        terminal in lark's order that matched any prefix of it matches it whole
        and is the one picked (or is a regex that lark's "unless" rule turns into
        the string literal picked)."""
        n_terms = len(self.names)
        for lark_set in set(self.accepts.values()):
            in_set = np.zeros(n_terms, dtype=bool)
            in_set[list(lark_set)] = True
            alive = np.append((self.alive & in_set).any(axis=1), False)
            accepting = self.accepting & in_set
            complete = accepting[:, self.choice_order]
            picked = np.where(complete.any(axis=1), self.choice_order[complete.argmax(axis=1)], -1)
            first_acc = np.where(accepting.any(axis=1), accepting.argmax(axis=1), n_terms)  # names are in lark's order
            seen = {(q, n_terms): b"" for q in set(self.starts)}
            queue = list(seen)
            while queue:
                q, best = queue.pop()
                if picked[q] >= 0:
                    winner = min(best, int(first_acc[q]))
                    choice = int(picked[q])
                    ok = winner == choice or (
                        accepting[q, winner]
                        and self._is_str[choice]
                        and not self._is_str[winner]
                        and self._priority[winner] == self._priority[choice]
                    )
                    if not ok:
                        text = seen[(q, best)]
                        raise ConstrainedError(
                            f"terminals {self.names[winner]} and {self.names[choice]} overlap in a way lark's lexer "
                            f"resolves differently from the longest match: on {text!r} lark takes "
                            f"{self.names[winner]} (it comes first in lark's order: priority, then longest possible "
                            f"match{'' if accepting[q, winner] else ', even though it matches only a shorter prefix'}), "
                            f"the longest match is {self.names[choice]}. Make the terminals disjoint, or give "
                            f"{self.names[choice]} a higher priority"
                        )
                nbest = min(best, int(first_acc[q]))
                row = self.trans[q]
                for b in np.unique(row).tolist():
                    if b < self.n_states and alive[b] and (b, nbest) not in seen:
                        seen[(b, nbest)] = seen[(q, best)] + bytes([int(np.argmax(row == b))])
                        queue.append((b, nbest))

    # The parser, on stacks of LALR states (tuples).

    def feed(self, stack: tuple, term: int):
        """The stack after ``term`` (END: the stack once accepted), or None if the
        parser rejects it."""
        key = (stack, term)
        if key in self._feeds:
            return self._feeds[key]
        st = list(stack)
        result = None
        while True:
            action = self.actions[st[-1]].get(term)
            if action is None:
                break
            shift, arg, size = action
            if shift:
                st.append(arg)
                result = tuple(st)
                break
            if size:
                del st[-size:]
            st.append(self.goto[st[-1]][arg])
            if term == END and st[-1] == self.end_state:
                result = tuple(st)
                break
        if len(self._feeds) > _CONTEXT_CACHE:
            self._feeds.clear()
        self._feeds[key] = result
        return result

    def context(self, stack: tuple) -> _Context:
        ctx = self._contexts.get(stack)
        if ctx is not None:
            return ctx
        lark_set = self.accepts[stack[-1]]
        valid = frozenset(k for k in lark_set if self.ignored[k] or self.feed(stack, k) is not None)
        arrays = self._arrays.get((lark_set, valid))
        if arrays is None:
            arrays = self._arrays[(lark_set, valid)] = self._context_arrays(lark_set, valid)
        ctx = _Context(*arrays, self.feed(stack, END) is not None)
        self._contexts[stack] = ctx
        if len(self._contexts) > _CONTEXT_CACHE:
            self._contexts.popitem(last=False)
        return ctx

    def _context_arrays(self, lark_set, valid):
        n_terms = len(self.names)
        in_lark = np.zeros(n_terms, dtype=bool)
        in_lark[list(lark_set)] = True
        in_valid = np.zeros(n_terms, dtype=bool)
        in_valid[list(valid)] = True
        alive_lark = np.append((self.alive & in_lark).any(axis=1), False)
        alive_valid = np.append((self.alive & in_valid).any(axis=1), False)
        complete = (self.accepting & in_lark)[:, self.choice_order]
        first = self.choice_order[complete.argmax(axis=1)]
        choice = np.where(complete.any(axis=1) & in_valid[first], first, -1)
        return alive_lark, alive_valid, np.append(choice, -1)

    def start_stack(self) -> tuple:
        return (self.start_state,)

    def eos_ok(self, q: int, stack: tuple) -> bool:
        ctx = self.context(stack)
        if q in self.starts:
            return ctx.end_ok
        term = int(ctx.choice[q])
        if term < 0:
            return False
        if self.ignored[term]:
            return ctx.end_ok
        return self.context(self.feed(stack, term)).end_ok

    def step(self, q: int, stack: tuple, data: bytes):
        """(lexer state, stack) after ``data``, or None where it is not allowed."""
        ctx = self.context(stack)
        trans = self.trans
        for b in data:
            nq = trans[q, b]
            if ctx.alive_lark[nq]:
                q = nq
                continue
            term = int(ctx.choice[q])
            if term < 0:
                return None
            if self.ignored[term]:
                q = self.q0i
            else:
                stack = self.feed(stack, term)
                ctx = self.context(stack)
                q = self.q0
            nq = trans[q, b]
            if not ctx.alive_lark[nq]:
                return None
            q = nq
        if not ctx.alive_valid[q]:
            return None
        return int(q), stack

    def forced(self, q: int, stack: tuple) -> bytes:
        ctx = self.context(stack)
        out = bytearray()
        while len(out) < 256:
            if ctx.choice[q] >= 0 or (q in self.starts and ctx.end_ok):
                break
            nxt = self.trans[q]
            live = np.flatnonzero(ctx.alive_valid[nxt])
            if len(live) != 1:
                break
            out.append(int(live[0]))
            q = int(nxt[live[0]])
        return bytes(out)


class Grammar(Compiled):
    """A compiled Lark grammar. ``matcher(tokenizer)`` follows one sequence;
    ``processor(tokenizer)`` is an mlx-lm logits processor for one generation."""

    def __init__(self, lk, text: str, start: str, tables: _Tables, source: str):
        super().__init__()
        self.lark = lk
        self.text = text
        self.start = start
        self.tables = tables
        self.description = f"grammar from {source} (start={start!r})"

    def __repr__(self) -> str:
        t = self.tables
        return f"<Grammar {self.description}: {len(t.names)} terminals, {t.n_states} lexer states>"

    def _new_index(self, vocab: Vocabulary) -> "GrammarIndex":
        return GrammarIndex(self.tables, vocab)

    def _new_matcher(self, index: "GrammarIndex") -> "GrammarMatcher":
        return GrammarMatcher(index)

    def matches(self, text: str) -> bool:
        """Whether lark parses ``text`` with this grammar."""
        from lark.exceptions import LarkError

        try:
            self.lark.parse(text)
            return True
        except LarkError:
            return False


_TOKEN_BYTES: "weakref.WeakKeyDictionary[Vocabulary, tuple]" = weakref.WeakKeyDictionary()


def _token_matrix(vocab: Vocabulary):
    """The vocabulary's bytes as a zero-padded (size, longest) uint8 matrix, and lengths."""
    hit = _TOKEN_BYTES.get(vocab)
    if hit is None:
        hit = _TOKEN_BYTES[vocab] = padded_bytes(vocab.tokens)
    return hit


def _state_table(combined: DFA, trie):
    """(table, token_group): ``table[q, token_group[t]]`` is the lexer state after
    token t's bytes from state q while some terminal stays alive, else the
    sentinel n (also for group -1, the last column). None when too large."""
    token_group, group_next = walk_trie(combined, trie)
    n = combined.n_states
    if group_next.size > _MAX_TABLE:  # too large to keep: tokens are walked byte by byte instead
        return None, token_group
    dtype = np.int16 if n < 32767 else np.int32
    table = np.full((n + 1, group_next.shape[0] + 1), n, dtype=dtype)
    table[:n, :-1] = np.where(group_next < 0, n, group_next).T
    return table, token_group


class GrammarIndex:
    """A grammar over one vocabulary: masks per (lexer state, parser stack), cached."""

    def __init__(self, tables: _Tables, vocab: Vocabulary):
        self.tables = tables
        self.vocab = vocab
        self.bytes, self.lengths = _token_matrix(vocab)
        self.eos = np.array(sorted(vocab.eos_ids), dtype=np.int64)
        usable = self.lengths > 0
        usable[self.eos] = False
        self._usable = np.flatnonzero(usable)
        self._first_byte = self.bytes[self._usable, 0]
        # Where each token leads from every lexer state while some terminal stays
        # alive (index.py's trie walk over the combined automaton) ...
        n = tables.n_states
        combined = DFA(np.where(tables.trans[:n] == n, -1, tables.trans[:n]).astype(np.int32), tables.accepting.any(axis=1))
        self._next_by_state, token_group = _state_table(combined, vocab.trie)
        self._usable_group = token_group[self._usable]
        # ... and the same for each token without its first byte: tokens that cross
        # into a new lexeme after one byte (" name", '",') are mostly settled by one lookup.
        self._next1_by_state = self._group1 = None
        if (self.lengths > 1).any():
            rests = [t[1:] if len(t) > 1 and i not in vocab.eos_ids else b"" for i, t in enumerate(vocab.tokens)]
            self._next1_by_state, self._group1 = _state_table(combined, Trie.build(rests))
        self.words = (vocab.size + 31) // 32
        self._walks: OrderedDict = OrderedDict()
        self._masks: OrderedDict = OrderedDict()
        self.bias_cache: OrderedDict = OrderedDict()
        eos_packed = np.zeros(self.words * 32, dtype=bool)
        eos_packed[self.eos] = True
        self._eos_only = self._pack(eos_packed[: vocab.size])

    def _pack(self, allowed: np.ndarray) -> np.ndarray:
        bits = np.packbits(allowed, bitorder="little")
        words = np.zeros(self.words * 4, dtype=np.uint8)
        words[: len(bits)] = bits
        packed = words.view(np.uint32)
        packed.flags.writeable = False
        return packed

    def finished_mask(self) -> np.ndarray:
        return self._eos_only

    def mask(self, q: int, stack: tuple) -> np.ndarray:
        key = (q, stack)
        packed = self._masks.get(key)
        if packed is not None:
            self._masks.move_to_end(key)
            return packed
        tables = self.tables
        ctx = tables.context(stack)
        inside, b_tok, b_off, b_term = self._first_walk(q, ctx)
        allowed = inside.copy()
        # Tokens whose first byte already starts a new lexeme are allowed exactly
        # when they are allowed at the start of that lexeme: reuse that mask.
        first = b_off == 0
        for t in np.unique(b_term[first]).tolist():
            sel = b_tok[first & (b_term == t)]
            if tables.ignored[t]:
                after = self.mask(tables.q0i, stack)
            else:
                after = self.mask(tables.q0, tables.feed(stack, t))
            bits = np.unpackbits(after.view(np.uint8), bitorder="little")
            allowed[sel] |= bits[sel].view(bool)
        later = ~first
        self._cross(b_tok[later], b_off[later], b_term[later], stack, allowed)
        if self.tables.eos_ok(q, stack):
            allowed[self.eos] = True
        packed = self._pack(allowed)
        self._masks[key] = packed
        if len(self._masks) > _MASK_CACHE:
            self._masks.popitem(last=False)
        return packed

    def _first_walk(self, q: int, ctx: _Context):
        """Tokens from lexer state q: those allowed without leaving the lexeme (bool
        per token), and those that leave it where a terminal is emitted (token,
        byte offset, terminal). Depends on q and the context's arrays only."""
        key = (q, id(ctx.alive_lark), id(ctx.alive_valid))
        hit = self._walks.get(key)
        if hit is not None and hit[0] is ctx.alive_lark and hit[1] is ctx.alive_valid:
            self._walks.move_to_end(key)
            return hit[2]
        usable = self._usable
        inside = np.zeros(self.vocab.size, dtype=bool)
        # Tokens whose first byte does not fit the lexeme: they leave it at once.
        first_out = ~ctx.alive_lark[self.tables.trans[q]][self._first_byte]
        if self._next_by_state is not None:
            end = self._next_by_state[q][self._usable_group]  # group -1 picks the last column, n
            stays = ctx.alive_lark[end]  # the whole token stays inside the lexeme
            inside[usable[stays & ctx.alive_valid[end]]] = True
            rest = ~stays & ~first_out
        else:
            rest = ~first_out
        tok = usable[rest]  # these leave the lexeme after a byte or more, or die
        ended, end_state, b_tok, b_off, b_p = self._walk(tok, np.zeros(len(tok), dtype=np.int64), q, ctx)
        inside[ended[ctx.alive_valid[end_state]]] = True
        b_tok = np.concatenate([usable[first_out], b_tok])
        b_off = np.concatenate([np.zeros(int(first_out.sum()), dtype=np.int64), b_off])
        term = ctx.choice[np.concatenate([np.full(int(first_out.sum()), q, dtype=np.int64), b_p])]
        keep = term >= 0  # compact: up to a vocabulary's worth of entries per cached walk
        result = (inside, b_tok[keep].astype(np.int32), b_off[keep].astype(np.int16), term[keep].astype(np.int32))
        self._walks[key] = (ctx.alive_lark, ctx.alive_valid, result)
        if len(self._walks) > _WALK_CACHE:
            self._walks.popitem(last=False)
        return result

    def _walk(self, tok, off, q, ctx: _Context):
        """Walk tokens ``tok`` from byte ``off`` in lexer state ``q`` (scalar or per
        token) until each ends (-> ended tokens and their states) or leaves the
        lexeme (-> token, offset of the byte that does not fit, state before it)."""
        trans, lengths, matrix = self.tables.trans, self.lengths, self.bytes
        alive = ctx.alive_lark
        state = np.broadcast_to(np.asarray(q, dtype=np.int64), tok.shape).copy()
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
        cat = lambda parts: np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
        return cat(ended), cat(end_state), cat(b_tok), cat(b_off), cat(b_p)

    def _cross(self, tok, off, term, stack: tuple, allowed: np.ndarray) -> None:
        """Follow tokens that emit ``term`` before byte ``off`` (with ``stack``) to
        their end, all at once whatever parser stacks they reach: mark those allowed.

        Each token carries a lexer state and a stack id; every byte position is
        one vectorised step, and the parser only runs once per distinct (stack,
        terminal) pair where lexemes end."""
        tables = self.tables
        if not len(tok):
            return
        stacks: list = []
        sid_of: dict = {}
        width = tables.n_states + 1
        # Per stack id: the context's arrays, in rows of matrices that grow by doubling.
        rows = {"lark": np.zeros((8, width), dtype=bool), "valid": np.zeros((8, width), dtype=bool),
                "choice": np.full((8, width), -1, dtype=np.int64)}
        emitted: dict = {}  # (stack id, terminal) -> (stack id, fresh lexer state)

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
                ctx = tables.context(st)
                rows["lark"][i] = ctx.alive_lark
                rows["valid"][i] = ctx.alive_valid
                rows["choice"][i] = ctx.choice
            return i

        def emit(sids, terms):
            """(stack ids, fresh lexer states) after emitting ``terms``."""
            n_terms = len(tables.names)
            keys = sids * n_terms + terms
            uniq, inverse = np.unique(keys, return_inverse=True)
            new_sid = np.empty(len(uniq), dtype=np.int64)
            new_q = np.empty(len(uniq), dtype=np.int64)
            for j, key in enumerate(uniq.tolist()):
                hit = emitted.get(key)
                if hit is None:
                    s_id, t = divmod(key, n_terms)
                    if tables.ignored[t]:
                        hit = (s_id, tables.q0i)
                    else:
                        hit = (sid(tables.feed(stacks[s_id], t)), tables.q0)
                    emitted[key] = hit
                new_sid[j], new_q[j] = hit
            return new_sid[inverse.ravel()], new_q[inverse.ravel()]

        base = sid(stack)
        cur_sid, state = emit(np.full(len(tok), base, dtype=np.int64), term.astype(np.int64))
        pos = off.astype(np.int64)
        tok = tok.astype(np.int64)
        lengths = self.lengths[tok]
        # Tokens whose rest after their first byte stays inside the new lexeme: one lookup.
        if self._next1_by_state is not None:
            one = pos == 1
            if one.any():
                lark, valid = rows["lark"], rows["valid"]
                end = self._next1_by_state[state[one], self._group1[tok[one]]]
                stays = lark[cur_sid[one], end]
                ok = stays & valid[cur_sid[one], end]
                allowed[tok[one][ok]] = True
                keep = ~one
                keep[one] = ~stays
                tok, pos, state, cur_sid, lengths = tok[keep], pos[keep], state[keep], cur_sid[keep], lengths[keep]
        trans, matrix = tables.trans, self.bytes
        while len(tok):
            lark, valid, choice = rows["lark"], rows["valid"], rows["choice"]
            done = pos >= lengths
            if done.any():
                allowed[tok[done][valid[cur_sid[done], state[done]]]] = True
                keep = ~done
                tok, pos, state, cur_sid, lengths = tok[keep], pos[keep], state[keep], cur_sid[keep], lengths[keep]
                if not len(tok):
                    break
            byte = matrix[tok, pos]
            nxt = trans[state, byte]
            out = ~lark[cur_sid, nxt]
            if out.any():
                # The lexeme ends before this byte: emit its terminal, start the next one with the byte.
                t = choice[cur_sid[out], state[out]]
                emits = t >= 0
                idx = np.flatnonzero(out)
                drop = idx[~emits]
                idx = idx[emits]
                if len(idx):
                    s2, q2 = emit(cur_sid[idx], t[emits])
                    lark = rows["lark"]  # new stacks may have been added (and the matrix grown)
                    n2 = trans[q2, byte[idx]]
                    fits = lark[s2, n2]
                    cur_sid[idx], nxt[idx] = s2, n2
                    drop = np.concatenate([drop, idx[~fits]])
                if len(drop):
                    keep = np.ones(len(tok), dtype=bool)
                    keep[drop] = False
                    tok, pos, cur_sid, lengths, nxt = tok[keep], pos[keep], cur_sid[keep], lengths[keep], nxt[keep]
            state = nxt.astype(np.int64)
            pos = pos + 1


class GrammarMatcher(TokenHistory):
    """One sequence's position in a grammar: a lexer state and a parser stack per token."""

    def __init__(self, index: GrammarIndex):
        super().__init__(index, (index.tables.q0, index.tables.start_stack()))
        self.tables = index.tables

    def is_finished(self) -> bool:
        return self._states[-1] is None

    def is_accepting(self) -> bool:
        state = self._states[-1]
        return state is None or self.tables.eos_ok(*state)

    def mask(self) -> np.ndarray:
        state = self._states[-1]
        return self.index.finished_mask() if state is None else self.index.mask(*state)

    def advance(self, token: int) -> None:
        token = self.vocab.check_token(token)
        state = self._states[-1]
        if token in self.vocab.eos_ids:
            if state is not None and not self.tables.eos_ok(*state):
                raise ConstrainedError(
                    f"EOS (token {token}) is not allowed after {self.text()!r}: the output is not complete"
                )
            nxt = None
        elif state is None:
            raise ConstrainedError(f"cannot advance by token {token} after EOS: the output is complete")
        else:
            data = self.vocab.tokens[token]
            nxt = self.tables.step(state[0], state[1], data) if data else None
            if nxt is None:
                raise ConstrainedError(
                    f"token {token} ({data!r}) is not allowed after {self.text()!r} by the grammar"
                )
        self._states.append(nxt)
        self._tokens.append(token)

    def forced(self) -> bytes:
        state = self._states[-1]
        return b"" if state is None else self.tables.forced(*state)
