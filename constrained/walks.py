"""The loops of a mask that read tokens byte by byte through an automaton: a group
of tokens sifted by their next two bytes (``next_two_bytes``,
``entering_tokens``), walked through a lexeme (``token_walk``), or traced once
for every context (``trace_tokens``) and read off by each (``trace_read``), and
those that leave it sorted by the terminal emitted (``by_terminal``); a lexer
state's first bytes split among its terminals (``split_bytes``); the trie
walked below the nodes a state keeps alive (``narrow_walk``), or whole, for
where every token leaves a state (``trie_exits``), a large terminal's state
after every token (``trie_row``) or a small automaton's states after every
token from every state (``trie_table``); a state's exits read off another
state's (``exits_like``); an automaton's states below one state, numbered
alike wherever the automaton below is the same (``numbered_below``); and sets
of tokens packed into a mask's 32-bit words and back (``pack_ids``,
``unpack_ids``). The walks run once per new situation of a mask, on thousands
of tokens or the whole trie, and the packing many times a step; numpy would
pay a call per byte position or trie level and a pass over the data per
operation, so they are compiled with numba.

An automaton here is ``trans``, (states + 1) x 256, whose last row is a dead
sink every byte leads to; ``alive`` says which of its states a walk may stay in.
Token t's bytes are ``data[starts[t]:starts[t] + lengths[t]]``: the vocabulary
one token after the other, under a megabyte, where padded rows would take
sixteen and a cache miss per token.
Each function is compiled for the array types in its signature when this module
is imported (numba keeps the machine code in its cache, but loading it into a
new process still takes about half a second, which would otherwise land in some
mask step).
"""

import numpy as np
from numba import njit


def compiled(signature: str):
    """numba's njit for ``signature``, kept in numba's cache; without the cache
    where numba finds no writable place for it (a read-only install with no
    writable home), which would otherwise fail the import."""

    def decorate(function):
        try:
            return njit(signature, cache=True)(function)
        except RuntimeError:  # "cannot cache function ...: no locator available"
            return njit(signature)(function)

    return decorate


@compiled("(uint8[::1], int64[::1], int64[::1], int32[:, ::1], boolean[::1], int64[::1], int64[::1], int64)")
def token_walk(data, starts, lengths, trans, alive, tok, off, q):
    """Walk each token ``tok[i]`` from its byte ``off[i]`` in state q until it
    ends or its next byte leads where ``alive`` is false. Returns (the tokens
    that ended, their states; the tokens that left, the offset of the byte that
    did not fit, the state before it), each part ordered by the bytes walked,
    then by place in ``tok``: the same tokens always come out in the same order,
    which the ids of groups built from them rely on."""
    n = len(tok)
    left = np.empty(n, np.bool_)
    walked = np.empty(n, np.int64)
    state = np.empty(n, np.int64)
    pos = np.empty(n, np.int64)
    longest = 0
    for i in range(n):
        t, p, s = tok[i], off[i], q
        end, base = lengths[t], starts[t]
        out = False
        while p < end:
            after = trans[s, data[base + p]]
            if not alive[after]:
                out = True
                break
            s = after
            p += 1
        left[i], walked[i], state[i], pos[i] = out, p - off[i], s, p
        longest = max(longest, p - off[i])
    # A counting sort by (left, bytes walked), stable: place in tok breaks ties.
    starts = np.zeros(2 * (longest + 1) + 1, np.int64)
    for i in range(n):
        starts[left[i] * (longest + 1) + walked[i] + 1] += 1
    for k in range(1, len(starts)):
        starts[k] += starts[k - 1]
    order = np.empty(n, np.int64)
    for i in range(n):
        k = left[i] * (longest + 1) + walked[i]
        order[starts[k]] = i
        starts[k] += 1
    n_ended = n - int(left.sum())
    ended, leaving = order[:n_ended], order[n_ended:]
    return tok[ended], state[ended], tok[leaving], pos[leaving], state[leaving]


