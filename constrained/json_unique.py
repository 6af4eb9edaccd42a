"""Strings and objects that must differ from the others of their array or
object: uniqueItems over strings and objects, the undeclared property names
of an object whose members are counted (minProperties), and the names of
free keys under property_order="any". The strings are lexemes of terminals
the schema compiler marks distinct (json_schema_rules' ``unique_value``,
``key_terminal`` and ``declared_key``); a unique item's object opens with a
"{" terminal of its own (``item_braces``). The matcher keeps those of each
array and object, decoded, so that no token may complete one equal to an
earlier one there (objects are equal as JSON values: in any order, 1 as
1.0, ``_value_key``).

No grammar can do this (the strings are unbounded, or the names too many to
track as a set), so the state of a matcher here is the grammar's (lexer
state, parser stack) with four more parts: the bytes read of the distinct
lexeme under way (None outside one); the strings and objects so far of each
array and object open, innermost last ("[" and "{" lexemes open one, "]" and
"}" close it); per unique item's object open, the bytes read of it (a chain
of each step's, ``_joined``); and whether the text read ends inside a string
(``_reading``).

The mask is the grammar's, less the tokens that would complete a repeated
string, or leave a key under way that can only become a free key's name the
object has. Only tokens with a quote can complete a string: one that ends
the string under way does so with its bytes before that quote, looked up by
what they decode to (``_QuotedTokens.closing``); the few that may hold a
string whole between two of their quotes are found by that string
(``enclosing``) and stepped through. Names have one spelling, so the tokens
that begin or go on with part of one are found by their bytes: those that
begin a key (``into``) are stepped through, and those that go on inside the
key under way (``inside``, without a quote) are read on through the lexer.
Only tokens with a "}" outside a string can complete an object: once an
array or object open has a string or object (and an item's object may
close), those the grammar allows are stepped through
(``_QuotedTokens.closing_brace``).

No dead end is left. Every unfinished lexeme of an undeclared name has
infinitely many endings (checked when the schema compiles), and where a key
starts, the grammar offers a name the object has not given yet
(json_schema_rules' _ObjectProduct.settle). A unique item's string may have
few endings (an enum, a maxLength, a pattern that closes): there the matcher
counts the strings each state of its terminal can still end as (``_Endings``)
and refuses a token after which every one of them is an earlier item. The
tokens that may do so are stepped: those that go on inside the string under
way to a state with that few endings, by a byte that can go on towards an
earlier item (``_next_bytes``), and those that begin a string at one of
their quotes in such a state (``_Endings.beginning``: the vocabulary's
quotes walked at once, by ``walks.token_walk``). The grammar holds no more
items than there are strings (json_schema_rules' _ArrayProduct.most_items),
so an item can always begin. A unique item's object can always take one
more property, of a name no earlier item has (the compiler refuses other
objects), so where its "}" is refused, the object can go on to differ.
"""

import itertools
import json
import weakref
from decimal import Decimal

import numpy as np

from .dfa import DFA, ending_counts, endless
from .errors import ConstrainedError
from .grammar import Grammar, GrammarMatcher
from .vocab import padded_bytes

_ESCAPE_TAIL = 11  # bytes an unfinished character may take at the end of a string's text: "\ud83d\ude0"
_TOKENS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # vocabulary -> _QuotedTokens
_MEMO = 4096  # sets of strings kept per vocabulary with the tokens that hold or spell into them (_QuotedTokens)
_MANY = 2**40  # strings counted up to this (_Endings): "as many or infinitely many"
_FEW_KEPT = 64  # per state of a bounded terminal, the tokens kept that leave at most this many endings (or more)
_ENDINGS: dict = {}  # automaton digest -> _Endings (see _endings)
_ENDINGS_KEPT = 64
_GOING_ON_KEPT = 256  # states of bounded terminals whose such tokens are kept (thousands at a maxLength's end)
# The bytes that spell each character one way: ASCII but DEL (which its escape spells too), so that a
# non-ASCII character is its escape, and the continuation bytes that finish one a token began raw.
_ONE_SPELLING = (np.arange(256) < 0x7F) | ((np.arange(256) >= 0x80) & (np.arange(256) < 0xC0))


