"""The compiled walks (walks.py) on small hand-made automata: what each one
promises beyond what the mask tests check through the grammar index."""

import importlib.util

import numpy as np
import pytest

from constrained import walks


def _automaton(n_states: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """A random (states + 1) x 256 table whose last row is the dead sink, and
    ``alive`` (every state but the sink)."""
    trans = rng.integers(0, n_states + 1, size=(n_states + 1, 256)).astype(np.int32)
    trans[n_states] = n_states
    return trans, np.arange(n_states + 1) < n_states


def test_token_walk_orders_by_bytes_walked_then_place():
    """Tokens come out ordered by the bytes each walked, then by their place in
    the input, in both parts: equal groups of tokens must get equal ids."""
    rng = np.random.default_rng(0)
    trans, alive = _automaton(5, rng)
    lengths = rng.integers(1, 9, size=300)
    width = int(lengths.max())
    flat = rng.integers(0, 256, size=300 * width).astype(np.uint8)
    tok = rng.permutation(300).astype(np.int64)
    off = np.minimum(rng.integers(0, 3, size=300), lengths[tok] - 1).astype(np.int64)
    ended, _, left, left_off, _ = walks.token_walk(flat, np.arange(300) * width, lengths, trans, alive, tok, off, 0)
    place = {t: i for i, t in enumerate(tok.tolist())}
    walked_off = dict(zip(tok.tolist(), off.tolist()))
    ended_keys = [(lengths[t] - walked_off[t], place[t]) for t in ended.tolist()]
    left_keys = [(o - walked_off[t], place[t]) for t, o in zip(left.tolist(), left_off.tolist())]
    assert ended_keys == sorted(ended_keys) and left_keys == sorted(left_keys)
    assert len(ended) and len(left) and len(ended) + len(left) == 300


def test_walks_compile_without_numba_cache(monkeypatch):
    """Where numba has nowhere to write its cache (a read-only install without a
    writable home), the module still imports, compiled in the process."""
    from numba.core import caching

    monkeypatch.setattr(caching.CacheImpl, "_locator_classes", [])
    with pytest.raises(RuntimeError):
        walks.njit("(int64,)", cache=True)(lambda x: x)
    spec = importlib.util.spec_from_file_location("walks_without_cache", walks.__file__)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    trans = np.array([[1] * 256, [1] * 256], dtype=np.int32)
    trans[0, 7] = 0
    row = module.trie_row(np.array([-1, 0], np.int32), np.array([7, 7], np.uint8), np.array([0, 1, -1], np.int32),
                          trans, 0)
    assert row.tolist() == [0, 0, -1]


def test_trace_shares_paths_and_replays_every_walk():
    """A trace keeps one path per (path extended, state): no two paths repeat
    one; each token's path, followed up to the root, is its own walk byte by
    byte (until it ends or dies); tokens come ordered by the path they end on."""
    rng = np.random.default_rng(1)
    trans, _ = _automaton(4, rng)
    trans[trans == 4] = rng.integers(0, 4, size=int((trans == 4).sum()))  # dying is rare ...
    trans[:4, :3] = 4  # ... but bytes 0-2 kill every state
    trans[4] = 4
    lengths = rng.integers(1, 7, size=2000)
    width = int(lengths.max())
    flat = rng.integers(0, 12, size=2000 * width).astype(np.uint8)  # few distinct bytes: many shared paths
    tok = rng.permutation(2000).astype(np.int64)
    off = np.minimum(rng.integers(0, 2, size=2000), lengths[tok] - 1).astype(np.int64)
    starts = np.arange(2000) * width
    state, parent, depth, t_tok, t_off, end = walks.trace_tokens(flat, starts, lengths, trans, 0, tok, off)
    assert len(set(zip(parent.tolist(), state.tolist()))) == len(state) < int((lengths[tok] - off).sum())
    assert (np.diff(end) >= 0).all() and sorted(t_tok.tolist()) == sorted(tok.tolist())
    for t, o, e in zip(t_tok.tolist(), t_off.tolist(), end.tolist()):
        chain = []
        while e >= 0:
            chain.append(e)
            e = int(parent[e])
        chain.reverse()
        assert depth[chain].tolist() == list(range(len(chain)))
        path = state[chain].tolist()
        walked, s = [], 0
        for b in flat[t * width + o: t * width + lengths[t]].tolist():
            s = int(trans[s, b])
            walked.append(s)
            if s == 4:
                break
        assert path == walked


def test_entering_tokens_leaves_out_only_tokens_the_walk_would_drop():
    """A token left out of a group's walk from a fresh lexeme must leave that
    lexeme in a state where no terminal is complete: the walk would drop it.
    Those kept are exactly the ones whose next byte leads to a live state, and
    whose state after it is complete, or whose token ends, or whose byte after
    it leads to a live state: for every state but the sink live, for a
    context's narrower live states (state 3 dead: terminals it does not accept),
    and, from state 3, for one live state, which few tokens enter."""
    rng = np.random.default_rng(4)
    trans, every = _automaton(6, rng)
    trans[trans == 6] = rng.integers(0, 6, size=int((trans == 6).sum()))
    trans[:6, 200:] = 6  # bytes 200 and above kill every state
    completes = np.array([False, True, False, False, True, False, False])  # the start (0) and the sink never
    n = 3000
    lengths = rng.integers(1, 6, size=n)
    width = int(lengths.max())
    flat = rng.choice(np.r_[0:8, 200:204], size=n * width).astype(np.uint8)
    starts = np.arange(n) * width
    tok = rng.permutation(n).astype(np.int64)
    off = np.minimum(rng.integers(0, 2, size=n), lengths[tok] - 1).astype(np.int64)
    by_bytes = walks.next_two_bytes(flat, starts, lengths, tok, off)
    narrower = every & (np.arange(7) != 3)
    few = np.arange(7) == 0  # two bytes lead there from state 3: few tokens get in (read by byte, then sorted)
    for q, alive in ((0, every), (0, narrower), (3, few)):
        kept = walks.entering_tokens(*by_bytes, trans, alive, completes, q)
        expected = []
        for i, (t, o) in enumerate(zip(tok.tolist(), off.tolist())):
            s = int(trans[q, flat[starts[t] + o]])
            if alive[s] and (completes[s] or o + 1 == lengths[t] or alive[trans[s, flat[starts[t] + o + 1]]]):
                expected.append(i)
        assert kept.tolist() == expected and 0 < len(kept) < (n // 16 if alive is few else n)
        dropped = np.setdiff1d(np.arange(n), kept)
        ended, _, _, _, before = walks.token_walk(flat, starts, lengths, trans, alive, tok[dropped], off[dropped], q)
        assert len(ended) == 0 and not completes[before].any()
    assert len(set(flat[starts[tok[kept]] + off[kept]].tolist())) > 1  # (the few come by more than one byte)
    assert len(walks.entering_tokens(*by_bytes, trans, narrower, completes, 0)) < \
        len(walks.entering_tokens(*by_bytes, trans, every, completes, 0))


def test_by_terminal_sorts_tokens_by_terminal_keeping_their_order():
    rng = np.random.default_rng(5)
    term = rng.integers(-1, 6, size=500)
    term[term == 3] = -1  # a terminal no token is emitted as
    tok, off = rng.permutation(500).astype(np.int64), rng.integers(0, 9, size=500)
    terms, bounds, by_tok, by_off = walks.by_terminal(tok, off, term)
    assert terms.tolist() == [0, 1, 2, 4, 5]
    for k, a, b in zip(terms.tolist(), bounds.tolist(), bounds[1:].tolist()):
        assert by_tok[a:b].tolist() == tok[term == k].tolist() and by_off[a:b].tolist() == off[term == k].tolist()
    assert bounds[-1] == len(by_tok) == (term >= 0).sum()
    assert [len(a) for a in walks.by_terminal(tok[:0], off[:0], term[:0])] == [0, 1, 0, 0]


def test_split_bytes_counts_the_terminals_each_first_byte_enters():
    rng = np.random.default_rng(11)
    for _ in range(50):
        n, n_terms = int(rng.integers(1, 40)), int(rng.integers(1, 12))
        alive = rng.random((n, n_terms)) < 0.3
        after = rng.integers(0, n + 1, size=256).astype(np.int32)  # n: the dead sink
        live = np.sort(rng.choice(n_terms, size=int(rng.integers(1, n_terms + 1)), replace=False)).astype(np.int64)
        entered, alone, any_alone, shares = walks.split_bytes(after, alive, live)
        for i, k in enumerate(live.tolist()):
            enters = [int(after[b]) < n and bool(alive[after[b], k]) for b in range(256)]
            others = [sum(int(after[b]) < n and bool(alive[after[b], j]) for j in live.tolist() if j != k)
                      for b in range(256)]
            assert alone[i].tolist() == [e and o == 0 for e, o in zip(enters, others)]
            assert any_alone[i] == alone[i].any()
            assert shares[i] == any(e and o > 0 for e, o in zip(enters, others))
        assert entered.tolist() == [sum(int(after[b]) < n and bool(alive[after[b], k]) for k in live.tolist())
                                    for b in range(256)]


def test_numbered_below_names_states_by_the_automaton_below():
    """Two DFAs (-1 dead) that differ above a state but not below it (where
    the same states have other numbers) number the states below it alike; a
    state with more states below it than allowed gets nothing."""
    rng = np.random.default_rng(3)
    sinked, _ = _automaton(6, rng)
    below = np.where(sinked[:6] == 6, -1, sinked[:6]).astype(np.int32)  # states 0-5, -1 dead
    above = np.full((3, 256), -1, dtype=np.int32)  # states 0-2 of the larger one, leading into 3-8 ...
    above[:, :4] = rng.integers(3, 9, size=(3, 4))
    moved = np.where(below == -1, -1, below + 3)  # ... which are the first one's 0-5
    big = np.vstack([above, moved]).astype(np.int32)
    order, table = walks.numbered_below(below, 2, 100)
    big_order, big_table = walks.numbered_below(big, 2 + 3, 100)
    assert np.array_equal(table, big_table) and big_order.tolist() == (order + 3).tolist()
    assert order[0] == 2 and len(set(order.tolist())) == len(order)
    for i, state in enumerate(order.tolist()):
        expected = [-1 if t == -1 else order.tolist().index(t) for t in below[state].tolist()]
        assert table[i].tolist() == expected
    assert len(walks.numbered_below(big, 0, 100)[0]) > len(order)  # from above: the states below too
    assert len(walks.numbered_below(below, 2, 2)[0]) == 0


def test_trie_table_gives_every_token_its_state_from_every_state():
    """Each token's group row holds the state its bytes lead to from each state
    (-1 dead), read byte by byte; a token dead from every state, or without
    bytes, has no group; tokens whose bytes are the same byte classes share one.
    Bytes 0-3 only and eight states, so that many tokens stay alive."""
    from constrained.dfa import byte_classes
    from constrained.vocab import Trie

    rng = np.random.default_rng(4)
    trans, _ = _automaton(8, rng)
    trans[:, 4:] = 8  # only bytes 0-3 go anywhere
    trans[:8, 3] = trans[:8, 2]  # and bytes 2 and 3 alike: one class
    tokens = [bytes(rng.integers(0, 5, size=rng.integers(1, 7)).tolist()) for _ in range(400)] + [b""]
    trie = Trie.build(tokens)
    byte_class, columns = byte_classes(trans)
    group, rows = walks.trie_table(trie.child_start, trie.byte, trie.level_start, trie.token_node,
                                   columns.astype(np.int32), byte_class.astype(np.int32))
    for t, data in enumerate(tokens):
        after = np.arange(8)
        for b in data:
            after = trans[after, b]
        expected = np.where(after == 8, -1, after)
        if not data or (expected < 0).all():
            assert group[t] == -1
        else:
            assert rows[group[t]].tolist() == expected.tolist()
    same_classes = [t for t, data in enumerate(tokens) if data and data.replace(b"\x03", b"\x02") == tokens[0].replace(b"\x03", b"\x02")]
    assert len({int(group[t]) for t in same_classes}) == 1
    assert (group >= 0).sum() > 50 and (group[:-1] < 0).any()


def test_packed_ids_round_trip_and_match_numpy_bits():
    """Token ids packed into 32-bit words set bit (id % 32) of word (id // 32),
    the order numpy's little-endian packbits gives, and unpack ascending."""
    rng = np.random.default_rng(5)
    for ids in ([], [0], [31, 32, 63], sorted(set(rng.integers(0, 32 * 40, size=300).tolist()))):
        ids = np.array(ids, dtype=np.int64)
        packed = walks.pack_ids(ids, 40)
        bools = np.zeros(32 * 40, dtype=bool)
        bools[ids] = True
        assert np.array_equal(packed, np.packbits(bools, bitorder="little").view(np.uint32))
        assert walks.unpack_ids(packed).tolist() == ids.tolist()


def test_exits_like_agrees_with_walking_every_token():
    """A state's exits read off a donor's: the same stays and the same tokens
    completing the terminal as walking every token from the state itself,
    given the donor's own from walking."""
    rng = np.random.default_rng(6)
    n = 6
    trans, alive = _automaton(n, rng)
    trans[:n, 8:] = n  # bytes 0-7 only, so that walks go on
    trans[0, 2] = 2
    trans[1, :8] = trans[0, :8]  # state 1 goes where state 0 does, but on bytes 2 and 5
    trans[1, 2], trans[1, 5] = 3, n
    trans[3, :8] = 3  # where tokens starting with byte 2 stay, but for byte 7 (incomplete)
    trans[3, 7] = n
    trans[3, 6], trans[2, 7] = 2, n  # and complete (state 2) before byte 7
    accepting = np.array([True, False, True, False, True, False, False])
    lengths = rng.integers(1, 8, size=600)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    data = rng.integers(0, 8, size=int(lengths.sum())).astype(np.uint8)
    first = data[starts]
    by_first = np.argsort(first, kind="stable").astype(np.int64)
    first_starts = np.searchsorted(first[by_first], np.arange(257)).astype(np.int64)

    def walked(s):
        """(packed tokens that stay alive from s, the completing ones and their offsets)."""
        stay, tok, off = [], [], []
        for t in range(600):
            state = s
            for p in range(lengths[t]):
                after = trans[state, data[starts[t] + p]]
                if not alive[after]:
                    if p and accepting[state]:  # (at the first byte, the token is not the terminal's)
                        tok.append(t), off.append(p)
                    break
                state = after
            else:
                stay.append(t)
        return walks.pack_ids(np.array(stay, dtype=np.int64), 19), np.array(tok, dtype=np.int64), np.array(off, dtype=np.int64)

    d_stays, d_tok, d_off = walked(0)
    stays, tok, off = walks.exits_like(data, starts, lengths, by_first, first_starts, trans, alive,
                                       accepting, 1, 0, d_stays, d_tok, d_off)
    e_stays, e_tok, e_off = walked(1)
    assert np.array_equal(stays, e_stays)
    assert sorted(zip(tok.tolist(), off.tolist())) == sorted(zip(e_tok.tolist(), e_off.tolist()))
    # In the order a group's id digests: the donor's first, then the walked ones by offset, then first byte.
    agree = trans[1] == trans[0]
    donors = [(t, o) for t, o in zip(d_tok.tolist(), d_off.tolist()) if agree[first[t]]]
    walked_ones = sorted(((t, o) for t, o in zip(e_tok.tolist(), e_off.tolist()) if not agree[first[t]]),
                         key=lambda pair: (pair[1], first[pair[0]], pair[0]))
    assert list(zip(tok.tolist(), off.tolist())) == donors + walked_ones and len(walked_ones) > 1
