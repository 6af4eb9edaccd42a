"""Token-level soundness and completeness on real vocabularies (SmolLM2, Llama 3,
Llama 2 SentencePiece): random walks under the mask stay in the language, and
the tokenizer's own encoding of any string of the language is accepted."""

import random
import re

import numpy as np
from hypothesis import assume, given, settings, strategies as st

import constrained
from conftest import encode_exact
from regex_strategies import compile_or_reject, regex_members, regex_pairs

REALISTIC = [
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}",
    r"[a-z]{1,64}",
    r"[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\.[a-zA-Z]{2,6}",
    r"\(\d{3}\) \d{3}-\d{4}",
    r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?",
    r'"([^"\\]|\\.){0,20}"',
    r"(yes|no|maybe)",
    r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
    r"(Straße|Ελληνικά|日本語|😀)+",
]


def random_walk(matcher, rng: random.Random, max_steps: int = 40) -> tuple[bytes, bool]:
    """Pick random allowed tokens (EOS with some chance once allowed); returns
    the bytes produced and whether EOS ended the walk."""
    vocab = matcher.vocab
    for _ in range(max_steps):
        allowed = np.flatnonzero(matcher.allowed())
        assert len(allowed), f"dead end after {matcher.text()!r}"
        eos = [t for t in allowed if t in vocab.eos_ids]
        if eos and (rng.random() < 0.3 or len(eos) == len(allowed)):
            matcher.advance(eos[0])
            break
        choices = [t for t in allowed if t not in vocab.eos_ids]
        matcher.advance(int(rng.choice(choices)))
    output = b"".join(vocab.tokens[t] for t in matcher._tokens if t not in vocab.eos_ids)
    return output, matcher.is_finished()


def check_walks(pattern, tokenizer, seeds):
    constraint = compile_or_reject(pattern)
    for seed in seeds:
        matcher = constraint.matcher(tokenizer)
        output, finished = random_walk(matcher, random.Random(seed))
        if finished:
            assert re.fullmatch(pattern, output.decode(), re.ASCII), (pattern, output)
        else:  # cut short: still a prefix of the language
            assert matcher.state >= 0


def test_random_walks_on_realistic_patterns(tokenizer):
    for pattern in REALISTIC:
        check_walks(pattern, tokenizer, seeds=range(8))


@settings(max_examples=25)
@given(pair=regex_pairs, seed=st.integers(0, 2**32))
def test_random_walks_on_random_patterns(tokenizer, pair, seed):
    check_walks(pair[0], tokenizer, seeds=[seed, seed + 1])


@settings(max_examples=25)
@given(example=regex_members)
def test_tokenizer_encodings_of_members_are_accepted(tokenizer, example):
    pair, text = example
    matcher = compile_or_reject(pair[0]).matcher(tokenizer)
    tokens = encode_exact(tokenizer, text)
    assume(tokens is not None)
    for token in tokens:
        assert matcher.is_allowed(token)
        matcher.advance(token)
    assert matcher.is_accepting()
    eos = next(iter(matcher.vocab.eos_ids))
    assert matcher.is_allowed(eos)


def test_realistic_members_are_accepted(tokenizer):
    examples = {
        REALISTIC[2]: "jane.doe+news@example.co.uk",
        REALISTIC[3]: "(555) 123-4567",
        REALISTIC[4]: "-12.5e+3",
        REALISTIC[5]: '"say \\"hi\\" ok"',
        REALISTIC[8]: "Straße日本語😀Ελληνικά",
    }
    for pattern, text in examples.items():
        matcher = constrained.regex(pattern).matcher(tokenizer)
        for token in encode_exact(tokenizer, text):
            matcher.advance(token)
        assert matcher.is_accepting(), (pattern, text)


def test_masks_agree_with_the_dfa_on_every_token(tokenizers):
    """Brute force over the whole Llama 3 vocabulary: a token is allowed exactly
    when its bytes keep the DFA alive (or it is EOS in an accepting state)."""
    tokenizer = tokenizers("llama3")
    constraint = constrained.regex(r"(\d+|[a-f]{2,3})(\.\d*)?é?")
    index = constraint.index(tokenizer)
    vocab = index.vocab
    for state in range(constraint.dfa.n_states):
        expected = np.array([bool(t) and constraint.dfa.run(t, state) >= 0 for t in vocab.tokens])
        expected[list(vocab.eos_ids)] = bool(constraint.dfa.accepting[state])
        packed = np.unpackbits(index.mask(state).view(np.uint8), bitorder="little")[: vocab.size]
        assert (packed.astype(bool) == expected).all()


@settings(max_examples=30)
@given(data=st.data())
def test_from_regex_strings_of_realistic_patterns_are_accepted(tokenizers, data):
    """hypothesis' own from_regex as the independent generator, on fixed patterns
    (without \\d, \\w, \\s, whose Unicode meaning from_regex would use)."""
    pattern = data.draw(st.sampled_from([p for p in REALISTIC if "\\d" not in p]))
    tokenizer = tokenizers(data.draw(st.sampled_from(["llama3", "llama2"])))
    text = data.draw(st.from_regex(pattern, fullmatch=True))
    matcher = constrained.regex(pattern).matcher(tokenizer)
    tokens = encode_exact(tokenizer, text)
    assume(tokens is not None)
    for token in tokens:
        matcher.advance(token)
    assert matcher.is_accepting(), (pattern, text)
