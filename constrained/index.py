"""The token index of a DFA over a vocabulary: in each state, which tokens are
allowed and the state each one leads to.

All states are computed in one breadth-first walk of the vocabulary's trie.
Trie nodes whose byte strings no state tells apart (the same sequence of the
DFA's byte classes) are merged into one *group* as the walk goes down, and each
group carries one row: the state its bytes lead to from every DFA state. A node
is dropped, with its subtree, as soon as it is dead from every state. So the
work is proportional to the number of distinct class sequences that are alive,
usually a small fraction of the vocabulary.

Afterwards ``next_state(s, t) = group_next[token_group[t], s]``. States that
allow the same groups (and agree on acceptance) share one mask, packed 32
tokens to a word; all masks are built at compile time when that is cheap, else
each on first use, and kept.
"""

from collections import OrderedDict

import numpy as np

from .dfa import DFA, byte_classes
from .errors import ConstrainedError
from .vocab import Vocabulary
from .walks import trie_table

FINISHED = -2  # the state after EOS: only EOS may follow
EAGER_MASK_WORK = 40_000_000  # build all masks up front when (live tokens x distinct masks) stays under this
MASK_CHUNK_WORK = 2_000_000  # and build them this many (token, mask) pairs at a time


class TokenIndex:
    """Token-level transitions and masks of one DFA over one vocabulary."""

    def __init__(self, dfa: DFA, vocab: Vocabulary):
        self.dfa = dfa
        self.vocab = vocab
        self.token_group, self.group_next = walk_trie(dfa, vocab.trie)
        self._check_token_level_liveness()
        self.words = (vocab.size + 31) // 32
        self.eos = np.array(sorted(vocab.eos_ids), dtype=np.int64)
        # Tokens alive in some state (ascending), their groups, and their place in the packed words.
        self._live_tokens = np.flatnonzero(self.token_group >= 0)
        self._live_groups = self.token_group[self._live_tokens]
        self._bit = np.left_shift(np.uint32(1), (self._live_tokens & 31).astype(np.uint32))
        word = self._live_tokens >> 5
        self._word_starts = np.flatnonzero(np.r_[True, word[1:] != word[:-1]]) if len(word) else word
        self._words_touched = word[self._word_starts]
        # States with the same allowed groups and acceptance share a mask; the
        # last mask id is FINISHED's (EOS only).
        alive = self.group_next >= 0
        keys = np.vstack([alive, dfa.accepting[None, :]]).T
        self.mask_id = _first_seen_ids(keys)
        n_masks = int(self.mask_id.max()) + 1
        self._representative = np.zeros(n_masks, dtype=np.int64)
        self._representative[self.mask_id[::-1]] = np.arange(dfa.n_states)[::-1]
        self._masks: list[np.ndarray | None] = [None] * (n_masks + 1)
        self.bias_cache: OrderedDict = OrderedDict()  # the processor's MLX vectors, per mask
        live = max(len(self._live_tokens), 1)
        if live * n_masks <= EAGER_MASK_WORK:
            chunk = max(1, MASK_CHUNK_WORK // live)
            for first in range(0, n_masks, chunk):
                self._masks[first:first + chunk] = list(self._build_masks(self._representative[first:first + chunk]))

    @property
    def n_states(self) -> int:
        return self.dfa.n_states

    def next_state(self, state: int, token: int) -> int:
        """The state after ``token`` (not EOS) in ``state``, or -1 if not allowed."""
        group = self.token_group[token]
        return -1 if group < 0 else int(self.group_next[group, state])

    def mask(self, state: int) -> np.ndarray:
        """The tokens allowed in ``state`` (EOS where it is accepting) as bits:
        token ``t`` is bit ``t % 32`` of word ``t // 32`` (uint32), the layout
        llguidance and xgrammar use."""
        slot = len(self._masks) - 1 if state == FINISHED else self.mask_id[state]
        packed = self._masks[slot]
        if packed is None:
            packed = self._masks[slot] = self._build_masks(None if state == FINISHED else [state])[0]
        return packed

    def _build_masks(self, states) -> np.ndarray:
        """Packed masks of ``states`` (None: FINISHED): each token's bit is
        summed into its word, which ORs them since the bits are distinct."""
        if states is None:
            packed = np.zeros((1, self.words), dtype=np.uint32)
            accepting = [True]
        else:
            states = np.asarray(states)
            allowed = self.group_next[:, states][self._live_groups] >= 0
            packed = np.zeros((len(states), self.words), dtype=np.uint32)
            if len(self._live_tokens):
                sums = np.add.reduceat(allowed * self._bit[:, None], self._word_starts, axis=0)
                packed[:, self._words_touched] = sums.T
            accepting = self.dfa.accepting[states]
        eos = self.eos
        packed[np.ix_(np.flatnonzero(accepting), eos >> 5)] |= np.left_shift(np.uint32(1), (eos & 31).astype(np.uint32))
        packed.flags.writeable = False
        return packed

    def _check_token_level_liveness(self) -> None:
        """Every live byte state must be completable with whole tokens. That holds
        when each of the 256 bytes is a token; otherwise check it."""
        if self.vocab.spells_every_byte:
            return
        live = self.dfa.accepting.copy()
        valid = self.group_next >= 0
        targets = np.where(valid, self.group_next, 0)
        while True:
            reach = (valid & live[targets]).any(axis=0) | self.dfa.accepting
            if (reach == live).all():
                break
            live = reach
        if not live[self.dfa.start]:
            raise ConstrainedError("no sequence of this vocabulary's tokens spells a string of the language")
        if not live.all():
            self.group_next = np.where(live[np.maximum(self.group_next, 0)], self.group_next, -1).astype(self.group_next.dtype)


def _first_seen_ids(rows: np.ndarray) -> np.ndarray:
    """Dense ids for equal rows, numbered in order of first appearance."""
    _, first, inverse = np.unique(np.packbits(rows, axis=1), axis=0, return_index=True, return_inverse=True)
    rank = np.empty(len(first), dtype=np.int64)
    rank[np.argsort(first)] = np.arange(len(first))
    return rank[inverse.ravel()]


def walk_trie(dfa: DFA, trie) -> tuple[np.ndarray, np.ndarray]:
    """(token_group, group_next): each token's group (-1 when it is dead in every
    state) and each group's row of next states (-1 dead), by ``walks.trie_table``."""
    n_states = dfa.n_states
    table = np.vstack([dfa.transitions, np.full((1, 256), -1, dtype=np.int32)])
    table[table < 0] = n_states  # the sink
    byte_class, columns = byte_classes(table)
    token_group, group_next = trie_table(trie.child_start, trie.byte, trie.level_start, trie.token_node,
                                         columns.astype(np.int32), byte_class.astype(np.int32))
    if n_states < 2**15:  # the table is groups x states: halve it when states fit
        group_next = group_next.astype(np.int16)
    return token_group, group_next