@compiled("(uint8[::1], int64[::1], int64[::1], int64[::1], int64[::1])")
def next_two_bytes(data, starts, lengths, tok, off):
    """For ``entering_tokens``: each token's byte after its next one (256 where
    the token ends before), and the tokens' places by their next byte: byte b's
    are ``order[bounds[b]:bounds[b + 1]]``, ascending."""
    n = len(tok)
    first = np.empty(n, np.uint8)
    second = np.empty(n, np.int16)
    bounds = np.zeros(257, np.int32)
    for i in range(n):
        at = starts[tok[i]] + off[i]
        first[i] = data[at]
        second[i] = data[at + 1] if off[i] + 1 < lengths[tok[i]] else 256
        bounds[first[i] + 1] += 1
    for b in range(256):
        bounds[b + 1] += bounds[b]
    order = np.empty(n, np.int32)
    fill = bounds[:256].copy()  # per byte, where its next place goes
    for i in range(n):
        order[fill[first[i]]] = i
        fill[first[i]] += 1
    return second, order, bounds


@compiled("(int16[::1], int32[::1], int32[::1], int32[:, ::1], boolean[::1], boolean[::1], int64)")
def entering_tokens(second, order, bounds, trans, alive, completes, q):
    """The places of the tokens worth walking from a fresh lexeme in state q,
    ascending, given their next two bytes (``next_two_bytes``). A token is left
    out where its next byte leads to a state ``alive`` does not hold, or where
    that byte reaches a state in which no terminal is complete (``completes``)
    and the byte after it leads to one ``alive`` does not hold: the lexeme dies
    there without emitting anything, so the walk would drop the token. Only
    the tokens whose next byte lets them in are read: after a space, most
    tokens of a group go on with a letter, which a value's start does not take."""
    n = len(second)
    kept = np.empty(n, np.int64)
    m = 0
    for b in range(256):
        s = trans[q, b]
        if bounds[b] == bounds[b + 1] or not alive[s]:
            continue
        for j in range(bounds[b], bounds[b + 1]):
            i = order[j]
            if completes[s] or second[i] == 256 or alive[trans[s, second[i]]]:
                kept[m] = i
                m += 1
    if m * 16 < n:  # few: sorting them costs less than a pass over all
        return np.sort(kept[:m])
    keep = np.zeros(n, np.bool_)
    for j in range(m):
        keep[kept[j]] = True
    return np.flatnonzero(keep)


@compiled("(int32[::1], boolean[:, ::1], int64[::1])")
def split_bytes(after, alive, live):
    """How the first bytes of tokens split among the terminals ``live`` from a
    lexer state whose next states are ``after`` (``alive``: per state, per
    terminal, without the dead sink's row): (per byte, how many of them it
    enters; per terminal, the bytes that enter it and no other, whether there
    are any, and whether some byte enters it and another terminal too)."""
    n, m = alive.shape[0], len(live)
    entered = np.zeros(256, np.int64)
    for b in range(256):
        if after[b] < n:
            for i in range(m):
                entered[b] += alive[after[b], live[i]]
    alone = np.zeros((m, 256), np.bool_)
    any_alone = np.zeros(m, np.bool_)
    shares = np.zeros(m, np.bool_)
    for b in range(256):
        if after[b] < n:
            for i in range(m):
                if alive[after[b], live[i]]:
                    if entered[b] == 1:
                        alone[i, b] = any_alone[i] = True
                    else:
                        shares[i] = True
    return entered, alone, any_alone, shares


