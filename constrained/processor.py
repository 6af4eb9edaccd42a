"""The mlx-lm logits processor: ``processor(tokens, logits) -> logits``.

Each step it catches the matcher up with the tokens generated since the last
call, then adds the current state's mask as a cached 0 / -inf vector (adding a
cached vector measured faster than ``mx.where`` on the CPU; see
benchmarks/RESULTS.md). The vector is built once per distinct mask and kept
with the constraint's index, shared by every generation, so a step does no
vocabulary-sized conversion.
"""

import mlx.core as mx
import numpy as np

from .errors import ConstrainedError

MAX_CACHED_BIASES = 128  # per constraint and vocabulary: 0.5 MB each at 128k tokens


class LogitsProcessor:
    """Constrains one generation. The first call marks where the output starts
    (``tokens`` may hold the whole prompt or only its uncached tail); each later
    call consumes the tokens appended since, or rolls back when ``tokens`` got
    shorter (speculative decoding). Use a new processor for each generation."""

    def __init__(self, matcher):
        if not matcher.vocab.eos_ids:
            raise ConstrainedError("the tokenizer declares no EOS token, so a constrained output could never end; pass eos_ids=")
        self.matcher = matcher
        self._start: int | None = None

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
        mask = self.matcher.mask()  # cached per state, so the same array object recurs
        cache = self.matcher.bias_cache
        key = (id(mask), logits.shape[-1], logits.dtype)
        hit = cache.get(key)
        if hit is not None and hit[0] is mask:
            cache.move_to_end(key)
            return hit[1]
        width = logits.shape[-1]
        bits = np.unpackbits(mask.view(np.uint8), count=min(width, self.matcher.vocab.size), bitorder="little")
        if not bits.any():
            raise ConstrainedError("no token of the model's output width is allowed here")
        bias = np.full(width, -np.inf, dtype=np.float32)
        bias[: len(bits)][bits.view(bool)] = 0.0
        vector = mx.array(bias).astype(logits.dtype)
        cache[key] = (mask, vector)
        if len(cache) > MAX_CACHED_BIASES:
            cache.popitem(last=False)
        return vector
