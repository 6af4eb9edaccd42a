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


class Compiled:
    """What every compiled language offers: a token index per vocabulary (built
    once), matchers over it, and mlx-lm processors. Subclasses say how to build
    the index and the matcher."""

    def __init__(self):
        self._indexes: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def index(self, tokenizer):
        """The token index for ``tokenizer`` (built once per vocabulary)."""
        vocab = vocabulary(tokenizer)
        index = self._indexes.get(vocab)
        if index is None:
            index = self._indexes[vocab] = self._new_index(vocab)
        return index

    def matcher(self, tokenizer):
        """A matcher following one sequence."""
        return self._new_matcher(self.index(tokenizer))

    def processor(self, tokenizer) -> LogitsProcessor:
        """An mlx-lm logits processor for one generation."""
        return LogitsProcessor(self.matcher(tokenizer))


class Constraint(Compiled):
    """A compiled regular language. ``matcher(tokenizer)`` follows one sequence;
    ``processor(tokenizer)`` is an mlx-lm logits processor for one generation."""

    def __init__(self, dfa: DFA, description: str):
        super().__init__()
        self.dfa = dfa
        self.description = description

    def __repr__(self) -> str:
        return f"<Constraint {self.description} ({self.dfa.n_states} states)>"

    def _new_index(self, vocab: Vocabulary) -> TokenIndex:
        return TokenIndex(self.dfa, vocab)

    def _new_matcher(self, index: TokenIndex) -> Matcher:
        return Matcher(index)

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
