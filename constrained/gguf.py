"""Build a Hugging Face fast tokenizer from the metadata of a GGUF file.

A GGUF carries no tokenizer.json: the vocabulary, merges, token types and
special ids are stored under llama.cpp's `tokenizer.ggml.*` keys. This module
rebuilds the tokenizer llama.cpp would run from them, as a `tokenizers.Tokenizer`
wrapped for mlx-lm.

transformers has its own GGUF conversion, but its public entry point needs
torch, and its SentencePiece and Llama 3 variants disagree with llama.cpp's
reference ids (prefix space before leading blanks, `ignore_merges`).
"""

from functools import partial

import mlx.core as mx
from mlx_lm.tokenizer_utils import BPEStreamingDetokenizer, SPMStreamingDetokenizer, TokenizerWrapper
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
from transformers import PreTrainedTokenizerFast

from .errors import ConstrainedError

# llama.cpp's token types (llama_token_type)
_NORMAL, _UNKNOWN, _CONTROL, _USER_DEFINED = 1, 2, 3, 4

_GPT2_SPLIT = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
_LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# `tokenizer.ggml.pre` -> the split regexes llama-vocab.cpp applies in turn
_BYTE_LEVEL_SPLITS = {
    "gpt2": [_GPT2_SPLIT],
    "smollm": [r"\p{N}", _GPT2_SPLIT],
    "llama-bpe": [_LLAMA3_SPLIT],
    "llama3": [_LLAMA3_SPLIT],
    "llama-v3": [_LLAMA3_SPLIT],
    "qwen2": [_QWEN2_SPLIT],
}
# llama.cpp takes a whole pre-token that is in the vocabulary as is, even when no merges lead to it,
# and adds BOS unless told otherwise, for these
_LLAMA3_PRE = {"llama-bpe", "llama3", "llama-v3"}


def load(path):
    """The tensors (MLX arrays, by GGUF name) and the metadata (plain Python values) of a GGUF file."""
    weights, metadata = mx.load(str(path), return_metadata=True)
    return weights, {key: _to_python(value) for key, value in metadata.items()}


def _to_python(value):
    if isinstance(value, mx.array):
        return value.item() if value.ndim == 0 else value.tolist()
    return value


def tokenizer_from_metadata(metadata):
    """A `TokenizerWrapper` for the tokenizer described by GGUF `metadata` (see `load`)."""
    kind = metadata.get("tokenizer.ggml.model")
    if kind not in ("gpt2", "llama", "gemma4"):
        raise ConstrainedError(
            f"GGUF tokenizer model {kind!r} is not supported; supported: 'gpt2', 'llama', 'gemma4'"
        )
    tokens = metadata["tokenizer.ggml.tokens"]
    types = metadata.get("tokenizer.ggml.token_type") or [_NORMAL] * len(tokens)
    if kind == "gpt2":
        backend, detokenizer_class = _byte_level(metadata), BPEStreamingDetokenizer
    else:  # SentencePiece, stored as a BPE vocabulary with byte-fallback tokens
        add_space_prefix = metadata.get("tokenizer.ggml.add_space_prefix", kind == "llama")
        backend = _sentencepiece(metadata, types, add_space_prefix)
        detokenizer_class = partial(SPMStreamingDetokenizer, trim_space=add_space_prefix)

    # Added tokens are matched whole in the text before the model runs, as llama.cpp does.
    backend.add_special_tokens(
        [AddedToken(t, special=True, normalized=False) for t, k in zip(tokens, types) if k in (_UNKNOWN, _CONTROL)]
    )
    backend.add_tokens(
        [AddedToken(t, special=False, normalized=False) for t, k in zip(tokens, types) if k == _USER_DEFINED]
    )
    backend.post_processor = _post_processor(metadata, kind)

    def token(key):
        token_id = metadata.get(f"tokenizer.ggml.{key}_token_id")
        return None if token_id is None else tokens[token_id]

    hf_tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token=token("bos"),
        eos_token=token("eos"),
        unk_token=token("unknown"),
        pad_token=token("padding"),
        chat_template=metadata.get("tokenizer.chat_template"),
    )
    # llama.cpp ends generation on any of these the file names
    end_keys = [f"tokenizer.ggml.{name}_token_id" for name in ("eos", "eot", "eom")]
    end_ids = [metadata[key] for key in end_keys if key in metadata]
    return TokenizerWrapper(hf_tokenizer, detokenizer_class, eos_token_ids=end_ids)