@compiled("(int64[::1], int64[::1], int64[::1])")
def by_terminal(tok, off, term):
    """Tokens leaving a lexeme, by the terminal each is emitted as (``term``,
    -1: dropped): (the terminals, ascending; where each one's tokens begin in
    the next two arrays, and the end; the tokens and their offsets, by
    terminal, each terminal's in their order in ``tok``)."""
    most = -1
    for t in term:
        most = max(most, t)
    begin = np.zeros(most + 2, np.int64)
    for t in term:
        if t >= 0:
            begin[t + 1] += 1
    n_terms = 0
    for k in range(most + 1):
        n_terms += begin[k + 1] > 0
        begin[k + 1] += begin[k]
    out_tok = np.empty(begin[most + 1], np.int64)
    out_off = np.empty(begin[most + 1], np.int64)
    at = begin[:most + 1].copy()
    for i in range(len(term)):
        t = term[i]
        if t >= 0:
            out_tok[at[t]], out_off[at[t]] = tok[i], off[i]
            at[t] += 1
    terms = np.empty(n_terms, np.int64)
    bounds = np.empty(n_terms + 1, np.int64)
    j = 0
    for k in range(most + 1):
        if begin[k + 1] > begin[k]:
            terms[j], bounds[j] = k, begin[k]
            j += 1
    bounds[n_terms] = begin[most + 1]
    return terms, bounds, out_tok, out_off


@compiled("(int32[::1], uint8[::1], int32[::1], int32[:, ::1], int64)")
def trie_row(parent, byte, token_node, trans, s):
    """Per token, the state after its bytes from state s (-1: dead), from one
    pass over the trie's nodes breadth first (a parent comes before its
    children; a walk depth first would skip dead subtrees but wait on each
    node's parent, and rows are walked for DFAs that keep most tokens alive)."""
    dead = trans.shape[0] - 1
    state = np.empty(len(parent), np.int32)
    for i in range(len(parent)):
        above = s if parent[i] < 0 else state[parent[i]]
        state[i] = dead if above == dead else trans[above, byte[i]]
    row = np.empty(len(token_node), np.int32)
    for t in range(len(token_node)):
        node = token_node[t]
        row[t] = -1 if node < 0 or state[node] == dead else state[node]
    return row


@compiled("(int32[::1], uint8[::1], int32[::1], int32[::1], int32[:, ::1], int32[::1])")
def trie_table(child_start, byte, level_start, token_node, columns, byte_class):
    """(each token's group, -1 where it is dead from every state; each group's
    row of next states, one per state of ``columns`` but its last, the sink):
    the trie walked down, level by level, from the nodes alive from some state.
    ``columns`` is an automaton with a column per byte class (``byte_class``
    of each byte). The children of one group's nodes with bytes of one class
    fare alike from every state, so they form one group, with one row; groups
    are numbered level by level, in the order of (their parent's group, the
    class)."""
    sink = columns.shape[0] - 1
    n_classes = columns.shape[1]
    rows = np.empty((64, sink), np.int32)
    n_groups = 0
    node_group = np.full(len(byte), -1, np.int32)
    parents = np.empty((1, sink), np.int32)  # the previous level's rows; the root's leads every state to itself
    for s in range(sink):
        parents[0, s] = s
    nodes = np.arange(level_start[0], level_start[1])
    node_parent = np.zeros(len(nodes), np.int64)  # each node's parent group, numbered within its level
    while len(nodes):
        key = node_parent * n_classes + byte_class[byte[nodes]]  # each node's (parent group, class)
        present = np.zeros(len(parents) * n_classes, np.bool_)
        present[key] = True
        local = np.full(len(present), -1, np.int64)  # each key's group, numbered within the level; -1: dead
        n_level = 0
        for k in np.flatnonzero(present):
            parent, c = k // n_classes, k % n_classes
            alive = False
            for s in range(sink):
                alive |= columns[parents[parent, s], c] != sink
            if not alive:
                continue
            if n_groups + n_level == len(rows):
                grown = np.empty((2 * len(rows), sink), np.int32)
                grown[:len(rows)] = rows
                rows = grown
            for s in range(sink):
                rows[n_groups + n_level, s] = columns[parents[parent, s], c]
            local[k] = n_level
            n_level += 1
        group = local[key]
        n_next = 0
        for i in range(len(nodes)):
            if group[i] >= 0:
                n_next += child_start[nodes[i] + 1] - child_start[nodes[i]]
        next_nodes = np.empty(n_next, np.int64)
        next_parent = np.empty(n_next, np.int64)
        j = 0
        for i in range(len(nodes)):
            if group[i] < 0:
                continue
            node_group[nodes[i]] = n_groups + group[i]
            for child in range(child_start[nodes[i]], child_start[nodes[i] + 1]):
                next_nodes[j], next_parent[j] = child, group[i]
                j += 1
        parents = rows[n_groups:n_groups + n_level].copy()
        n_groups += n_level
        nodes, node_parent = next_nodes, next_parent
    token_group = np.full(len(token_node), -1, np.int32)
    for t in range(len(token_node)):
        if token_node[t] >= 0:
            token_group[t] = node_group[token_node[t]]
    group_next = rows[:n_groups].copy()
    for g in range(n_groups):
        for s in range(sink):
            if group_next[g, s] == sink:
                group_next[g, s] = -1
    return token_group, group_next


