import functools
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

import constrained
from constrained import models

# The suite's budget on 2 cores: 40 examples a property, no per-example deadline
# (the machine is shared and noisy). By default every run replays the same
# examples (derandomize), so that neither CI nor a fresh clone depends on luck;
# HYPOTHESIS_PROFILE=dev draws new ones, HYPOTHESIS_PROFILE=thorough searches harder.
_quick = dict(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("dev", **_quick)
settings.register_profile("ci", derandomize=True, **_quick)
settings.register_profile("thorough", max_examples=500, deadline=None, suppress_health_check=list(HealthCheck))
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

VOCABULARIES = ["smollm2", "llama3", "llama2"]
GRAMMARS = Path(__file__).resolve().parent.parent / "grammars"


@pytest.fixture(scope="session")
def tokenizers():
    """name -> mlx-lm TokenizerWrapper, loaded once per session."""
    cache = {}

    def get(name):
        if name not in cache:
            cache[name] = models.tokenizer(name)
        return cache[name]

    return get


@pytest.fixture(scope="session", params=VOCABULARIES)
def tokenizer(request, tokenizers):
    return tokenizers(request.param)


@pytest.fixture(scope="session")
def smollm2():
    return models.smollm2()


def encode_exact(tokenizer, text: str) -> list[int] | None:
    """Token ids whose bytes spell exactly ``text``: the tokenizer's own encoding,
    without the leading space SentencePiece adds, and without special tokens.
    None when the vocabulary cannot spell ``text`` (SmolLM2 lacks some bytes)."""
    vocab = constrained.vocabulary(tokenizer)
    inner = tokenizer._tokenizer
    ids = inner.encode(text, add_special_tokens=False)
    if b"".join(vocab.tokens[i] for i in ids) == text.encode():
        return ids
    # SentencePiece prepends "▁" to the text: encode after a newline and drop it.
    ids = inner.encode("\n" + text, add_special_tokens=False)
    spelled = b"".join(vocab.tokens[i] for i in ids)
    for cut in range(1, len(ids) + 1):
        head = b"".join(vocab.tokens[i] for i in ids[:cut])
        if head.endswith(b"\n") and spelled[len(head):] == text.encode():
            return ids[cut:]
    # SentencePiece reads a literal "▁" as a space, so no encoding of it spells it.
    assert not vocab.spells_every_byte or "\u2581" in text, f"cannot encode {text!r} exactly: {ids}"
    return None


@functools.cache
def compiled(name: str) -> constrained.Grammar:
    """The shipped grammar grammars/<name>.lark, compiled once per session."""
    return constrained.grammar(GRAMMARS / f"{name}.lark")


def chat(tokenizer, question: str, system: str | None = None, examples=()) -> str:
    """The chat-template prompt asking ``question``, after an optional system
    message and example (question, answer) exchanges."""
    messages = [{"role": "system", "content": system}] if system else []
    for asked, answered in examples:
        messages += [{"role": "user", "content": asked}, {"role": "assistant", "content": answered}]
    messages.append({"role": "user", "content": question})
    return tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)


def generated_text(constraint, tokenizer, responses, max_tokens: int) -> str:
    """The text of a constrained generation's ``responses`` (mlx-lm's), after
    checking that it ended with EOS and that every token was allowed where it came."""
    text = "".join(r.text for r in responses)
    assert responses[-1].finish_reason == "stop", f"no EOS within {max_tokens} tokens: {text!r}"
    matcher = constraint.matcher(tokenizer)
    for r in responses:  # the last token is the EOS
        matcher.advance(r.token)  # raises if the token was not allowed there
    assert matcher.is_finished() and matcher.text() == text
    return text
