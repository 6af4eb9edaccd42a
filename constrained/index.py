"""The token index of a DFA over a vocabulary: in each state, which tokens are
allowed and the state each one leads to.

All states are computed in one breadth-first walk of the vocabulary's trie.
Trie nodes whose byte strings no state tells apart (the same sequence of the
DFA's byte classes) are merged into one *group* as the walk goes down, and each
group carries one row: the state its bytes lead to from every DFA state. A node
is dropped, with its subtree, as soon as it is dead from every state. So the
work is proportional to the number of distinct class sequences that are alive,
usually a small fraction of the vocabulary.

Afterwards ``next_state(s, t) = group_next[token_group[t], s]``, and the mask of
a state is computed on first use and kept, packed 32 tokens to a word.
"""

import numpy as np

from .dfa import DFA, byte_classes
from .errors import ConstrainedError
from .vocab import Vocabulary

FINISHED = -2  # the state after EOS: only EOS may follow


class TokenIndex:
    """Token-level transitions and masks of one DFA over one vocabulary."""

    def __init__(self, dfa: DFA, vocab: Vocabulary):
        self.dfa = dfa
        self.vocab = vocab
        self.token_group, self.group_next = _walk(dfa, vocab.trie)
        self.words = (vocab.size + 31) // 32
        self.eos = np.array(sorted(vocab.eos_ids), dtype=np.int64)
        # One slot per state, and a last one for FINISHED.
        self._masks: list[np.ndarray | None] = [None] * (dfa.n_states + 1)
        self._bool_masks: list[np.ndarray | None] = [None] * (dfa.n_states + 1)
        self._check_token_level_liveness()

    @property
    def n_states(self) -> int:
        return self.dfa.n_states

    def next_state(self, state: int, token: int) -> int:
        """The state after ``token`` (not EOS) in ``state``, or -1 if not allowed."""
        group = self.token_group[token]
        return -1 if group < 0 else int(self.group_next[group, state])

    def allowed(self, state: int) -> np.ndarray:
        """Boolean mask over the vocabulary: the tokens allowed in ``state``,
        EOS included where the state is accepting."""
        slot = state if state != FINISHED else self.n_states
        mask = self._bool_masks[slot]
        if mask is None:
            if state == FINISHED:
                mask = np.zeros(self.vocab.size, dtype=bool)
            else:
                alive = np.append(self.group_next[:, state] >= 0, False)
                mask = alive[self.token_group]  # token_group -1 picks the appended False
            if state == FINISHED or self.dfa.accepting[state]:
                mask[self.eos] = True
            mask.flags.writeable = False
            self._bool_masks[slot] = mask
        return mask

    def mask(self, state: int) -> np.ndarray:
        """The allowed tokens of ``state`` as bits: token ``t`` is bit ``t % 32``
        of word ``t // 32`` (uint32), the layout llguidance and xgrammar use."""
        slot = state if state != FINISHED else self.n_states
        packed = self._masks[slot]
        if packed is None:
            bits = np.zeros(self.words * 32, dtype=bool)
            bits[: self.vocab.size] = self.allowed(state)
            packed = np.packbits(bits, bitorder="little").view(np.uint32)
            packed.flags.writeable = False
            self._masks[slot] = packed
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
            self.group_next = np.where(live[np.maximum(self.group_next, 0)], self.group_next, -1).astype(np.int32)


def _walk(dfa: DFA, trie) -> tuple[np.ndarray, np.ndarray]:
    """(token_group, group_next): each token's group (-1 when it is dead in every
    state) and each group's row of next states (-1 dead)."""
    n_states = dfa.n_states
    sink = n_states
    table = np.vstack([dfa.transitions, np.full((1, 256), -1, dtype=np.int32)])
    table[table < 0] = sink
    byte_class, columns = byte_classes(table)
    columns = columns.astype(np.int32)
    n_classes = columns.shape[1]
    node_class = byte_class.astype(np.int32)[trie.byte]

    node_group = np.full(trie.n_nodes, -1, dtype=np.int32)
    rows = []
    n_groups = 0
    # The root's children, from the root's "group": every state leads to itself.
    parent_rows = np.arange(n_states, dtype=np.int32)[None, :]
    children = np.arange(trie.level_start[0], trie.level_start[1])
    parent_group = np.zeros(len(children), dtype=np.int32)
    while len(children):
        keys = parent_group * n_classes + node_class[children]
        # Dense renumbering of the (parent group, class) keys; cheaper than a sort.
        present = np.zeros(len(parent_rows) * n_classes, dtype=bool)
        present[keys] = True
        unique_keys = np.flatnonzero(present)
        new_rows = columns[parent_rows[unique_keys // n_classes], (unique_keys % n_classes)[:, None]]
        alive = (new_rows != sink).any(axis=1)
        local_of_key = np.full(len(present), -1, dtype=np.int32)
        local_of_key[unique_keys[alive]] = np.arange(int(alive.sum()), dtype=np.int32)
        local = local_of_key[keys]
        kept = local >= 0
        alive_nodes = children[kept]
        node_group[alive_nodes] = local[kept] + n_groups
        parent_rows = new_rows[alive]
        rows.append(parent_rows)
        n_groups += len(parent_rows)
        # The next level: the children of the alive nodes (contiguous runs).
        starts = trie.child_start[alive_nodes]
        counts = trie.child_start[alive_nodes + 1] - starts
        children = np.repeat(starts - (np.cumsum(counts) - counts), counts) + np.arange(int(counts.sum()))
        parent_group = np.repeat(local[kept], counts)

    group_next = np.vstack(rows)
    group_next[group_next == sink] = -1
    token_group = np.where(trie.token_node >= 0, node_group[np.maximum(trie.token_node, 0)], -1).astype(np.int32)
    return token_group, group_next