@compiled("(int32[::1], uint8[::1], int32[::1], int32[::1], int32[:, ::1], int64, boolean[::1])")
def trie_exits(parent, byte, level_start, token_node, trans, q, alive):
    """Per token, where reading its bytes from state q first leads to a state
    ``alive`` does not hold: (the offset of that byte, -1 where none does or the
    token has no bytes; the state before it, or where none does, the state
    after the token, -1 where it has no bytes), from one pass over the trie's
    nodes breadth first, as ``trie_row``. For many tokens at once: a walk down
    the trie below the live nodes (``narrow_walk``) costs more per node once it
    reaches a good part of the trie."""
    left_at = np.empty(len(parent), np.int32)  # per node: the depth of the byte that leaves, or -1
    state = np.empty(len(parent), np.int32)  # per node: the state reached, or the state before that byte
    for d in range(len(level_start) - 1):
        for i in range(level_start[d], level_start[d + 1]):
            above = parent[i]
            if above >= 0 and left_at[above] >= 0:
                left_at[i], state[i] = left_at[above], state[above]
                continue
            s = q if above < 0 else state[above]
            after = trans[s, byte[i]]
            if alive[after]:
                left_at[i], state[i] = -1, after
            else:
                left_at[i], state[i] = d, s
    off = np.full(len(token_node), -1, np.int64)
    before = np.full(len(token_node), -1, np.int64)
    for t in range(len(token_node)):
        node = token_node[t]
        if node >= 0:
            off[t], before[t] = left_at[node], state[node]
    return off, before


@njit  # compiled into narrow_walk, and cached with it
def _walk_below(child_start, byte, first, end, trans, q, alive, reached, left, before, depth):
    """``narrow_walk``'s walk of the trie, writing the nodes reached and left
    (with the state before, and depth) into the arrays as far as they reach;
    returns how many nodes it reached and left. (Run twice, to count and then
    to fill: arrays that grow in the loop would cost reference counting at
    every step.)"""
    n_reached = n_left = 0
    todo = [(first, end, q, 0)]  # nodes whose children are yet to walk: first child, end, state, depth
    while todo:
        a, b, s, d = todo.pop()
        for c in range(a, b):
            t = trans[s, byte[c]]
            if alive[t]:
                if n_reached < len(reached):
                    reached[n_reached] = c
                n_reached += 1
                if child_start[c] < child_start[c + 1]:
                    todo.append((np.int64(child_start[c]), np.int64(child_start[c + 1]), np.int64(t), d + 1))
            else:
                if n_left < len(left):
                    left[n_left], before[n_left], depth[n_left] = c, s, d
                n_left += 1
    return n_reached, n_left


@compiled("(int32[::1], uint8[::1], int64, int64, int32[:, ::1], int64, boolean[::1], boolean[::1], "
           "int64[::1], int64[::1], int64[::1], int64[::1], int64[::1])")
