"""The mlx-lm logits processor: ``processor(tokens, logits) -> logits``.

Each step it catches the matcher up with the tokens generated since the last
call, then adds the current state's mask as a cached 0 / -inf vector (adding a
cached vector measured faster than ``mx.where`` on the CPU; see
benchmarks/RESULTS.md). The mask is built in MLX once per distinct state, so a
step does no vocabulary-sized conversion.
"""

from collections import OrderedDict

import mlx.core as mx
import numpy as np

from .errors import ConstrainedError


class LogitsProcessor:
    """Constrains one generation. The first call marks where the output starts
    (``tokens`` may hold the whole prompt or only its uncached tail); each later
    call consumes the tokens appended since, or rolls back when ``tokens`` got
    shorter (speculative decoding). Use a new processor for each generation."""

    def __init__(self, matcher, max_cached_masks: int = 256):
        if not matcher.vocab.eos_ids:
            raise ConstrainedError("the tokenizer declares no EOS token, so a constrained output could never end; pass eos_ids=")
        self.matcher = matcher
        self._start: int | None = None
        self._biases: OrderedDict[int, tuple[np.ndarray, mx.array]] = OrderedDict()
        self._max_cached = max_cached_masks

    def __call__(self, tokens: mx.array, logits: mx.array) -> mx.array:
        self._catch_up(tokens)
        return logits + self._bias(logits)

    def _catch_up(self, tokens: mx.array) -> None:
        length = tokens.shape[-1]
        if self._start is None:
            self._start = length
            return
        produced = length - self._start
        if produced < 0:
            raise ConstrainedError(
                "the token sequence is shorter than when this processor started: use a new processor for each generation"
            )
        behind = produced - self.matcher.position
        if behind > 0:
            for token in tokens.reshape(-1)[-behind:].tolist():
                self.matcher.advance(token)
        elif behind < 0:
            self.matcher.rollback(-behind)

    def _bias(self, logits: mx.array) -> mx.array:
        """The current mask as an additive 0 / -inf vector of the logits' width and dtype."""
        allowed = self.matcher.allowed()
        key = id(allowed)  # masks are cached per state, so the same object recurs
        hit = self._biases.get(key)
        if hit is not None and hit[0] is allowed and hit[1].dtype == logits.dtype:
            self._biases.move_to_end(key)
            return hit[1]
        width = logits.shape[-1]
        bias = np.full(width, -np.inf, dtype=np.float32)
        n = min(width, len(allowed))
        bias[:n][allowed[:n]] = 0.0
        if not np.isfinite(bias).any():
            raise ConstrainedError("no token of the model's output width is allowed here")
        vector = mx.array(bias).astype(logits.dtype)
        self._biases[key] = (allowed, vector)
        if len(self._biases) > self._max_cached:
            self._biases.popitem(last=False)
        return vector
