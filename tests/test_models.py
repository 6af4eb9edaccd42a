"""Models and tokenizers built from GGUF files (fetched into the cache on first use)."""

import functools

import mlx.nn as nn
import mlx_lm
import pytest

from constrained import gguf, models
from constrained.errors import ConstrainedError

VOCABS = ["llama3", "qwen2", "llama2", "gemma"]


@functools.cache
def tokenizer(name):
    return models.tokenizer(name)


def reference_cases(name):
    """llama.cpp's test strings for the vocabulary `name` and the token ids it expects (no BOS)."""
    path = models.gguf_path(name)
    separator = "\n__ggml_vocab_test__\n"
    texts = path.with_name(path.name + ".inp").read_bytes().decode().removesuffix(separator).split(separator)
    lines = path.with_name(path.name + ".out").read_text().splitlines()
    ids = [[int(i) for i in line.split()] for line in lines]
    return list(zip(texts, ids, strict=True))


@pytest.mark.parametrize("name", VOCABS)
def test_llama_cpp_reference_ids(name):
    tok = tokenizer(name)
    cases = reference_cases(name)
    assert len(cases) == 46
    for text, expected in cases:
        ids = tok.encode(text, add_special_tokens=False)
        assert ids == expected, text
        assert tok.decode(ids) == text


@pytest.mark.parametrize(("name", "first"), [("llama3", 128000), ("llama2", 1), ("gemma", 2), ("qwen2", 9707)])
def test_bos_follows_llama_cpp(name, first):
    assert tokenizer(name).encode("Hello")[0] == first


def test_unknown_name():
    with pytest.raises(ConstrainedError, match="gpt5"):
        models.tokenizer("gpt5")


def test_unknown_gguf_tokenizer_model():
    with pytest.raises(ConstrainedError, match="'rwkv'"):
        gguf.tokenizer_from_metadata({"tokenizer.ggml.model": "rwkv"})


@pytest.fixture(scope="module")
def smollm2():
    return models.smollm2()


def test_smollm2_is_quantized(smollm2):
    model, _ = smollm2
    assert isinstance(model.model.layers[0].self_attn.q_proj, nn.QuantizedLinear)
    assert model.model.layers[0].self_attn.q_proj.bits == 4
    assert model.args.tie_word_embeddings


def test_smollm2_answers(smollm2):
    model, tok = smollm2
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    prompt = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert "Paris" in mlx_lm.generate(model, tok, prompt, max_tokens=20)