def narrow_walk(child_start, byte, first, end, trans, q, alive, accepting, spelled, spelled_start, below,
                below_first, below_end):
    """For an automaton that few tokens keep alive from state q (a literal, an
    enum): the trie walked from q (its first bytes are nodes first..end) below
    the nodes where ``alive`` holds only. Returns (the tokens spelled at the
    nodes reached, ascending; the tokens that complete the automaton and go on,
    below a node past the first byte where it stops holding after an
    ``accepting`` state, with the offset of that byte).
    Node n spells ``spelled[spelled_start[n]:spelled_start[n + 1]]``, and has
    ``below[below_first[n]:below_end[n]]`` at or below it. Children of a node
    are ``child_start[n]`` to ``child_start[n + 1]``."""
    nothing = np.empty(0, np.int64)
    n_reached, n_left = _walk_below(child_start, byte, first, end, trans, q, alive, nothing, nothing, nothing, nothing)
    reached = np.empty(n_reached, np.int64)
    left, before, depth = np.empty(n_left, np.int64), np.empty(n_left, np.int64), np.empty(n_left, np.int64)
    _walk_below(child_start, byte, first, end, trans, q, alive, reached, left, before, depth)
    count = 0
    for i in range(n_reached):
        count += spelled_start[reached[i] + 1] - spelled_start[reached[i]]
    tokens = np.empty(count, np.int64)
    k = 0
    for i in range(n_reached):
        for j in range(spelled_start[reached[i]], spelled_start[reached[i] + 1]):
            tokens[k] = spelled[j]
            k += 1
    count = 0
    for i in range(n_left):
        if depth[i] > 0 and accepting[before[i]]:
            count += below_end[left[i]] - below_first[left[i]]
    leaving, offsets = np.empty(count, np.int64), np.empty(count, np.int64)
    k = 0
    for i in range(n_left):
        if depth[i] > 0 and accepting[before[i]]:
            for j in range(below_first[left[i]], below_end[left[i]]):
                leaving[k], offsets[k] = below[j], depth[i]
                k += 1
    return np.sort(tokens), leaving, offsets


@compiled("(int64[::1], int32[::1], int64[::1], int64[::1], int64[::1], int64[::1], boolean[::1], boolean[::1], "
           "int64)")
def trace_read(parent, state, end, depth, tok, off, alive, valid, q):
    """One context's walk read off a trace (see grammar_index._Trace: path i
    reaches ``state[i]``, extends path ``parent[i]``; token ``tok[j]`` ends on
    path ``end[j]``), where ``alive`` says which lexer states the context stays
    in. Returns (the tokens that end inside, in a state ``valid`` holds; the
    tokens that leave, the offset of the byte that does not fit, the state
    before it), in the trace's order of tokens."""
    out = np.empty(len(parent), np.int64)  # per path: the path where it leaves, or -1
    for i in range(len(parent)):
        above = parent[i]
        if above >= 0 and out[above] >= 0:
            out[i] = out[above]
        else:
            out[i] = -1 if alive[state[i]] else i
    n_ended = 0
    for j in range(len(tok)):
        n_ended += out[end[j]] < 0
    accepted = np.empty(n_ended, np.int64)
    n_accepted = 0
    left_tok = np.empty(len(tok) - n_ended, np.int64)
    left_off = np.empty(len(tok) - n_ended, np.int64)
    left_state = np.empty(len(tok) - n_ended, np.int64)
    n_left = 0
    for j in range(len(tok)):
        at = out[end[j]]
        if at < 0:
            if valid[state[end[j]]]:
                accepted[n_accepted] = tok[j]
                n_accepted += 1
        else:
            left_tok[n_left] = tok[j]
            left_off[n_left] = off[j] + depth[at]
            left_state[n_left] = q if parent[at] < 0 else state[parent[at]]
            n_left += 1
    return accepted[:n_accepted], left_tok, left_off, left_state