class DistinctItemsGrammar(Grammar):
    """A JSON Schema grammar whose arrays and objects must not repeat a lexeme
    of the ``distinct`` terminals (names), nor an object that opens with one of
    the ``item_braces``; ``opening`` and ``closing`` name the terminals of "["
    and "{" (those too), and of "]" and "}"."""

    def __init__(self, grammar: Grammar, distinct: frozenset, opening: tuple, closing: tuple, key_names: dict,
                 item_braces: frozenset):
        super().__init__(grammar.lark, grammar.language, grammar.description, grammar._lark_lexes)
        index = {name: k for k, name in enumerate(self.language.names)}
        self.distinct = frozenset(index[name] for name in distinct)
        self.opening = frozenset(index[name] for name in opening if name in index)
        self.closing = frozenset(index[name] for name in closing if name in index)
        self.item_braces = frozenset(index[name] for name in item_braces)  # "{" of objects that are unique items
        self.key_names = {index[name]: key for name, key in key_names.items()}  # free keys' terminals -> names
        self.spellings = {key: json.dumps(key).encode() for key in self.key_names.values()}
        dfas = self.language.lexer.dfas
        # unique items' terminals whose unfinished strings may have few endings (see the module's doc)
        self.bounded = {k: _endings(dfas[k]) for k in self.distinct - self.key_names.keys() if not endless(dfas[k])}
        self._alive: dict = {}  # (lexer state, context key) -> _names_alive's answer

    def _new_matcher(self, index) -> "DistinctItemsMatcher":
        return DistinctItemsMatcher(index, self)

    def start(self) -> tuple:
        return (*self.language.start(), None, (frozenset(),), (), OUTSIDE)

    def step(self, state: tuple, data: bytes):
        """The state after ``data`` (see the module's doc), or None where the
        grammar refuses it or it repeats an item."""
        q, stack, under_way, seen, objects, reading = state
        emitted: list = []
        after = self.language.step(q, stack, data, emitted)
        if after is None:
            return None
        start, before = 0, under_way or b""
        begun = {}  # the unique items' objects begun in ``data`` (by frame): where their "{" is
        for term, end in emitted:
            if term in self.opening:
                seen = (*seen, frozenset())
                if term in self.item_braces:
                    objects = (*objects, (len(seen) - 1, None))
                    begun[len(seen) - 1] = start
            elif term in self.closing:
                seen = seen[:-1]
                if objects and objects[-1][0] == len(seen):  # a unique item's object ends
                    frame, pieces = objects[-1]
                    objects = objects[:-1]
                    # (begun: the object began in this step, at that offset; else in an earlier one)
                    text = _joined((pieces, data[begun.get(frame, 0):end]))
                    item = _value_key(json.loads(text, parse_int=Decimal, parse_float=Decimal))
                    if item in seen[-1]:
                        return None
                    seen = (*seen[:-1], seen[-1] | {item})
            elif term in self.distinct:
                item = json.loads(before + data[start:end])
                if item in seen[-1]:
                    return None
                seen = (*seen[:-1], seen[-1] | {item})
            start, before = end, b""
        if objects:
            objects = tuple((frame, (pieces, data[begun.get(frame, 0):])) for frame, pieces in objects)
        if self.item_braces:
            reading = _reading(data, reading)
        q, stack = after
        read = before + data[start:]
        if not read:
            return q, stack, None, seen, objects, reading
        distinct, names, bounded = self._names_alive(q, self.language.context(stack))
        if not distinct:
            return q, stack, None, seen, objects, reading
        if _only_used(names, seen) or bounded and self.runs_out(q, bounded, read, seen[-1]):
            return None  # only names the object has, or items the array has: a dead end
        return q, stack, read, seen, objects, reading

    def runs_out(self, q: int, bounded: tuple, read: bytes, used: frozenset) -> bool:
        """Whether the string under way (``read`` so far, from its opening
        quote), a lexeme of one of the ``bounded`` terminals alive in lexer
        state q, can only end as one of ``used``."""
        components = self.language.lexer.components[q]
        endings = []
        for k in bounded:
            state = int(components[k])
            if self.bounded[k].counts[state] > len(used):
                return False
            endings += self.bounded[k].spelled(state)
        return all(json.loads(read + ending) in used for ending in endings)

    def within_used_names(self, state: tuple, data: bytes) -> bool:
        """Whether ``data``, read on inside the key under way in ``state``,
        leaves it where it can only become a name the object has. (False where
        the lexeme does not take all of ``data``: the grammar's mask decides.)"""
        q, stack, _, seen, _, _ = state
        ctx, trans = self.language.context(stack), self.language.lexer.trans
        for byte in data:
            q = trans[q, byte]
            if not ctx.alive_lark[q]:
                return False
        distinct, names, _ = self._names_alive(q, ctx)
        return distinct and _only_used(names, seen)

    def _names_alive(self, q: int, ctx) -> tuple:
        """(whether a distinct terminal is alive in lexer state q of context
        ``ctx``; the names of the free keys alive there, or None where a
        terminal alive is not a free key's; the terminals alive, where all are
        bounded ones, else None)."""
        key = (q, ctx.key)
        hit = self._alive.get(key)
        if hit is None:
            live = [k for k in self.language.lexer.alive_accepted(q, ctx) if ctx.valid[k]]
            names = [self.key_names.get(k) for k in live]
            if len(self._alive) >= _MEMO:
                self._alive.clear()
            hit = self._alive[key] = (any(k in self.distinct for k in live), None if None in names else frozenset(names),
                                      tuple(live) if live and all(k in self.bounded for k in live) else None)
        return hit

    def matches(self, text: str) -> bool:
        state = self.step(self.start(), text.encode())
        return state is not None and self.language.eos_ok(state[0], state[1])