def _byte_level(metadata):
    pre = metadata.get("tokenizer.ggml.pre")
    if pre not in _BYTE_LEVEL_SPLITS:
        raise ConstrainedError(
            f"GGUF byte-level pre-tokenizer {pre!r} is not supported; supported: {sorted(_BYTE_LEVEL_SPLITS)}"
        )
    vocab = {token: i for i, token in enumerate(metadata["tokenizer.ggml.tokens"])}
    merges = [tuple(merge.split(" ")) for merge in metadata["tokenizer.ggml.merges"]]
    backend = Tokenizer(models.BPE(vocab, merges, ignore_merges=pre in _LLAMA3_PRE))
    backend.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Split(Regex(split), behavior="isolated") for split in _BYTE_LEVEL_SPLITS[pre]]
        + [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]
    )
    backend.decoder = decoders.ByteLevel()
    return backend


def _sentencepiece(metadata, types, add_space_prefix):
    tokens = metadata["tokenizer.ggml.tokens"]
    vocab = {token: i for i, token in enumerate(tokens)}
    if "tokenizer.ggml.merges" in metadata:
        merges = [tuple(merge.split(" ")) for merge in metadata["tokenizer.ggml.merges"]]
    else:
        merges = _merges_from_scores(tokens, metadata["tokenizer.ggml.scores"], types)
    unk_id = metadata.get("tokenizer.ggml.unknown_token_id")
    unk_token = None if unk_id is None else tokens[unk_id]
    backend = Tokenizer(models.BPE(vocab, merges, unk_token=unk_token, fuse_unk=True, byte_fallback=True))
    # SentencePiece prefixes a space even to text that already starts with one, so this
    # is a normalizer and not `Metaspace` (which leaves text starting with "▁" alone).
    prefix = [normalizers.Prepend("▁")] if add_space_prefix else []
    backend.normalizer = normalizers.Sequence(prefix + [normalizers.Replace(" ", "▁")])
    strip = [decoders.Strip(" ", 1, 0)] if add_space_prefix else []
    backend.decoder = decoders.Sequence(
        [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()] + strip
    )
    return backend


def _merges_from_scores(tokens, scores, types):
    """BPE merges that reproduce SentencePiece's scores: every split of a normal token into
    two tokens, the best-scored result first (like transformers' SentencePiece converter)."""
    ids = {token: i for i, token in enumerate(tokens)}
    ranked = []
    for token, score, kind in zip(tokens, scores, types):
        if kind != _NORMAL:  # control, byte and user-defined tokens never come out of a merge
            continue
        for cut in range(1, len(token)):
            left, right = token[:cut], token[cut:]
            if left in ids and right in ids:
                ranked.append((-score, ids[left], ids[right], left, right))
    ranked.sort()
    return [(left, right) for *_, left, right in ranked]


def _post_processor(metadata, kind):
    tokens = metadata["tokenizer.ggml.tokens"]
    # llama.cpp's defaults when the file does not say: BOS for SentencePiece and Llama 3
    default_bos = kind == "llama" or metadata.get("tokenizer.ggml.pre") in _LLAMA3_PRE
    bos_id = metadata.get("tokenizer.ggml.bos_token_id")
    eos_id = metadata.get("tokenizer.ggml.eos_token_id")
    template, special = ["$A"], []
    if metadata.get("tokenizer.ggml.add_bos_token", default_bos) and bos_id is not None:
        template.insert(0, tokens[bos_id])
        special.append((tokens[bos_id], bos_id))
    if metadata.get("tokenizer.ggml.add_eos_token", False) and eos_id is not None:
        template.append(tokens[eos_id])
        special.append((tokens[eos_id], eos_id))
    return processors.TemplateProcessing(single=template, special_tokens=special)
