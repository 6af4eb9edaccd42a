"""Constrained generation with a real model (SmolLM2-135M-Instruct): every
output matches, greedy or sampled, through generate, stream_generate, a plain
mlx-lm logits_processors list, and mlx-lm's BatchGenerator."""

import re

import mlx.core as mx
import mlx_lm
import pytest
from mlx_lm.generate import BatchGenerator
from mlx_lm.sample_utils import make_logits_processors, make_sampler

import constrained

from conftest import chat

CASES = [
    ("On what date did Apollo 11 land on the Moon?", r"(19|20)\d\d-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])"),
    ("Make up an email address for Jane Doe at Example Corp.", r"[a-z]{1,10}\.[a-z]{1,10}@[a-z]{2,10}\.(com|org|net)"),
    ("What is a US phone number?", r"\(\d{3}\) \d{3}-\d{4}"),
    ("Pick a number between 1 and 100.", r"[1-9]\d?|100"),
    ("Is the sky blue? Answer yes or no.", r"(yes|no)"),
]


@pytest.fixture(autouse=True)
def seeded():
    mx.random.seed(0)


@pytest.mark.parametrize("question, pattern", CASES)
@pytest.mark.parametrize("temp", [0.0, 1.0])
def test_generations_match(smollm2, question, pattern, temp):
    model, tokenizer = smollm2
    sampler = make_sampler(temp=temp, top_p=0.9)
    text = constrained.generate(
        model, tokenizer, chat(tokenizer, question), constrained.regex(pattern), max_tokens=40, sampler=sampler
    )
    assert re.fullmatch(pattern, text, re.ASCII), text


def test_choice_and_plain_mlx_lm_processor_list(smollm2):
    model, tokenizer = smollm2
    proc = constrained.choice(["Paris", "London", "Berlin", "Madrid"]).processor(tokenizer)
    others = make_logits_processors(repetition_penalty=1.2)
    text = mlx_lm.generate(
        model, tokenizer, chat(tokenizer, "What is the capital of France?"),
        max_tokens=10, logits_processors=[*others, proc],
    )
    assert text in {"Paris", "London", "Berlin", "Madrid"}


def test_stream_generate_yields_matching_text(smollm2):
    model, tokenizer = smollm2
    pattern = r"\d{2}:\d{2}"
    pieces = [
        r.text
        for r in constrained.stream_generate(
            model, tokenizer, chat(tokenizer, "What time is it?"), constrained.regex(pattern), max_tokens=12
        )
    ]
    assert re.fullmatch(pattern, "".join(pieces))


def test_batch_generator_rows_have_their_own_constraints(smollm2):
    model, tokenizer = smollm2
    patterns = [r"[0-9]{3}", r"(red|green|blue)", r"[a-z]{2,5}!"]
    prompts = [tokenizer.encode(chat(tokenizer, q)) for q in ["A number?", "A colour?", "A word?"]]
    processors = [[constrained.regex(p).processor(tokenizer)] for p in patterns]
    gen = BatchGenerator(model, stop_tokens=[[t] for t in tokenizer.eos_token_ids])
    uids = gen.insert(prompts, [20] * 3, logits_processors=processors)
    tokens = {uid: [] for uid in uids}
    finished = set()
    while responses := gen.next_generated():
        for r in responses:
            if r.finish_reason != "stop":
                tokens[r.uid].append(r.token)
            if r.finish_reason is not None:
                finished.add(r.uid)
    gen.close()
    assert finished == set(uids)
    for uid, pattern in zip(uids, patterns):
        assert re.fullmatch(pattern, tokenizer.decode(tokens[uid])), (pattern, tokenizer.decode(tokens[uid]))
