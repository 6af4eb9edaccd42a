"""A matcher follows one sequence through a constraint: which tokens may come
next, advancing by the token chosen, EOS only once the output is complete, and
rollback for speculative decoding."""

import numpy as np

from .errors import ConstrainedError
from .index import FINISHED, TokenIndex


class TokenHistory:
    """What every matcher shares: the tokens consumed and the state after each,
    so that rollback is popping. Subclasses define advance() and the masks."""

    def __init__(self, index, start_state):
        self.index = index
        self.vocab = index.vocab
        self._states = [start_state]
        self._tokens: list[int] = []

    @property
    def position(self) -> int:
        """How many tokens have been consumed."""
        return len(self._tokens)

    @property
    def bias_cache(self):
        """Where a logits processor keeps its MLX mask vectors (shared per index)."""
        return self.index.bias_cache

    def allowed(self) -> np.ndarray:
        """Boolean mask over the vocabulary of the tokens allowed next."""
        bits = np.unpackbits(self.mask().view(np.uint8), bitorder="little")
        return bits[: self.vocab.size].view(bool)

    def is_allowed(self, token: int) -> bool:
        token = self.vocab.check_token(token)
        return bool((int(self.mask()[token >> 5]) >> (token & 31)) & 1)

    def accepts(self, tokens) -> bool:
        """Whether ``tokens`` can all be consumed from here; the matcher is left as it was."""
        start = self.position
        try:
            for t in tokens:
                self.advance(t)
            return True
        except ConstrainedError:
            return False
        finally:
            self.rollback(self.position - start)

    def rollback(self, n: int = 1) -> None:
        """Forget the last ``n`` tokens."""
        if not isinstance(n, int) or not 0 <= n <= self.position:
            raise ConstrainedError(f"cannot roll back {n} tokens: {self.position} have been consumed")
        if n:
            del self._states[-n:]
            del self._tokens[-n:]

    def reset(self) -> None:
        self.rollback(self.position)

    def text(self) -> str:
        """The output consumed so far, decoded."""
        return b"".join(self.vocab.tokens[t] for t in self._tokens).decode(errors="replace")


class Matcher(TokenHistory):
    """One sequence's position in a constraint (a DFA over a vocabulary)."""

    def __init__(self, index: TokenIndex):
        super().__init__(index, index.dfa.start)

    @property
    def state(self) -> int:
        return self._states[-1]

    def is_finished(self) -> bool:
        """Whether EOS has been consumed."""
        return self.state == FINISHED

    def is_accepting(self) -> bool:
        """Whether the output so far is complete, so that EOS may come now."""
        return self.is_finished() or bool(self.index.dfa.accepting[self.state])

    def mask(self) -> np.ndarray:
        """The tokens allowed next as packed bits (see TokenIndex.mask)."""
        return self.index.mask(self.state)

    def advance(self, token: int) -> None:
        """Consume ``token``; a token the constraint does not allow raises ConstrainedError."""
        token = self.vocab.check_token(token)
        state = self.state
        if token in self.vocab.eos_ids:
            if state != FINISHED and not self.index.dfa.accepting[state]:
                raise ConstrainedError(f"EOS (token {token}) is not allowed after {self.text()!r}: the output is not complete")
            next_state = FINISHED
        elif state == FINISHED:
            raise ConstrainedError(f"cannot advance by token {token} after EOS: the output is complete")
        else:
            next_state = self.index.next_state(state, token)
            if next_state < 0:
                raise ConstrainedError(f"token {token} ({self.vocab.tokens[token]!r}) is not allowed after {self.text()!r}")
        self._states.append(next_state)
        self._tokens.append(token)

    def forced(self) -> bytes:
        """The bytes that must come next whatever is chosen (empty when there is a choice)."""
        return b"" if self.is_finished() else self.index.dfa.forced(self.state)
