"""mlx-lm's generate and stream_generate, with a constraint."""

import mlx_lm


def stream_generate(model, tokenizer, prompt, constraint, **kwargs):
    """mlx_lm.stream_generate whose output is constrained; other keyword arguments
    (max_tokens, sampler, logits_processors, ...) are passed through."""
    processors = list(kwargs.pop("logits_processors", None) or [])
    processors.append(constraint.processor(tokenizer))
    yield from mlx_lm.stream_generate(model, tokenizer, prompt, logits_processors=processors, **kwargs)


def generate(model, tokenizer, prompt, constraint, **kwargs) -> str:
    """mlx_lm.generate whose output is constrained: returns the generated text."""
    return "".join(r.text for r in stream_generate(model, tokenizer, prompt, constraint, **kwargs))
