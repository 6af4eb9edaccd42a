"""Constraints: a language (a regular expression, a choice of strings) compiled
once, then matched against any tokenizer's vocabulary."""

import re
import weakref
from functools import lru_cache

from .dfa import DFA, from_regex
from .errors import ConstrainedError
from .index import TokenIndex
from .matcher import Matcher
from .processor import LogitsProcessor
from .vocab import Vocabulary, vocabulary


class Constraint:
    """A compiled language. ``matcher(tokenizer)`` follows one sequence;
    ``processor(tokenizer)`` is an mlx-lm logits processor for one generation."""

    def __init__(self, dfa: DFA, description: str):
        self.dfa = dfa
        self.description = description
        self._indexes: "weakref.WeakKeyDictionary[Vocabulary, TokenIndex]" = weakref.WeakKeyDictionary()

    def __repr__(self) -> str:
        return f"<Constraint {self.description} ({self.dfa.n_states} states)>"

    def index(self, tokenizer) -> TokenIndex:
        """The token index for ``tokenizer`` (built once per vocabulary)."""
        vocab = vocabulary(tokenizer)
        index = self._indexes.get(vocab)
        if index is None:
            index = self._indexes[vocab] = TokenIndex(self.dfa, vocab)
        return index

    def matcher(self, tokenizer) -> Matcher:
        return Matcher(self.index(tokenizer))

    def processor(self, tokenizer) -> LogitsProcessor:
        return LogitsProcessor(self.matcher(tokenizer))

    def matches(self, text: str) -> bool:
        """Whether ``text`` is in the language."""
        return self.dfa.matches(text.encode())


def regex(pattern: str) -> Constraint:
    """Output that fully matches ``pattern`` (Python syntax; ``\\d``, ``\\w``, ``\\s``
    are ASCII; anchors, lookarounds and backreferences are refused). The same
    pattern gives the same Constraint, so its token indexes are built once."""
    if not isinstance(pattern, str):
        raise ConstrainedError(f"a regular expression is a str, got {type(pattern).__name__}")
    return _regex(pattern)


@lru_cache(maxsize=256)
def _regex(pattern: str) -> Constraint:
    return Constraint(from_regex(pattern), f"regex {pattern!r}")


def choice(options) -> Constraint:
    """Output that is exactly one of ``options`` (strings, taken literally)."""
    options = list(options) if not isinstance(options, str) else None
    if not options or not all(isinstance(o, str) for o in options):
        raise ConstrainedError("choice() takes a non-empty list of strings")
    return regex("(?:" + "|".join(re.escape(o) for o in sorted(set(options), key=len, reverse=True)) + ")")
