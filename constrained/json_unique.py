"""Strings that must differ from the others of their array or object:
uniqueItems over strings, and the undeclared property names of an object
whose members are counted (minProperties). They are lexemes of terminals the
schema compiler marks distinct (json_schema_rules' ``unique_value`` and
``key_terminal``), and the matcher keeps those of each array and object,
decoded, so that no token may complete one equal to an earlier one there.

No grammar can do this (the strings are unbounded), so the state of a
matcher here is the grammar's (lexer state, parser stack) with two more
parts: the bytes read of the distinct lexeme under way (None outside one) and
the strings so far of each array and object open, innermost last ("[" and
"{" lexemes open one, "]" and "}" close it).

The mask is the grammar's, less the tokens that would complete a repeated
string. Only tokens with a quote can complete one: a token with one quote
completes the string under way with the bytes before its quote, looked up by
what they decode to (``_QuotedTokens.closing``); the few with more quotes
(230 of 128,000 in Llama 3) are stepped through. A string always has another
ending, since every unfinished lexeme of a distinct terminal has infinitely
many (checked when the schema compiles), so this leaves no dead end.
"""

import json
import weakref

import numpy as np

from .errors import ConstrainedError
from .grammar import Grammar, GrammarMatcher

_ESCAPE_TAIL = 11  # bytes an unfinished character may take at the end of a string's text: "\ud83d\ude0"
_TOKENS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # vocabulary -> _QuotedTokens


class DistinctItemsGrammar(Grammar):
    """A JSON Schema grammar whose arrays and objects must not repeat a lexeme
    of the ``distinct`` terminals (names); ``opening`` and ``closing`` name the
    terminals of "[" and "{", and of "]" and "}"."""

    def __init__(self, grammar: Grammar, distinct: frozenset, opening: tuple, closing: tuple):
        super().__init__(grammar.lark, grammar.language, grammar.description, grammar._lark_lexes)
        index = {name: k for k, name in enumerate(self.language.names)}
        self.distinct = frozenset(index[name] for name in distinct)
        self.opening = frozenset(index[name] for name in opening if name in index)
        self.closing = frozenset(index[name] for name in closing if name in index)

    def _new_matcher(self, index) -> "DistinctItemsMatcher":
        return DistinctItemsMatcher(index, self)

    def start(self) -> tuple:
        return (*self.language.start(), None, (frozenset(),))

    def step(self, state: tuple, data: bytes):
        """The state after ``data`` (see the module's doc), or None where the
        grammar refuses it or it repeats an item."""
        q, stack, under_way, seen = state
        emitted: list = []
        after = self.language.step(q, stack, data, emitted)
        if after is None:
            return None
        start, before = 0, under_way or b""
        for term, end in emitted:
            if term in self.opening:
                seen = (*seen, frozenset())
            elif term in self.closing:
                seen = seen[:-1]
            elif term in self.distinct:
                item = json.loads(before + data[start:end])
                if item in seen[-1]:
                    return None
                seen = (*seen[:-1], seen[-1] | {item})
            start, before = end, b""
        q, stack = after
        read = before + data[start:]
        inside = read and any(k in self.distinct for k in self.language.lexer.alive_terminals[q])
        return q, stack, read if inside else None, seen

    def matches(self, text: str) -> bool:
        state = self.step(self.start(), text.encode())
        return state is not None and self.language.eos_ok(state[0], state[1])


class DistinctItemsMatcher(GrammarMatcher):
    """GrammarMatcher over the states of DistinctItemsGrammar.step."""

    refused = ("by the grammar, or repeats a string that must be unique (an item of a uniqueItems array, or an "
               "undeclared property name where members are counted)")

    def __init__(self, index, grammar: DistinctItemsGrammar):
        super().__init__(index, grammar.start())
        self.grammar = grammar
        self._quoted = _TOKENS.get(self.vocab)
        if self._quoted is None:
            self._quoted = _TOKENS[self.vocab] = _QuotedTokens(self.vocab.tokens)

    def _step(self, state: tuple, token: int):
        data = self.vocab.tokens[token]
        return self.grammar.step(state, data) if data else None

    def mask(self) -> np.ndarray:
        words = super().mask()
        state = self._states[-1]
        if state is None:
            return words
        _, _, under_way, seen = state
        earlier = seen[-1]
        # a token repeats a string only if it completes one, and two it completes may be equal
        quotes = 2 if any(seen) else 3 if under_way is not None else 4
        stepped = self._quoted.with_quotes(quotes)
        stepped = stepped[(words[stepped >> 5] >> (stepped & 31) & 1).astype(bool)]
        repeating = [t for t in stepped.tolist() if self._step(state, t) is None]
        if under_way is not None and earlier:
            done, tail = _decoded(under_way)
            closing = self._quoted.closing(tail)
            for item in earlier:
                if item.startswith(done):
                    repeating += closing.get(item[len(done):], ())
        if not repeating:
            return words
        words = words.copy()
        ids = np.array(repeating, dtype=np.int64)
        np.bitwise_and.at(words, ids >> 5, ~(np.uint32(1) << (ids & 31).astype(np.uint32)))
        words.flags.writeable = False
        return words


class _QuotedTokens:
    """A vocabulary's tokens by the quotes they hold."""

    def __init__(self, tokens: list):
        self.tokens = tokens
        self.quotes = np.array([t.count(b'"') for t in tokens], dtype=np.int64)
        self._with: dict = {}
        self._closing: dict = {}

    def with_quotes(self, n: int) -> np.ndarray:
        """The tokens with at least ``n`` quotes."""
        if n not in self._with:
            self._with[n] = np.flatnonzero(self.quotes >= n)
        return self._with[n]

    def closing(self, tail: bytes) -> dict:
        """For a string's text under way that ends in ``tail`` (an unfinished
        character, or nothing): what the tokens with one quote that close the
        string add to it, decoded -> those tokens."""
        found = self._closing.get(tail)
        if found is None:
            found = self._closing[tail] = {}
            for t in np.flatnonzero(self.quotes == 1).tolist():
                token = self.tokens[t]
                try:
                    rest = json.loads(b'"' + tail + token[:token.index(b'"')] + b'"')
                except ValueError:  # an escaped quote, or bytes no string allows
                    continue
                found.setdefault(rest, []).append(t)
        return found


def _decoded(under_way: bytes) -> tuple:
    """(the characters a string's text under way has finished, the bytes of
    the one it has not: an escape or a UTF-8 sequence cut short, or a
    surrogate pair's first half) from its opening quote on."""
    text = under_way[1:]
    for cut in range(min(_ESCAPE_TAIL, len(text)) + 1):
        try:
            done = json.loads(b'"' + text[:len(text) - cut] + b'"')
        except ValueError:
            continue
        if done and 0xD800 <= ord(done[-1]) <= 0xDBFF:  # a pair's first half: wait for the second
            continue
        return done, text[len(text) - cut:]
    raise ConstrainedError(f"cannot read the string under way {under_way!r}")