class DistinctItemsMatcher(GrammarMatcher):
    """GrammarMatcher over the states of DistinctItemsGrammar.step."""

    refused = ("by the grammar, or repeats a string that must be unique (an item of a uniqueItems array, an "
               "undeclared property name where members are counted, or a declared one with property_order='any'), "
               "or an object that is an earlier item of its uniqueItems array")

    def __init__(self, index, grammar: DistinctItemsGrammar):
        super().__init__(index, grammar.start())
        self.grammar = grammar
        self._quoted = _TOKENS.get(self.vocab)
        if self._quoted is None:
            self._quoted = _TOKENS[self.vocab] = _QuotedTokens(self.vocab)
        self._suspects = (None, None)  # (strings seen, _standing_suspects' answer)
        if grammar.item_braces:
            self._quoted.closing_brace(OUTSIDE)  # (made now, before the first mask)

    def _step(self, state: tuple, token: int):
        data = self.vocab.tokens[token]
        return self.grammar.step(state, data) if data else None

    def mask(self) -> np.ndarray:
        words = super().mask()
        state = self._states[-1]
        if state is None:
            return words
        _, _, under_way, seen, _, reading = state
        repeating, suspects, decoded = [], [self._standing_suspects(seen)], None
        # A token may finish an object that repeats an earlier item: where some array or object open has items or
        # names (its own, where an item's object is under way; or where one may begin in the token).
        if self.grammar.item_braces and any(seen):
            suspects.append(self._quoted.closing_brace(reading))
        if under_way is not None:
            held = _allowed(words, self._quoted.with_quotes(3))
            if seen[-1] or len(held):
                done, tail = decoded = _decoded(under_way)
                ends, ended = self._quoted.closing(tail)
                for item in seen[-1]:  # tokens whose first quote ends the string under way as an earlier one
                    if isinstance(item, str) and item.startswith(done):
                        repeating += ends.get(item[len(done):], ())
                # (and those that hold it again whole, further on: stepped)
                suspects.append(np.array([t for t in held.tolist()
                                          if t in ended and done + ended[t] in self._quoted.held(t)], dtype=np.int64))
            names = self.grammar.spellings
            mine = frozenset(names[k] for k in seen[-1] if k in names and names[k].startswith(under_way))
            if mine:  # tokens without a quote, read on inside the key under way: no step needed
                repeating += [t for t in _allowed(words, self._quoted.inside(under_way, mine)).tolist()
                              if self.grammar.within_used_names(state, self.vocab.tokens[t])]
        if self.grammar.bounded:  # (with no items yet too: a token may finish one and begin it again)
            suspects += self._few_endings(state, max(map(len, seen)), decoded)
        repeating += [t for t in _allowed(words, np.concatenate(suspects)).tolist() if self._step(state, t) is None]
        if not repeating:
            return words
        words = words.copy()
        ids = np.array(repeating, dtype=np.int64)
        np.bitwise_and.at(words, ids >> 5, ~(np.uint32(1) << (ids & 31).astype(np.uint32)))
        words.flags.writeable = False
        return words

    def _few_endings(self, state: tuple, most: int, decoded) -> list:
        """The tokens after which a unique item's string under way may end in
        at most ``most`` ways (so, maybe only as items the array has): those
        that begin one at one of their quotes, and those that go on inside the
        one under way (``decoded``: _decoded's answer for it, where the
        innermost array has items)."""
        q, stack, under_way, seen, _, _ = state
        bounded = self.grammar.bounded
        found = [e.beginning(self.index, k, self._quoted, most) for k, e in bounded.items()]
        if under_way is not None and seen[-1] and (first := _next_bytes(*decoded, seen[-1])) is not None:
            alive = self.grammar._names_alive(q, self.language.context(stack))[2] or ()
            components = self.language.lexer.components[q]
            for k in alive:
                tokens = bounded[k].going_on(int(components[k]), self.index, k, len(seen[-1]))
                found.append(tokens if first is True else tokens[first[self.index.bytes[tokens, 0]]])
        return [tokens[self.index.usable[tokens]] for tokens in found]

    def _standing_suspects(self, seen: tuple) -> np.ndarray:
        """The tokens that may hold a string whole that repeats one of ``seen``,
        or hold a string twice, or lead into a key that can only be a name the
        object has: stepped where the grammar allows them. (Kept while the
        strings seen are: most steps add none.)"""
        if self._suspects[0] is not seen:
            used = frozenset().union(*seen)
            found = [self._quoted.enclosing(used)]
            names = self.grammar.spellings
            if names and used:
                found.append(self._quoted.into(frozenset(names[k] for k in used if k in names)))
            self._suspects = (seen, np.concatenate(found))
        return self._suspects[1]