@compiled("(uint8[::1], int64[::1], int64[::1], int32[:, ::1], int64, int64[::1], int64[::1])")
def trace_tokens(vocab_data, starts, lengths, trans, q, tok, off):
    """Walk each token ``tok[j]`` from its byte ``off[j]`` in state q, byte by
    byte, until it ends or dies; tokens that pass through the same states share
    one path (grammar_index._Trace). Returns (per path: its state, the path it
    extends or -1, its depth; the tokens with their offsets ordered by the path
    each ends on, and that path). A level's paths are numbered by the path they
    extend, then in the order the tokens reach them.

    Each level is read in the order of the paths its tokens are on, so the
    tokens that extend one path come together, and a table per state says
    which path it last extended into which new path: linear in the bytes read,
    where sorting each level's paths was not (30 against 12 ms for a group of
    121,000 tokens)."""
    dead = trans.shape[0] - 1
    n = len(tok)
    # Each token's bytes from its offset, one after the other (``data[pos[j]:stop[j]]``):
    # levels read them out of order, and the vocabulary's tokens lie far apart.
    room = 0
    for j in range(n):
        room += lengths[tok[j]] - off[j]
    data = np.empty(room, np.uint8)
    pos, stop = np.empty(n, np.int64), np.empty(n, np.int64)
    k = 0
    for j in range(n):
        pos[j] = k
        for at in range(starts[tok[j]] + off[j], starts[tok[j]] + lengths[tok[j]]):
            data[k] = vocab_data[at]
            k += 1
        stop[j] = k
    path_state = np.empty(room, np.int32)
    path_parent = np.empty(room, np.int64)
    path_depth = np.empty(room, np.int64)
    extended = np.full(dead + 1, -2, np.int64)  # per state: the path a new path last extended into it
    into = np.empty(dead + 1, np.int64)  # ... and that new path
    # The tokens still walking, grouped by the path they are on: index in tok, path, state (and pos, stop).
    who, on, state = np.arange(n), np.full(n, -1, np.int64), np.full(n, q, np.int64)
    who2, on2, state2, pos2, stop2 = (np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.int64),
                                      np.empty(n, np.int64), np.empty(n, np.int64))
    end = np.empty(n, np.int64)
    goes = np.empty(n, np.bool_)
    total = depth = 0
    walking = n
    while walking:
        first = total
        slot = np.zeros(walking + 1, np.int64)  # per new path, the tokens going on from it (then where they go)
        for i in range(walking):
            s = trans[state[i], data[pos[i]]]
            if extended[s] != on[i]:
                extended[s], into[s] = on[i], total
                path_state[total], path_parent[total], path_depth[total] = s, on[i], depth
                total += 1
            state[i], on[i] = s, into[s]
            goes[i] = s < dead and pos[i] + 1 < stop[i]
            if goes[i]:
                slot[on[i] - first + 1] += 1
            else:
                end[who[i]] = on[i]
        # The tokens that go on, regrouped by their new path (a counting sort).
        for k in range(1, total - first + 1):
            slot[k] += slot[k - 1]
        for i in range(walking):
            if goes[i]:
                k = slot[on[i] - first]
                slot[on[i] - first] += 1
                who2[k], on2[k], state2[k], pos2[k], stop2[k] = who[i], on[i], state[i], pos[i] + 1, stop[i]
        walking = slot[total - first]
        who, who2, on, on2, state, state2, pos, pos2, stop, stop2 = who2, who, on2, on, state2, state, pos2, pos, stop2, stop
        depth += 1
    # The tokens ordered by the path they end on (a counting sort: stable).
    slot = np.zeros(total + 1, np.int64)
    for j in range(n):
        slot[end[j] + 1] += 1
    for k in range(1, total + 1):
        slot[k] += slot[k - 1]
    order = np.empty(n, np.int64)
    for j in range(n):
        order[slot[end[j]]] = j
        slot[end[j]] += 1
    # copies, since the buffers were sized for the worst case and traces are kept
    paths = path_state[:total].copy(), path_parent[:total].copy(), path_depth[:total].copy()
    return paths + (tok[order], off[order], end[order])


