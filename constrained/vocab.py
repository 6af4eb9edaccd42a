"""The vocabulary: the exact bytes of every token id, and its byte trie.

Token bytes come from the tokenizer's own description (``tokenizer.json``), not
from ``decode([id])``, which loses tokens holding part of a UTF-8 character and
SentencePiece's leading space. Special tokens get no bytes, so grammar text can
never produce them.
"""

import hashlib
import json
import os
import re
import weakref
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from .errors import ConstrainedError
from .models import cache_dir

_BYTE_FALLBACK = re.compile(r"<0x([0-9A-Fa-f]{2})>")


def _gpt2_byte_decoder() -> dict[str, int]:
    """GPT-2's byte-level alphabet: printable bytes stand for themselves, the
    others are shifted to code points from 256 on."""
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    chars, n = {}, 0
    for b in range(256):
        if b in printable:
            chars[chr(b)] = b
        else:
            chars[chr(256 + n)] = b
            n += 1
    return chars


_BYTE_DECODER = _gpt2_byte_decoder()


@dataclass(eq=False)
class Vocabulary:
    """Token ids and their bytes.

    ``tokens[i]`` is the text token ``i`` stands for, as bytes; ``b""`` for special
    and unused ids, which grammar text never matches. ``eos_ids`` end a generation.
    """

    tokens: list[bytes]
    eos_ids: frozenset[int]

    def __post_init__(self):
        if not self.tokens:
            raise ConstrainedError("the vocabulary is empty")
        bad = [i for i in self.eos_ids if not 0 <= i < len(self.tokens)]
        if bad:
            raise ConstrainedError(f"EOS ids {bad} are outside the vocabulary of {len(self.tokens)} tokens")

    @property
    def size(self) -> int:
        return len(self.tokens)

    @cached_property
    def fingerprint(self) -> str:
        h = hashlib.sha256(np.array([len(t) for t in self.tokens], dtype=np.uint32).tobytes())
        h.update(b"".join(self.tokens))
        h.update(repr(sorted(self.eos_ids)).encode())
        return h.hexdigest()[:32]

    @cached_property
    def spells_every_byte(self) -> bool:
        """Whether each of the 256 bytes is a token of its own."""
        trie = self.trie
        ends = trie.token_node[(trie.token_node >= 0) & (trie.token_node < trie.level_start[1])]
        return len(np.unique(ends)) == 256

    @cached_property
    def trie(self) -> "Trie":
        return Trie.cached(self)

    def check_token(self, token: int) -> int:
        if type(token) is int and 0 <= token < self.size:  # (the common case, checked first: once per step)
            return token
        if not isinstance(token, (int, np.integer)) or isinstance(token, bool):
            raise ConstrainedError(f"token ids are integers, got {token!r}")
        if not 0 <= token < self.size:
            raise ConstrainedError(f"token id {token} is outside the vocabulary (0..{self.size - 1})")
        return int(token)