class _Endings:
    """How the strings of a unique item's terminal may still end, per state of
    its DFA: how many strings (each counted once, however its characters are
    spelled: along the bytes of _ONE_SPELLING), and where few, which
    (``spelled``); and the tokens after which few are left."""

    def __init__(self, dfa: DFA):
        self.dfa = dfa
        self.one_spelling = DFA(np.where(_ONE_SPELLING, dfa.transitions, -1).astype(np.int32), dfa.accepting)
        self.counts = ending_counts(self.one_spelling, _MANY)
        self._spelled: dict = {}
        self._beginning = weakref.WeakKeyDictionary()  # _QuotedTokens -> (tokens, their fewest endings), by those
        self._going_on: dict = {}  # (vocabulary, state) -> (a limit, the tokens with at most that many endings,
        # by those, their endings)

    def spelled(self, state: int) -> list:
        """The bytes that end a string from ``state``, one spelling per string
        (at most a few: ``counts[state]`` of them)."""
        found = self._spelled.get(state)
        if found is None:
            found, transitions, counts = [], self.one_spelling.transitions, self.counts
            todo = [(state, b"")]
            while todo:
                s, text = todo.pop()
                if self.dfa.accepting[s]:
                    found.append(text)
                for byte in np.flatnonzero(transitions[s] >= 0).tolist():
                    if counts[transitions[s, byte]]:
                        todo.append((int(transitions[s, byte]), text + bytes([byte])))
            if len(self._spelled) >= _MEMO:
                self._spelled.clear()
            self._spelled[state] = found
        return found

    def beginning(self, index, k: int, quoted: "_QuotedTokens", most: int) -> np.ndarray:
        """The tokens that, read from one of their quotes on, begin a string
        that can end in at most ``most`` ways, and as many more as strings the
        token may have finished before (each may be an item the array has).
        (``index``: the GrammarIndex, where this DFA is terminal ``k``.)"""
        found = self._beginning.get(quoted)
        if found is None:
            terminal, tokens, counts = index.terminal(k), [], []
            for before, (tok, off) in enumerate(quoted.quote_offsets()):
                ended, states = index.walk(tok, off, self.dfa.start, terminal.alive, terminal.trans)[:2]
                # Before that quote, the token may have finished items of the array: the first quote may close
                # the string under way, and every other two hold one.
                tokens.append(ended)
                counts.append(self.counts[states] - (before + 1) // 2)
            tokens, counts = np.concatenate(tokens), np.concatenate(counts)
            by_count = np.lexsort((tokens, counts))
            tokens, counts = tokens[by_count], counts[by_count]
            fewest = np.sort(np.unique(tokens, return_index=True)[1])  # each token at its quote with fewest endings
            found = self._beginning[quoted] = tokens[fewest], counts[fewest]
        tokens, counts = found
        return tokens[: np.searchsorted(counts, most, side="right")]

    def going_on(self, state: int, index, k: int, most: int) -> np.ndarray:
        """The tokens that, read from ``state`` on, leave a string that can end
        in at most ``most`` ways (``index``: the GrammarIndex, where this DFA is
        terminal ``k``)."""
        key = (index.vocab, state)
        found = self._going_on.get(key)
        if found is None or found[0] < most:
            limit = max(2 * most, _FEW_KEPT)
            terminal = index.terminal(k)
            few = terminal.exits(state, index)[3]  # the few that stay alive, where the DFA is narrow (an enum)
            if few is None:
                after = terminal.next_states(state)
                tokens = np.flatnonzero(after >= 0)
                after = after[tokens]
            else:
                tokens, after = index.walk(few, None, state, terminal.alive, terminal.trans)[:2]
            endings = self.counts[after]
            kept = np.flatnonzero(endings <= limit)
            kept = kept[np.argsort(endings[kept], kind="stable")]
            if len(self._going_on) >= _GOING_ON_KEPT:
                self._going_on.clear()
            found = self._going_on[key] = limit, tokens[kept], endings[kept]
        _, tokens, counts = found
        return tokens[: np.searchsorted(counts, most, side="right")]


class _QuotedTokens:
    """A vocabulary's tokens by the quotes they hold (and those that hold a "}")."""

    def __init__(self, vocab):
        self.vocab = vocab
        self.tokens = vocab.tokens
        self.quotes = np.array([t.count(b'"') for t in self.tokens], dtype=np.int64)
        self._with: dict = {}
        self._closing: dict = {}
        self._enclosed: dict | None = None  # a string a token may hold whole -> the tokens (enclosing)
        self._held: dict = {}  # token -> the strings it may hold whole
        self._enclosing: dict = {}
        self._ending: dict | None = None  # a token's bytes from its last quote on -> the tokens
        self._into: dict = {}
        self._inside: dict = {}
        self._quote_offsets = None
        self._closing_brace = None

    def closing_brace(self, reading: int) -> np.ndarray:
        """The tokens with a "}" outside a string, read from ``reading``: outside
        a string (OUTSIDE), inside one (INSIDE) or after a backslash there
        (ESCAPED). Only those can finish an object."""
        if self._closing_brace is None:
            braced = [t for t, token in enumerate(self.tokens) if b"}" in token]
            self._closing_brace = [
                np.array([t for t in braced if _reading(self.tokens[t], start, stop=0x7D) is None], dtype=np.int64)
                for start in (OUTSIDE, INSIDE, ESCAPED)]
        return self._closing_brace[reading]

    def quote_offsets(self) -> list:
        """Per n, (the tokens with over n quotes, where their quote after the
        first n is)."""
        if self._quote_offsets is None:
            tokens = self.with_quotes(1)
            data, _ = padded_bytes([self.tokens[t] for t in tokens.tolist()])
            row, at = np.nonzero(data == 0x22)  # (row by row, left to right)
            nth = np.arange(len(row)) - np.searchsorted(row, row)
            self._quote_offsets = [(tokens[row[nth == n]], at[nth == n]) for n in range(int(nth.max(initial=-1)) + 1)]
        return self._quote_offsets

    def with_quotes(self, n: int) -> np.ndarray:
        """The tokens with at least ``n`` quotes."""
        if n not in self._with:
            self._with[n] = np.flatnonzero(self.quotes >= n)
        return self._with[n]

    def closing(self, tail: bytes) -> tuple:
        """For a string's text under way that ends in ``tail`` (an unfinished
        character, or nothing): what the tokens that close the string add to
        it (their bytes before the quote that does), decoded -> those tokens,
        and token -> that."""
        found = self._closing.get(tail)
        if found is None:
            ends, ended = {}, {}
            for t in np.flatnonzero(self.quotes >= 1).tolist():
                text = tail + self.tokens[t]
                end = next(iter(_quotes(text)), None)
                if end is None or end < len(tail):  # (the string goes on; a quote in the tail is escaped)
                    continue
                try:
                    ended[t] = _string_text(text[:end])
                except ValueError:  # bytes no string allows
                    continue
                ends.setdefault(ended[t], []).append(t)
            found = self._closing[tail] = ends, ended
        return found

    def enclosing(self, strings: frozenset) -> np.ndarray:
        """The tokens that may hold one of ``strings`` whole, or a string twice,
        between quotes that no backslash escapes (see ``held``)."""
        if self._enclosed is None:
            self._enclosed = {None: []}  # None: the tokens that may hold a string twice
            for t in np.flatnonzero(self.quotes >= 2).tolist():
                for string in self.held(t):
                    self._enclosed.setdefault(string, []).append(t)
                if self.quotes[t] >= 4 and _holds_twice(self.tokens[t]):
                    self._enclosed[None].append(t)
        found = self._enclosing.get(strings)
        if found is None:
            found = self._enclosing[strings] = np.array(
                sorted({t for s in (None, *strings) for t in self._enclosed.get(s, ())}), dtype=np.int64)
            if len(self._enclosing) > _MEMO:
                self._enclosing.clear()
        return found

    def held(self, token: int) -> frozenset:
        """The strings that token ``token`` may hold whole: between two of its
        quotes that no backslash escapes (read as it is, and after a backslash
        before it), decoded."""
        found = self._held.get(token)
        if found is None:
            found = set()
            text = self.tokens[token]
            for escaped in (False, True):
                for a, b in itertools.pairwise(_quotes(text, escaped)):
                    try:
                        found.add(_string_text(text[a + 1:b]))
                    except ValueError:  # no string's text
                        pass
            found = self._held[token] = frozenset(found)
        return found

    def into(self, spellings: frozenset) -> np.ndarray:
        """The tokens with a quote whose bytes from their last one on are a
        prefix of one of ``spellings`` with a character or more but short of its
        closing quote (a key begun as a name it may only be)."""
        found = self._into.get(spellings)
        if found is None:
            if self._ending is None:
                self._ending = {}
                for t in np.flatnonzero(self.quotes >= 1).tolist():
                    token = self.tokens[t]
                    self._ending.setdefault(token[token.rindex(b'"'):], []).append(t)
            ids = {t for s in spellings for j in range(2, len(s)) for t in self._ending.get(s[:j], ())}
            found = self._into[spellings] = np.array(sorted(ids), dtype=np.int64)
            if len(self._into) > _MEMO:
                self._into.clear()
        return found

    def inside(self, under_way: bytes, spellings: frozenset) -> np.ndarray:
        """The tokens without a quote that take ``under_way`` to a longer
        prefix of one of ``spellings`` (short of its closing quote)."""
        key = (under_way, spellings)
        found = self._inside.get(key)
        if found is None:
            found = self._inside[key] = np.array(
                sorted({t for s in spellings for t in self._spelling_a_prefix(s[len(under_way):-1])}), dtype=np.int64)
            if len(self._inside) > _MEMO:
                self._inside.clear()
        return found

    def _spelling_a_prefix(self, text: bytes) -> list:
        """The tokens whose bytes are a prefix of ``text`` (read off the
        vocabulary's trie, along ``text``)."""
        trie = self.vocab.trie
        tokens, starts = trie.tokens_by_node
        found, low, high = [], trie.level_start[0], trie.level_start[1]
        for byte in text:
            node = low + int(np.searchsorted(trie.byte[low:high], byte))
            if node >= high or trie.byte[node] != byte:
                break
            found += tokens[starts[node]:starts[node + 1]].tolist()
            low, high = trie.child_start[node], trie.child_start[node + 1]
        return found


def _endings(dfa: DFA) -> "_Endings":
    """The ``_Endings`` of an automaton, kept by its digest: a schema's items
    are counted when it compiles, and its terminal's endings read when it runs."""
    found = _ENDINGS.get(dfa.digest)
    if found is None:
        if len(_ENDINGS) >= _ENDINGS_KEPT:
            _ENDINGS.clear()
        found = _ENDINGS[dfa.digest] = _Endings(dfa)
    return found


def strings_in(language: DFA) -> int | None:
    """How many strings the JSON texts of ``language`` spell (each counted
    once, however its characters are spelled), or None where there are
    infinitely many, or too many for any array to hold (_MANY or more)."""
    if not language.finite:
        return None
    count = int(_endings(language).counts[language.start])
    return None if count >= _MANY else count


def _next_bytes(done: str, tail: bytes, used: frozenset):
    """The bytes that may go on with the string under way (``_decoded``'s
    ``done`` and ``tail``) towards one of ``used`` (256 bools; True: any,
    where it ends in an unfinished character), or None where no string of
    ``used`` begins with it."""
    if tail:
        return True
    first = np.zeros(256, dtype=bool)
    for string in used:
        if isinstance(string, str) and string.startswith(done):
            rest = string[len(done):]
            first[[rest.encode()[0], 0x5C] if rest else 0x22] = True  # (its raw first byte, or an escape's)
    return first if first.any() else None


OUTSIDE, INSIDE, ESCAPED = range(3)  # where JSON text is read: outside a string, inside, after a backslash inside


def _reading(text: bytes, reading: int = OUTSIDE, stop: int | None = None):
    """Where JSON ``text``, read from ``reading``, leaves its reader (OUTSIDE,
    INSIDE or ESCAPED); or None where it has the byte ``stop`` outside a string."""
    if reading == OUTSIDE and b'"' not in text:
        return None if stop is not None and stop in text else OUTSIDE
    for byte in text:
        if reading == ESCAPED:
            reading = INSIDE
        elif byte == 0x22:
            reading = OUTSIDE if reading == INSIDE else INSIDE
        elif reading == INSIDE:
            if byte == 0x5C:
                reading = ESCAPED
        elif byte == stop:
            return None
    return reading


def _joined(pieces) -> bytes:
    """The bytes of ``pieces``: (earlier pieces or None, the last bytes), so
    that a step adds its bytes to an object under way without copying them."""
    found = []
    while pieces is not None:
        pieces, last = pieces
        found.append(last)
    return b"".join(reversed(found))


def _value_key(value):
    """A key equal for equal JSON values (1 and 1.0, objects whatever their
    order), hashable; a string's is the string itself. (Numbers read as
    Decimal compare as numbers, however long: 1e23 is 100000000000000000000000,
    1e400 is not 2e400. An object that repeats a name is read as Python's
    json reads it: the last value counts.)"""
    if isinstance(value, dict):
        return "object", frozenset((name, _value_key(v)) for name, v in value.items())
    if isinstance(value, list):
        return "array", tuple(map(_value_key, value))
    if isinstance(value, bool):  # (not equal to 1 and 0)
        return "boolean", value
    return value


def _allowed(words: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """The tokens of ``ids`` whose bits are set in the packed mask ``words``."""
    return ids[(words[ids >> 5] >> (ids & 31) & 1).astype(bool)]


def _only_used(names: frozenset | None, seen: tuple) -> bool:
    """Whether ``names`` (_names_alive's) are all names the innermost object has."""
    return bool(seen[-1]) and names is not None and names <= seen[-1]


def _string_text(text: bytes) -> str:
    """The string that ``text`` spells between quotes (ValueError where none does)."""
    if b"\\" not in text and text.isascii() and text.isalnum():  # (most of them: no need to parse)
        return text.decode()
    return json.loads(b'"' + text + b'"')


def _holds_twice(token: bytes) -> bool:
    """Whether ``token`` may hold two equal strings whole (between its first and
    second quote and its third and fourth, say, or its second and third and
    fourth and fifth: read as it is, and after a backslash before it)."""
    for escaped in (False, True):
        quotes = _quotes(token, escaped)
        for first in (0, 1):
            pieces = [token[a + 1:b] for a, b in zip(quotes[first::2], quotes[first + 1::2])]
            try:
                strings = [_string_text(piece) for piece in pieces]
            except ValueError:  # (a piece no string's text is never one: the token is never read so)
                continue
            if len(set(strings)) < len(strings):
                return True
    return False


def _quotes(text: bytes, escaped: bool = False) -> list:
    """Where ``text`` has a quote that no backslash escapes (``escaped``: its
    first byte is escaped)."""
    found = []
    for i, byte in enumerate(text):
        if escaped:
            escaped = False
        elif byte == 0x5C:  # a backslash
            escaped = True
        elif byte == 0x22:
            found.append(i)
    return found


def _decoded(under_way: bytes) -> tuple:
    """(the characters a string's text under way has finished, the bytes of
    the one it has not: an escape or a UTF-8 sequence cut short, or a
    surrogate pair's first half) from its opening quote on."""
    text = under_way[1:]
    for cut in range(min(_ESCAPE_TAIL, len(text)) + 1):
        try:
            done = _string_text(text[:len(text) - cut])
        except ValueError:
            continue
        if done and 0xD800 <= ord(done[-1]) <= 0xDBFF:  # a pair's first half: wait for the second
            continue
        return done, text[len(text) - cut:]
    raise ConstrainedError(f"cannot read the string under way {under_way!r}")
