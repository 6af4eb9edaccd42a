"""Hypothesis strategy for members of a DFA's language: random walks that stop
in accepting states, and steer to the nearest accepting state once long."""

from functools import lru_cache

import numpy as np
from hypothesis import strategies as st


@lru_cache(maxsize=64)
def _distances(dfa) -> np.ndarray:
    """Bytes from each state to the nearest accepting state."""
    far = dfa.n_states  # more than any real distance
    distance = np.where(dfa.accepting, 0, far)
    for _ in range(dfa.n_states):
        reachable = np.where(dfa.transitions >= 0, distance[np.maximum(dfa.transitions, 0)], far)
        new = np.minimum(distance, reachable.min(axis=1) + 1)
        if np.array_equal(new, distance):
            break
        distance = new
    return distance


def members(dfa, max_size: int = 40):
    """Byte strings the DFA accepts."""
    distance = _distances(dfa)

    @st.composite
    def walk(draw):
        state, out = dfa.start, bytearray()
        while True:
            options = np.flatnonzero(dfa.transitions[state] >= 0)
            if len(out) >= max_size:  # only moves that get closer to the end
                options = options[distance[dfa.transitions[state, options]] < distance[state]]
            stop = bool(dfa.accepting[state])
            if not len(options):
                return bytes(out)
            choice = draw(st.integers(0, len(options) - 1 + stop))
            if choice == len(options):
                return bytes(out)
            out.append(int(options[choice]))
            state = int(dfa.transitions[state, options[choice]])

    return walk()