def padded_bytes(tokens: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """The tokens' bytes as a zero-padded (count, longest) uint8 matrix, and their lengths."""
    lengths = np.fromiter(map(len, tokens), dtype=np.int64, count=len(tokens))
    matrix = np.zeros((len(tokens), max(1, int(lengths.max(initial=0)))), dtype=np.uint8)
    flat = np.frombuffer(b"".join(tokens), dtype=np.uint8)
    rows = np.repeat(np.arange(len(tokens)), lengths)
    matrix[rows, np.arange(len(flat)) - np.repeat(np.cumsum(lengths) - lengths, lengths)] = flat
    return matrix, lengths


@dataclass(eq=False)
class Trie:
    """The vocabulary's distinct byte strings as a trie, nodes in breadth-first order.

    Node ``n`` (depth >= 1) extends ``parent[n]`` (-1 for the root) by ``byte[n]``;
    the children of a node are contiguous, ``child_start[n]:child_start[n + 1]``;
    the root's children are the nodes of depth 1, ``level_start[0]:level_start[1]``.
    ``token_node[t]`` is the node spelling token ``t``, -1 for tokens without bytes.
    """

    parent: np.ndarray
    byte: np.ndarray
    child_start: np.ndarray
    level_start: np.ndarray
    token_node: np.ndarray

    @property
    def n_nodes(self) -> int:
        return len(self.parent)

    @classmethod
    def build(cls, tokens: list[bytes]) -> "Trie":
        all_padded, token_lengths = padded_bytes(tokens)
        spelled = np.flatnonzero(token_lengths)
        lengths = token_lengths[spelled]
        width = all_padded.shape[1]
        padded = all_padded[spelled]
        # Sort the byte strings (memcmp order of the zero-padded rows, shorter
        # first on ties) and keep one of each.
        by_length = np.argsort(lengths, kind="stable")
        rows_as_bytes = padded.view(np.dtype((np.void, width))).ravel()
        order = by_length[np.argsort(rows_as_bytes[by_length], kind="stable")]
        padded, lengths = padded[order], lengths[order]
        repeat = (lengths[1:] == lengths[:-1]) & (padded[1:] == padded[:-1]).all(axis=1)
        string_of_sorted = np.cumsum(np.r_[0, ~repeat])
        token_string = np.empty(len(spelled), dtype=np.int64)
        token_string[order] = string_of_sorted
        keep = np.r_[True, ~repeat]
        padded, lengths = padded[keep], lengths[keep]
        n_strings = len(lengths)

        # Sorted strings list the trie in depth-first order: string i adds the nodes
        # for its prefixes longer than the prefix it shares with string i - 1.
        differs = padded[1:] != padded[:-1]
        first_diff = np.where(differs.any(axis=1), differs.argmax(axis=1), width)
        shared = np.concatenate([[0], np.minimum(first_diff, np.minimum(lengths[1:], lengths[:-1]))])
        new_counts = lengths - shared
        owner = np.repeat(np.arange(n_strings), new_counts)
        depth = np.arange(new_counts.sum()) - np.repeat(np.cumsum(new_counts) - new_counts, new_counts)
        depth += np.repeat(shared, new_counts)  # 0-based: node at depth d spells d + 1 bytes
        node_byte = padded[owner, depth]

        # Parent in depth-first order: the last node one level up that comes before.
        n = len(depth)
        dfs_parent = np.full(n, -1, dtype=np.int64)
        order = np.argsort(depth, kind="stable")
        level_bounds = np.searchsorted(depth[order], np.arange(width + 1))
        for d in range(1, width):
            above = order[level_bounds[d - 1]:level_bounds[d]]
            here = order[level_bounds[d]:level_bounds[d + 1]]
            dfs_parent[here] = above[np.searchsorted(above, here) - 1]

        # Renumber breadth-first: by depth, then by parent's new number, then byte.
        bfs_of_dfs = np.empty(n, dtype=np.int64)
        new_parent = np.full(n, -1, dtype=np.int64)
        done = 0
        for d in range(width):
            here = order[level_bounds[d]:level_bounds[d + 1]]
            parents = bfs_of_dfs[dfs_parent[here]] if d else np.full(len(here), -1)
            sort = np.lexsort((node_byte[here], parents))
            bfs_of_dfs[here[sort]] = np.arange(done, done + len(here))
            new_parent[done:done + len(here)] = parents[sort]
            done += len(here)
        bfs_byte = np.empty(n, dtype=np.uint8)
        bfs_byte[bfs_of_dfs] = node_byte

        last_node = np.cumsum(new_counts) - 1  # each string's own last node
        string_node = bfs_of_dfs[last_node]
        token_node = np.full(len(tokens), -1, dtype=np.int32)
        token_node[spelled] = string_node[token_string]
        child_start = np.searchsorted(new_parent, np.arange(n + 1)).astype(np.int32)
        return cls(new_parent.astype(np.int32), bfs_byte, child_start, level_bounds.astype(np.int32), token_node)

    @cached_property
    def tokens_by_node(self) -> tuple[np.ndarray, np.ndarray]:
        """(the tokens with bytes sorted by node, where each node's run starts):
        node ``n`` spells ``tokens[starts[n]:starts[n + 1]]`` (several tokens
        when a vocabulary spells the same bytes twice)."""
        spelled = np.flatnonzero(self.token_node >= 0)
        tokens = spelled[np.argsort(self.token_node[spelled], kind="stable")]
        return tokens, np.searchsorted(self.token_node[tokens], np.arange(self.n_nodes + 1)).astype(np.int64)

    @cached_property
    def subtrees(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(the tokens with bytes in byte order, and per node the run of them it
        starts): the tokens spelled at or below node ``n`` are
        ``tokens[first[n]:end[n]]``."""
        bounds = self.level_start.tolist()
        size = np.ones(self.n_nodes, dtype=np.int64)  # nodes at or below each node
        for a, b in reversed(list(zip(bounds[1:], bounds[2:]))):
            np.add.at(size, self.parent[a:b], size[a:b])
        preorder = np.empty(self.n_nodes, dtype=np.int64)  # each node's place in a depth-first listing
        for a, b in zip(bounds, bounds[1:]):
            before = np.cumsum(size[a:b]) - size[a:b]  # sizes of the earlier nodes of this level
            if a == bounds[0]:
                preorder[a:b] = before
            else:
                parent = self.parent[a:b]
                preorder[a:b] = preorder[parent] + 1 + before - before[self.child_start[parent] - a]
        spelled = np.flatnonzero(self.token_node >= 0)
        tokens = spelled[np.argsort(preorder[self.token_node[spelled]], kind="stable")]
        listed = preorder[self.token_node[tokens]]
        return tokens, np.searchsorted(listed, preorder), np.searchsorted(listed, preorder + size)

    @classmethod
    def cached(cls, vocab: Vocabulary) -> "Trie":
        """The trie of ``vocab``, from the disk cache when it was built before."""
        path = cache_dir() / "vocab" / f"content-{FORMAT}-{vocab.fingerprint}.npz"
        stored = _load(path)
        if stored is not None:
            return stored[1]
        trie = cls.build(vocab.tokens)
        _save(path, vocab.tokens, trie)
        return trie


def _load(path: Path) -> tuple[list[bytes], Trie] | None:
    try:
        with np.load(path) as data:
            trie = Trie(**{k: data[k] for k in Trie.__dataclass_fields__})
            flat, ends = data["token_bytes"].tobytes(), data["token_ends"].tolist()
    except (OSError, KeyError, ValueError):
        return None
    starts = [0, *ends[:-1]]
    return [flat[a:b] for a, b in zip(starts, ends)], trie


def _save(path: Path, tokens: list[bytes], trie: Trie) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp.npz")
    flat = np.frombuffer(b"".join(tokens), dtype=np.uint8)
    ends = np.cumsum([len(t) for t in tokens])
    np.savez(tmp, token_bytes=flat, token_ends=ends, **{k: getattr(trie, k) for k in Trie.__dataclass_fields__})
    os.replace(tmp, path)


def _source_names(tokenizer) -> list[str]:
    """Where the tokenizer says it was loaded from (file or model directory)."""
    return [n for t in (tokenizer, getattr(tokenizer, "_tokenizer", None)) if (n := getattr(t, "name_or_path", None))]


def _config_eos(tokenizer) -> set[int]:
    """EOS ids in the model directory's config.json and generation_config.json
    (mlx-lm keeps only one of the two)."""
    eos = set()
    for name in _source_names(tokenizer):
        for config in ("config.json", "generation_config.json"):
            path = Path(name) / config
            if path.is_file():
                try:
                    value = json.loads(path.read_text()).get("eos_token_id")
                except (OSError, ValueError, AttributeError):
                    continue
                eos.update([value] if isinstance(value, int) else [v for v in value or () if isinstance(v, int)])
    return eos


def _source_key(tokenizer, backend) -> str | None:
    """A disk-cache key for a tokenizer loaded from a file: the file's path, size
    and time, with the added tokens (which a program may change after loading)."""
    for name in _source_names(tokenizer):
        path = Path(name)
        path = path / "tokenizer.json" if path.is_dir() else path
        if path.is_file():
            stat = path.stat()
            added = sorted((i, t.content, t.special) for i, t in backend.get_added_tokens_decoder().items())
            source = f"{FORMAT}|{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}|{added}"
            return hashlib.sha256(source.encode()).hexdigest()[:32]
    return None


FORMAT = 1  # bump when the cached layout or the byte reading changes

_vocabularies: "weakref.WeakKeyDictionary[object, Vocabulary]" = weakref.WeakKeyDictionary()


def vocabulary(tokenizer, eos_ids=()) -> Vocabulary:
    """The Vocabulary of an mlx-lm TokenizerWrapper, a transformers fast tokenizer,
    a ``tokenizers.Tokenizer``, a path to a ``tokenizer.json``, or a Vocabulary.

    EOS ids are the union of the tokenizer's, a TokenizerWrapper's
    ``eos_token_ids``, those of the model directory's config.json and
    generation_config.json, and ``eos_ids``.
    """
    if isinstance(tokenizer, Vocabulary):
        return tokenizer if not eos_ids else Vocabulary(tokenizer.tokens, tokenizer.eos_ids | set(eos_ids))
    if isinstance(tokenizer, (str, Path)):
        from tokenizers import Tokenizer

        try:
            tokenizer = Tokenizer.from_file(str(tokenizer))
        except Exception as e:
            raise ConstrainedError(f"cannot read tokenizer file {tokenizer}: {e}") from None
    try:
        known = _vocabularies.get(tokenizer)
    except TypeError:  # not weakly referenceable
        known = None
    if known is None:
        backend, eos = _backend_and_eos(tokenizer)
        key = _source_key(tokenizer, backend)
        path = cache_dir() / "vocab" / f"source-{key}.npz" if key else None
        stored = _load(path) if path else None
        tokens = stored[0] if stored else _token_bytes(backend)
        eos = {e for e in eos | _config_eos(tokenizer) if 0 <= e < len(tokens)}
        known = Vocabulary(tokens, frozenset(eos))
        if stored:
            known.__dict__["trie"] = stored[1]  # fills the cached_property
        elif path:
            _save(path, known.tokens, known.trie)
        try:
            _vocabularies[tokenizer] = known
        except TypeError:
            pass
    if eos_ids:
        return Vocabulary(known.tokens, known.eos_ids | {int(e) for e in eos_ids})
    return known


def _backend_and_eos(tokenizer):
    """The ``tokenizers.Tokenizer`` behind ``tokenizer`` and the EOS ids it declares."""
    eos = set()
    for name in ("eos_token_ids", "eos_token_id"):
        value = getattr(tokenizer, name, None)
        if isinstance(value, int):
            eos.add(value)
        elif value is not None:
            eos.update(int(v) for v in value)
    if hasattr(tokenizer, "get_added_tokens_decoder") and hasattr(tokenizer, "decoder"):
        return tokenizer, eos  # already a tokenizers.Tokenizer
    inner = getattr(tokenizer, "backend_tokenizer", None) or getattr(tokenizer, "_tokenizer", None)
    if inner is None:
        raise ConstrainedError(
            f"cannot read the vocabulary of a {type(tokenizer).__name__}: pass an mlx-lm TokenizerWrapper, "
            "a transformers fast tokenizer, a tokenizers.Tokenizer or the path of a tokenizer.json"
        )
    backend, inner_eos = _backend_and_eos(inner)
    return backend, eos | inner_eos


def _token_bytes(backend) -> list[bytes]:
    kind = type(backend.model).__name__
    if kind not in ("BPE", "Unigram"):
        raise ConstrainedError(f"unsupported tokenizer model type {kind!r}: byte-level BPE and SentencePiece are supported")
    to_bytes = _piece_decoder(backend)
    pieces = backend.get_vocab(with_added_tokens=False)
    added = backend.get_added_tokens_decoder()
    size = max(max(pieces.values(), default=-1), max(added, default=-1)) + 1
    tokens = [b""] * size
    for piece, i in pieces.items():
        tokens[i] = to_bytes(piece)
    for i, token in added.items():
        # Added tokens are stored as plain text, not in the model's byte alphabet.
        tokens[i] = b"" if token.special else token.content.encode()
    return tokens


def _components(node) -> list[dict]:
    if not node:
        return []
    if node.get("type") == "Sequence":
        inner = node.get("decoders") or node.get("pretokenizers") or node.get("normalizers") or []
        return [c for n in inner for c in _components(n)]
    return [node]


def _state(component) -> dict | None:
    return json.loads(component.__getstate__()) if component is not None else None


_GPT2_TO_LATIN1 = str.maketrans({c: chr(b) for c, b in _BYTE_DECODER.items()})


def _piece_decoder(backend):
    """How a vocabulary piece spells bytes: GPT-2's byte alphabet, or SentencePiece's
    ``▁`` for space with ``<0xNN>`` byte-fallback pieces."""
    parts = _components(_state(backend.decoder)) + _components(_state(backend.pre_tokenizer))
    types = {p.get("type") for p in parts}
    if "ByteLevel" in types:
        def byte_level(piece: str) -> bytes:
            try:
                return piece.translate(_GPT2_TO_LATIN1).encode("latin-1")
            except UnicodeEncodeError:  # not in the byte alphabet: plain text
                return piece.encode()
        return byte_level
    replaces_space = any(
        p.get("type") == "Replace" and (p.get("pattern") or {}).get("String") == "▁" for p in parts
    )
    if "Metaspace" in types or replaces_space or "ByteFallback" in types:
        def sentencepiece(piece: str) -> bytes:
            m = _BYTE_FALLBACK.fullmatch(piece)
            if m:
                return bytes([int(m.group(1), 16)])
            return piece.replace("▁", " ").encode()
        return sentencepiece
    raise ConstrainedError(
        "unknown vocabulary type: the tokenizer has neither a ByteLevel decoder (GPT-2 style BPE) "
        f"nor SentencePiece's ▁ and byte fallback (decoder types found: {sorted(t for t in types if t)})"
    )