@compiled("(int32[:, ::1], int64, int64)")
def numbered_below(trans, s, most):
    """The states s leads to (s included), in breadth-first order with bytes
    ascending, and their transitions with the states renumbered in that order
    (-1: dead): the same for any two states with the same automaton below
    them. ``trans`` is a DFA's own transitions (-1 dead, no sink row). Empty
    where there are more than ``most`` (at most 127) states."""
    dead = -1
    number = np.full(trans.shape[0], -1, np.int64)
    order = np.empty(most, np.int64)
    order[0], number[s] = s, 0
    n, i = 1, 0
    while i < n:
        for b in range(256):
            t = trans[order[i], b]
            if t != dead and number[t] < 0:
                if n == most:
                    return np.empty(0, np.int64), np.empty((0, 256), np.int8)
                order[n], number[t] = t, n
                n += 1
        i += 1
    table = np.empty((n, 256), np.int8)
    for i in range(n):
        for b in range(256):
            t = trans[order[i], b]
            table[i, b] = -1 if t == dead else number[t]
    return order[:n].copy(), table


@compiled("(uint8[::1], int64[::1], int64[::1], int64[::1], int64[::1], int32[:, ::1], boolean[::1], boolean[::1], "
           "int64, int64, uint32[::1], int64[::1], int64[::1])")
def exits_like(data, starts, lengths, by_first, first_starts, trans, alive, accepting, s, donor, d_stays, d_tok, d_off):
    """State s's exits from a donor state's (``_TerminalTokens._exits_like``):
    tokens whose first byte takes both to the same state fare alike; the
    others alive from s are walked (the usable tokens by first byte are
    ``by_first[first_starts[b]:first_starts[b + 1]]``, ascending). Returns (the
    packed tokens that keep s alive; the tokens that complete s's terminal and
    go on, with the offset of the byte that starts the next lexeme: the donor's
    ``d_tok``, ``d_off`` whose first byte agrees, then the walked ones by
    offset)."""
    stays = d_stays.copy()
    n_walked = 0
    for b in range(256):
        if trans[s, b] != trans[donor, b]:
            for i in range(first_starts[b], first_starts[b + 1]):
                t = by_first[i]
                stays[t >> 5] &= ~(np.uint32(1) << np.uint32(t & 31))
            if alive[trans[s, b]]:
                n_walked += first_starts[b + 1] - first_starts[b]
    left = np.empty(n_walked, np.int64)
    left_off = np.empty(n_walked, np.int64)
    n_left = 0
    for b in range(256):
        if trans[s, b] == trans[donor, b] or not alive[trans[s, b]]:
            continue
        for i in range(first_starts[b], first_starts[b + 1]):
            t = by_first[i]
            state, p, end, base = s, 0, lengths[t], starts[t]
            while p < end:
                after = trans[state, data[base + p]]
                if not alive[after]:
                    break
                state = after
                p += 1
            if p == end:
                stays[t >> 5] |= np.uint32(1) << np.uint32(t & 31)
            elif accepting[state]:
                left[n_left], left_off[n_left] = t, p
                n_left += 1
    by_off = np.argsort(left_off[:n_left], kind="mergesort")
    n_kept = 0
    for t in d_tok:
        n_kept += trans[s, data[starts[t]]] == trans[donor, data[starts[t]]]
    tok = np.empty(n_kept + n_left, np.int64)
    off = np.empty(n_kept + n_left, np.int64)
    j = 0
    for i in range(len(d_tok)):
        first = data[starts[d_tok[i]]]
        if trans[s, first] == trans[donor, first]:
            tok[j], off[j] = d_tok[i], d_off[i]
            j += 1
    for i in by_off:
        tok[j], off[j] = left[i], left_off[i]
        j += 1
    return stays, tok, off


@compiled("(int64[::1], int64)")
def pack_ids(ids, words):
    """``words`` 32-bit words with the bits of tokens ``ids`` set."""
    packed = np.zeros(words, np.uint32)
    for t in ids:
        packed[t >> 5] |= np.uint32(1) << np.uint32(t & 31)
    return packed


@compiled("(uint32[::1],)")
def unpack_ids(packed):
    """The tokens whose bits are set in ``packed``, ascending."""
    ids = np.empty(32 * len(packed), np.int64)
    n = 0
    for i in range(len(packed)):
        w = np.int64(packed[i])
        t = i * 32
        while w:
            if w & 1:
                ids[n] = t
                n += 1
            w >>= 1
            t += 1
    return ids[:n].copy()
