"""The matcher's contract: masks, advance, EOS, rollback, forced bytes, and the
errors a user gets for misuse."""

import numpy as np
import pytest

import constrained
from constrained import ConstrainedError
from conftest import encode_exact


@pytest.fixture(scope="module")
def llama3(tokenizers):
    return tokenizers("llama3")


def eos_of(matcher):
    return min(matcher.vocab.eos_ids)


def test_eos_only_when_complete_and_forced_at_the_end(llama3):
    matcher = constrained.regex("ab|abc").matcher(llama3)
    eos = eos_of(matcher)
    assert not matcher.is_allowed(eos)
    for token in encode_exact(llama3, "ab"):
        matcher.advance(token)
    assert matcher.is_accepting() and matcher.is_allowed(eos)
    for token in encode_exact(llama3, "c"):
        matcher.advance(token)
    # Nothing can follow "abc": EOS is the only allowed token.
    assert np.flatnonzero(matcher.allowed()).tolist() == sorted(matcher.vocab.eos_ids)
    matcher.advance(eos)
    assert matcher.is_finished()
    matcher.advance(eos)  # mlx-lm may call once more after EOS
    assert matcher.is_finished()


def test_eos_before_complete_raises(llama3):
    matcher = constrained.regex("[0-9]{3}").matcher(llama3)
    matcher.advance(encode_exact(llama3, "1")[0])
    with pytest.raises(ConstrainedError, match="EOS .* not allowed .* not complete"):
        matcher.advance(eos_of(matcher))


def test_disallowed_token_raises_and_leaves_the_state(llama3):
    matcher = constrained.regex("[0-9]+").matcher(llama3)
    (letter,) = encode_exact(llama3, "x")
    with pytest.raises(ConstrainedError, match=rf"token {letter} \(b'x'\) is not allowed"):
        matcher.advance(letter)
    assert matcher.position == 0


@pytest.mark.parametrize("token", [-1, 128256, 10**9, "7", 1.0, True])
def test_token_outside_the_vocabulary(llama3, token):
    matcher = constrained.regex("a").matcher(llama3)
    with pytest.raises(ConstrainedError, match="outside the vocabulary|token ids are integers"):
        matcher.advance(token)


def test_advance_after_the_end(llama3):
    matcher = constrained.regex("a").matcher(llama3)
    matcher.advance(encode_exact(llama3, "a")[0])
    matcher.advance(eos_of(matcher))
    with pytest.raises(ConstrainedError, match="after EOS"):
        matcher.advance(encode_exact(llama3, "a")[0])


def test_rollback(llama3):
    matcher = constrained.regex(r"\d{2}-\d{2}").matcher(llama3)
    tokens = encode_exact(llama3, "12-34")
    masks = []
    for token in tokens:
        masks.append(matcher.allowed())
        matcher.advance(token)
    assert matcher.is_accepting()
    matcher.rollback(len(tokens) - 1)
    assert matcher.position == 1
    assert (matcher.allowed() == masks[1]).all()
    with pytest.raises(ConstrainedError, match="cannot roll back 5"):
        matcher.rollback(5)
    matcher.reset()
    assert matcher.position == 0 and (matcher.allowed() == masks[0]).all()


def test_accepts_leaves_the_matcher_unchanged(llama3):
    matcher = constrained.regex(r"\d+").matcher(llama3)
    assert matcher.accepts(encode_exact(llama3, "123"))
    assert not matcher.accepts(encode_exact(llama3, "12a"))
    assert matcher.position == 0


def test_forced_bytes(llama3):
    matcher = constrained.regex(r'\{"name": "[a-z]+"\}').matcher(llama3)
    assert matcher.forced() == b'{"name": "'
    for token in encode_exact(llama3, '{"name": "bob'):
        matcher.advance(token)
    assert matcher.forced() == b""
    for token in encode_exact(llama3, '"'):
        matcher.advance(token)
    assert matcher.forced() == b"}"


def test_packed_mask_matches_bool_mask(llama3):
    matcher = constrained.regex(r"[a-c]{1,3}").matcher(llama3)
    bits = np.unpackbits(matcher.mask().view(np.uint8), bitorder="little")[: matcher.vocab.size]
    assert (bits.astype(bool) == matcher.allowed()).all()
    assert matcher.mask().dtype == np.uint32 and len(matcher.mask()) == (matcher.vocab.size + 31) // 32


def test_special_tokens_never_match_text(llama3):
    vocab = constrained.vocabulary(llama3)
    matcher = constrained.regex(r"[\s\S]*").matcher(llama3)  # any text at all
    special = [i for i, t in enumerate(vocab.tokens) if not t]
    assert special and not matcher.allowed()[[i for i in special if i not in vocab.eos_ids]].any()


def test_choice_is_literal(llama3):
    c = constrained.choice(["a.b", "(x)", "a+"])
    assert c.matches("a.b") and c.matches("(x)") and c.matches("a+")
    assert not c.matches("aab") and not c.matches("x") and not c.matches("aa")
    with pytest.raises(ConstrainedError, match="non-empty list of strings"):
        constrained.choice([])


def test_vocabulary_that_cannot_spell_a_path_prunes_it():
    """A vocabulary without every byte: branches its tokens cannot finish are
    never offered (no dead ends), and a language it cannot spell at all is refused."""
    vocab = constrained.Vocabulary([b"a", b"b", b"ab", b"", b"x"], frozenset({3}))
    assert not vocab.spells_every_byte
    matcher = constrained.regex("ac|b|xb").matcher(vocab)
    assert np.flatnonzero(matcher.allowed()).tolist() == [1, 4]  # "b" and "x"; "a" and "ab" lead nowhere
    matcher.advance(4)
    assert np.flatnonzero(matcher.allowed()).tolist() == [1]
    with pytest.raises(ConstrainedError, match="no sequence of this vocabulary's tokens"):
        constrained.regex("c").matcher(vocab)


def test_same_pattern_same_constraint_and_index(llama3):
    a, b = constrained.regex(r"\d+"), constrained.regex(r"\d+")
    assert a is b and a.index(llama3) is b.index(llama3)
    with pytest.raises(ConstrainedError, match="is a str"):
        constrained.regex(["x"])
