"""The mlx-lm logits processor, driven the way mlx-lm drives it."""

import re

import mlx.core as mx
import numpy as np
import pytest
from mlx_lm.sample_utils import make_logits_processors, make_sampler

import constrained
from constrained import ConstrainedError

PATTERN = r"[0-9]{1,3}(\.[0-9]{1,2})?"


@pytest.fixture(scope="module")
def llama3(tokenizers):
    return tokenizers("llama3")


def run(processors, prompt, width, steps=30, seed=0, temp=1.0, eos=128001):
    """A generation loop like mlx_lm.generate_step's: random logits stand in for
    the model; the processors see every token so far, prompt included."""
    mx.random.seed(seed)
    sampler = make_sampler(temp=temp, top_p=0.95)
    tokens, out = mx.array(prompt, dtype=mx.int32), []
    for _ in range(steps):
        logits = mx.random.normal((1, width)) * 4
        for processor in processors:
            logits = processor(tokens, logits)
        assert mx.isfinite(logits).any().item(), "every token masked"
        y = sampler(logits - mx.logsumexp(logits, keepdims=True))
        out.append(y.item())
        tokens = mx.concatenate([tokens, y])
        if out[-1] == eos:
            break
    return out


def text_of(tokens, tokenizer):
    vocab = constrained.vocabulary(tokenizer)
    return b"".join(vocab.tokens[t] for t in tokens).decode()


@pytest.mark.parametrize("seed", range(5))
def test_output_matches_under_sampling(llama3, seed):
    proc = constrained.regex(PATTERN).processor(llama3)
    out = run([proc], prompt=[128000, 40, 1097], width=128256, seed=seed)
    assert out[-1] == 128001
    assert re.fullmatch(PATTERN, text_of(out[:-1], llama3))


def test_whole_prompt_or_uncached_tail_gives_the_same_output(llama3):
    constraint = constrained.regex(PATTERN)
    whole = run([constraint.processor(llama3)], prompt=[128000, 40, 1097, 264, 1296], width=128256, seed=3)
    tail = run([constraint.processor(llama3)], prompt=[1296], width=128256, seed=3)
    assert whole == tail


def test_one_more_call_after_eos_is_harmless(llama3):
    proc = constrained.regex("a").processor(llama3)
    a = llama3._tokenizer.encode("a", add_special_tokens=False)[0]
    logits = mx.zeros((1, 128256))
    proc(mx.array([1, 2]), logits)
    proc(mx.array([1, 2, a]), logits)
    out = proc(mx.array([1, 2, a, 128001]), logits)  # called again after EOS
    assert np.flatnonzero(np.isfinite(np.array(out[0]))).tolist() == [128001]


@pytest.mark.parametrize("ours_first", [True, False])
def test_composes_with_logit_bias_and_repetition_penalty(llama3, ours_first):
    digits = [llama3._tokenizer.encode(d, add_special_tokens=False)[0] for d in "0123456789"]
    others = make_logits_processors(logit_bias={digits[7]: 5.0, 1000: 50.0}, repetition_penalty=1.3)
    for seed in range(3):
        proc = constrained.regex(PATTERN).processor(llama3)
        processors = [proc, *others] if ours_first else [*others, proc]
        out = run(processors, prompt=[128000, digits[7]], width=128256, seed=seed)
        assert re.fullmatch(PATTERN, text_of(out[:-1], llama3))
        assert 1000 not in out  # a large bias cannot lift a masked token


def test_logits_wider_than_the_vocabulary(tokenizers):
    """Qwen2-7B has 152,064 logits for a tokenizer of 151,936 ids: the extra ids are masked."""
    qwen = tokenizers("qwen2")
    vocab = constrained.vocabulary(qwen)
    proc = constrained.regex(r"[a-z]+").processor(qwen)
    out = proc(mx.array([1]), mx.zeros((1, 152064)))
    finite = np.isfinite(np.array(out[0]))
    assert vocab.size < 152064 and not finite[vocab.size:].any() and finite[: vocab.size].any()


def test_dtype_is_kept(llama3):
    proc = constrained.regex("[a-z]+").processor(llama3)
    assert proc(mx.array([1]), mx.zeros((1, 128256), dtype=mx.bfloat16)).dtype == mx.bfloat16


def test_shorter_sequence_rolls_back(llama3):
    """Speculative decoding rewinds: the processor follows the sequence length."""
    proc = constrained.regex(r"[0-9]+x").processor(llama3)
    one, x = (llama3._tokenizer.encode(s, add_special_tokens=False)[0] for s in ("1", "x"))
    logits = mx.zeros((1, 128256))
    proc(mx.array([5, 6]), logits)
    proc(mx.array([5, 6, one]), logits)
    proc(mx.array([5, 6, one, x]), logits)
    assert proc.matcher.position == 2 and proc.matcher.is_accepting()
    out = proc(mx.array([5, 6, one]), logits)  # rewound by one token
    assert proc.matcher.position == 1 and np.isfinite(np.array(out[0, x])).item()


def test_a_disallowed_token_raises(llama3):
    proc = constrained.regex(r"[0-9]+").processor(llama3)
    letter = llama3._tokenizer.encode("q", add_special_tokens=False)[0]
    proc(mx.array([1]), mx.zeros((1, 128256)))
    with pytest.raises(ConstrainedError, match="not allowed"):
        proc(mx.array([1, letter]), mx.zeros((1, 128256)))


def test_reusing_a_processor_for_a_shorter_prompt_raises(llama3):
    proc = constrained.regex(r"[0-9]+").processor(llama3)
    proc(mx.array([1, 2, 3]), mx.zeros((1, 128256)))
    with pytest.raises(ConstrainedError, match="new processor for each generation"):
        proc(mx.array([1]), mx.zeros((1, 128256)))


def test_no_eos_is_refused():
    vocab = constrained.Vocabulary([bytes([b]) for b in range(256)], frozenset())
    with pytest.raises(ConstrainedError, match="no EOS token"):
        constrained.regex("a").processor(vocab)
