"""Vocabularies: exact token bytes for byte-level BPE and SentencePiece, EOS ids,
and refusing what cannot be read."""

import json

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers

import constrained
from constrained import ConstrainedError


def test_byte_level_tokens_hold_partial_characters(tokenizers):
    vocab = constrained.vocabulary(tokenizers("llama3"))
    # Every byte is a token of its own, including lone UTF-8 continuation bytes.
    singles = {t for t in vocab.tokens if len(t) == 1}
    assert len(singles) == 256
    assert vocab.spells_every_byte
    ids = tokenizers("llama3")._tokenizer.encode("日本語 😀", add_special_tokens=False)
    assert b"".join(vocab.tokens[i] for i in ids) == "日本語 😀".encode()


def test_sentencepiece_space_and_byte_fallback(tokenizers):
    tok = tokenizers("llama2")
    vocab = constrained.vocabulary(tok)
    assert vocab.tokens[tok._tokenizer.convert_tokens_to_ids("<0x0A>")] == b"\n"
    assert vocab.tokens[tok._tokenizer.convert_tokens_to_ids("▁the")] == b" the"
    ids = tok._tokenizer.encode("hello 😀", add_special_tokens=False)  # 😀 falls back to bytes
    assert b"".join(vocab.tokens[i] for i in ids) == " hello 😀".encode()


def test_special_tokens_have_no_bytes_and_eos_is_known(tokenizers):
    tok = tokenizers("llama3")
    vocab = constrained.vocabulary(tok)
    assert vocab.tokens[128000] == b"" and vocab.tokens[128001] == b""
    assert set(tok.eos_token_ids) <= vocab.eos_ids


def test_extra_eos_ids_are_added(tokenizers):
    vocab = constrained.vocabulary(tokenizers("llama3"), eos_ids=[128009])
    assert {128001, 128009} <= vocab.eos_ids
    with pytest.raises(ConstrainedError, match="outside the vocabulary"):
        constrained.vocabulary(tokenizers("llama3"), eos_ids=[999999])


def test_sources_agree(tokenizers, tmp_path):
    """A TokenizerWrapper, the transformers tokenizer inside, its tokenizers.Tokenizer
    and a tokenizer.json file give the same bytes."""
    wrapper = tokenizers("smollm2")
    path = tmp_path / "tokenizer.json"
    wrapper._tokenizer.backend_tokenizer.save(str(path))
    sources = [wrapper, wrapper._tokenizer, wrapper._tokenizer.backend_tokenizer, path]
    vocabs = [constrained.vocabulary(s) for s in sources]
    assert all(v.tokens == vocabs[0].tokens for v in vocabs)
    assert vocabs[0].eos_ids  # the wrapper knows its EOS


def test_unknown_vocabulary_type_is_refused(tmp_path):
    wordpiece = Tokenizer(models.WordPiece({"[UNK]": 0, "a": 1, "##b": 2}, unk_token="[UNK]"))
    with pytest.raises(ConstrainedError, match="unsupported tokenizer model type 'WordPiece'"):
        constrained.vocabulary(wordpiece)
    bpe = Tokenizer(models.BPE({"a": 0, "b": 1}, []))
    bpe.pre_tokenizer = pre_tokenizers.Whitespace()
    with pytest.raises(ConstrainedError, match="unknown vocabulary type"):
        constrained.vocabulary(bpe)


def test_not_a_tokenizer_is_refused(tmp_path):
    with pytest.raises(ConstrainedError, match="cannot read the vocabulary of a dict"):
        constrained.vocabulary({"a": 1})
    bad = tmp_path / "tokenizer.json"
    bad.write_text(json.dumps({"nothing": True}))
    with pytest.raises(ConstrainedError, match="cannot read tokenizer file"):
        constrained.vocabulary(bad)


def test_trie_spells_every_token(tokenizers):
    vocab = constrained.vocabulary(tokenizers("llama2"))
    trie = vocab.trie
    for token_id in range(0, vocab.size, 97):
        node, spelled = trie.token_node[token_id], []
        while node >= 0:
            spelled.append(int(trie.byte[node]))
            node = trie.parent[node]
        assert bytes(reversed(spelled)) == vocab.tokens[token_id]


def test_trie_subtrees_list_the_tokens_below_each_node(tokenizers):
    """Tokens in byte order, and per node the run of those spelled at or below it:
    exactly the tokens its bytes begin."""
    vocab = constrained.vocabulary(tokenizers("llama2"))
    trie = vocab.trie
    tokens, first, end = trie.subtrees
    listed = [vocab.tokens[t] for t in tokens]
    assert listed == sorted(listed) and sorted(tokens.tolist()) == [t for t in range(vocab.size) if vocab.tokens[t]]
    for node in range(0, trie.n_nodes, 61):
        prefix, at = [], node
        while at >= 0:
            prefix.append(int(trie.byte[at]))
            at = trie.parent[at]
        prefix = bytes(reversed(prefix))
        below = {t for t in range(vocab.size) if vocab.tokens[t].startswith(prefix)}
        assert set(tokens[first[node]:end[node]].tolist()) == below, prefix


def test_eos_is_the_union_of_tokenizer_and_model_configs(tokenizers, tmp_path):
    from transformers import PreTrainedTokenizerFast

    tokenizers("smollm2")._tokenizer.backend_tokenizer.save(str(tmp_path / "tokenizer.json"))
    (tmp_path / "config.json").write_text(json.dumps({"eos_token_id": 7}))
    (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": [8, 9]}))
    tok = PreTrainedTokenizerFast(tokenizer_file=str(tmp_path / "tokenizer.json"), eos_token="<|im_end|>")
    tok.name_or_path = str(tmp_path)
    vocab = constrained.vocabulary(tok)
    assert {7, 8, 9, tok.eos_token_id} <= vocab.eos_ids
