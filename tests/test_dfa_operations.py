"""Operations on DFA languages (intersection, union, difference, complement,
emptiness, literals): each agrees with the boolean combination of its inputs'
verdicts (from_regex itself is checked against Python's re in test_dfa.py), and
returns a minimal DFA."""

import numpy as np
import pytest
from hypothesis import given, strategies as st

from constrained import ConstrainedError
from constrained.dfa import (
    DFA,
    MAX_STATES,
    complement,
    difference,
    empty,
    ending_counts,
    finite_after,
    from_regex,
    intersect,
    is_empty,
    is_finite,
    is_subset,
    literal,
    longest,
    minimize,
    union,
)
from regex_strategies import compile_or_reject, regexes, texts


def moore_blocks(transitions, accepting) -> int:
    """The number of classes of equivalent states, by textbook Moore refinement
    (one state per class in a minimal DFA)."""
    block = accepting.astype(np.int64)
    while True:
        successors = np.where(transitions >= 0, block[np.maximum(transitions, 0)], -1)
        _, refined = np.unique(np.column_stack([block, successors]), axis=0, return_inverse=True)
        refined = refined.ravel()
        if len(np.unique(refined)) == len(np.unique(block)):
            return len(np.unique(refined))
        block = refined


def assert_minimal(dfa):
    """Every state is live, and no two states are equivalent (both by textbook
    Moore refinement and by minimize() from scratch)."""
    if is_empty(dfa):
        assert dfa.n_states == 1 and (dfa.transitions < 0).all()
        return
    assert moore_blocks(dfa.transitions, dfa.accepting) == dfa.n_states
    again = minimize(dfa.transitions, dfa.accepting)
    assert again.n_states == dfa.n_states
    live = dfa.accepting.copy()
    for _ in range(dfa.n_states):
        live |= ((dfa.transitions >= 0) & live[np.maximum(dfa.transitions, 0)]).any(axis=1)
    assert live.all()


@given(a=regexes, b=regexes, text=texts)
def test_binary_operations_match_the_boolean_combinations(a, b, text):
    dfa_a, dfa_b = compile_or_reject(a).dfa, compile_or_reject(b).dfa
    data = text.encode()
    in_a, in_b = dfa_a.matches(data), dfa_b.matches(data)
    for dfa, expected in [
        (intersect(dfa_a, dfa_b), in_a and in_b),
        (union(dfa_a, dfa_b), in_a or in_b),
        (difference(dfa_a, dfa_b), in_a and not in_b),
    ]:
        assert dfa.matches(data) == expected, (a, b, text)
        assert_minimal(dfa)


def test_products_are_remembered_per_operation_and_order_of_operands():
    """A product is built once per operation and pair of operands, found again
    by their digests (a copy of an operand finds it too), and never confused
    with another operation or with the operands swapped."""
    a, b = from_regex("[a-c]+x?"), from_regex("b+x|c")
    copy = DFA(a.transitions.copy(), a.accepting.copy())
    assert is_empty(difference(b, a)) and not is_empty(difference(a, b))  # b's strings are all a's
    assert intersect(a, b) is intersect(copy, b) and difference(a, b) is difference(copy, b)
    verdicts = {(w, op): op(a, b).matches(w) for w in (b"bx", b"ab", b"c", b"x") for op in (intersect, union, difference)}
    assert verdicts == {(w, op): expected for w, row in {b"bx": (True, True, False), b"ab": (False, True, True),
                                                        b"c": (True, True, False), b"x": (False, False, False)}.items()
                        for op, expected in zip((intersect, union, difference), row)}


@given(a=regexes, b=regexes)
def test_is_subset_agrees_with_an_empty_difference(a, b):
    dfa_a, dfa_b = compile_or_reject(a).dfa, compile_or_reject(b).dfa
    assert is_subset(dfa_a, dfa_b) == is_empty(difference(dfa_a, dfa_b)), (a, b)
    assert is_subset(dfa_a, union(dfa_a, dfa_b)) and is_subset(intersect(dfa_a, dfa_b), dfa_b)


@given(a=regexes, text=texts)
def test_complement_flips_every_string(a, text):
    dfa = compile_or_reject(a).dfa
    other = complement(dfa)
    assert other.matches(text.encode()) != dfa.matches(text.encode())
    assert_minimal(other)
    assert complement(other).n_states == dfa.n_states


@given(words=st.lists(st.binary(max_size=6), min_size=0, max_size=12), probe=st.binary(max_size=6))
def test_union_of_literals_is_the_set(words, probe):
    dfa = union(*[literal(w) for w in words])
    assert dfa.matches(probe) == (probe in words)
    assert is_empty(dfa) == (not words)
    for word in words:
        assert dfa.matches(word)
    assert_minimal(dfa)


@given(words=st.lists(st.binary(max_size=8), min_size=1, max_size=12), loop=st.booleans())
def test_longest_is_the_longest_string(words, loop):
    dfa = union(*[literal(w) for w in words], *([from_regex("a+")] if loop else []))
    assert longest(dfa) == (None if loop else max(map(len, words)))
    assert longest(empty()) == 0


@given(a=regexes)
def test_longest_agrees_with_the_lengths_reached(a):
    """Strings of length k reach the states reached_k; a finite language has
    none past its number of states, and its longest is the last k that accepts."""
    dfa = compile_or_reject(a).dfa
    reached, lengths = {dfa.start}, []
    for k in range(dfa.n_states + 1):
        if any(dfa.accepting[s] for s in reached):
            lengths.append(k)
        reached = {int(t) for s in reached for t in dfa.transitions[s] if t >= 0}
    assert longest(dfa) == (max(lengths) if not reached else None), a


def test_emptiness():
    assert is_empty(empty())
    assert is_empty(intersect(from_regex("a+"), from_regex("b+")))
    assert is_empty(difference(from_regex("a|b"), from_regex("[ab]")))
    assert complement(from_regex("(?s:.)*")).matches(b"\xff")  # only invalid UTF-8 is left
    assert not is_empty(literal(b""))
    assert literal(b"").matches(b"") and not literal(b"").matches(b"a")
    # The empty language composes like any other.
    assert is_empty(intersect(empty(), from_regex("a*")))
    assert union(empty(), from_regex("ab")).matches(b"ab")
    assert complement(empty()).matches(b"\xff\x00")


def test_difference_of_long_chains_is_fast_and_exact():
    # Counted repeats give long acyclic automata; minimising them takes one pass.
    a, b = from_regex("[a-z]{0,400}"), from_regex("[a-y]{0,400}")
    dfa = difference(a, b)
    assert dfa.matches(b"abz") and not dfa.matches(b"aby") and dfa.matches(b"z" * 400)
    assert not dfa.matches(b"z" * 401)
    assert dfa.n_states == 2 * 400  # before any z, and after one, at each length


def test_too_complex_products_are_refused():
    # A length count times an independent window of the last 8 letters.
    a, b = from_regex("[ab]{0,300}"), from_regex("[ab]*a[ab]{7}")
    with pytest.raises(ConstrainedError, match=f"too complex: it exceeds {MAX_STATES} states"):
        intersect(a, b)


@pytest.mark.parametrize("pattern, finite", [
    ("a{0,5}", True), ("ab|cd|abc", True), ("", True), ("a*", False), ("(ab)+c", False), ("x(y|z){2}w?", True),
    ("[0-9]+", False), ("(a|b)c(d|e*)", False),
])
def test_is_finite_tells_finite_languages(pattern, finite):
    assert is_finite(from_regex(pattern)) == finite


@given(a=regexes)
def test_finite_after_tells_the_states_with_finitely_many_endings(a):
    """By the pumping argument: from a state, infinitely many strings reach
    acceptance exactly when one of some length n..2n-1 does (n states). The
    states reached in n + j steps for some j < n are those n steps reach followed by
    any path (every reachable state is reachable in fewer than n steps): rows
    of A^n C, with A the one-step reachability matrix and C its reflexive
    transitive closure, both by repeated squaring."""
    dfa = compile_or_reject(a).dfa
    n = dfa.n_states
    one_step = np.zeros((n, n), dtype=np.float32)
    for state, row in enumerate(dfa.transitions):
        one_step[state, row[row >= 0]] = 1

    def times(x, y):
        return (x @ y > 0).astype(np.float32)

    power, exact, closure = one_step, np.eye(n, dtype=np.float32), np.eye(n, dtype=np.float32) + one_step
    for bit in bin(n)[:1:-1]:  # A^n, the bits of n from the lowest
        if bit == "1":
            exact = times(exact, power)
        power = times(power, power)
    for _ in range(n.bit_length()):
        closure = times(closure, closure)
    long_accepted = (times(exact, closure) @ dfa.accepting.astype(np.float32)) > 0
    assert np.array_equal(finite_after(dfa), ~long_accepted), a


@given(a=regexes, cap=st.integers(1, 50))
def test_ending_counts_count_the_strings_to_acceptance(a, cap):
    """Counted by brute force: the strings of each length up to n + cap (n
    states: a longer one pumps into infinitely many), along paths that stay
    live, from every state at once."""
    dfa = compile_or_reject(a).dfa
    n = dfa.n_states
    paths = np.eye(n + 1, dtype=object)[:n]  # paths[s, t]: strings from s to t of the length so far (n: dead)
    step = np.zeros((n + 1, n + 1), dtype=object)
    for state, row in enumerate(dfa.transitions):
        for target in row.tolist():
            step[state, target if target >= 0 else n] += 1
    step[n, n] = 256
    accepting = np.append(dfa.accepting, False)
    counts = np.zeros(n, dtype=object)
    for _ in range(n + cap + 1):
        counts += paths @ accepting
        paths = paths @ step
    infinite = ~finite_after(dfa)
    expected = np.where(infinite, cap, np.minimum(counts, cap)).astype(np.int64)
    assert np.array_equal(ending_counts(dfa, cap), expected), a


def test_ending_counts_need_no_trimmed_automaton():
    dfa = union(literal(b"ab"), literal(b"ac"), from_regex("b+"))
    cut = DFA(np.where(np.arange(256) == ord("b"), -1, dfa.transitions).astype(np.int32), dfa.accepting)
    assert ending_counts(dfa, 100)[dfa.start] == 100 and ending_counts(cut, 100)[cut.start] == 1  # "ac"


@pytest.mark.parametrize("edges, finite", [
    ([(0, 2, "a"), (2, 1, "b")], True),  # a path that goes back to a lower number, with no cycle
    ([(0, 1, "a"), (1, 2, "b"), (2, 1, "c")], False),  # the same numbers along the first edges, then a cycle
    ([(0, 1, "a"), (1, 1, "b")], False),
])
def test_is_finite_whatever_the_state_numbers(edges, finite):
    """State 1 accepts; the edges (from, to, byte) are in no particular order."""
    transitions = np.full((3, 256), -1, dtype=np.int32)
    for source, target, byte in edges:
        transitions[source, ord(byte)] = target
    accepting = np.array([False, True, False])
    if not any(target == 2 or source == 2 for source, target, _ in edges):
        transitions, accepting = transitions[:2], accepting[:2]
    assert is_finite(DFA(transitions, accepting)) == finite


@given(values=st.lists(st.text(max_size=6), min_size=1, max_size=4))
def test_makers_that_know_finiteness_and_width_agree_with_computing_them(values):
    """literal and enum_strings set DFA.finite (and literal DFA.widest) rather
    than compute them: the values set are the ones computing gives."""
    from constrained.json_strings import enum_strings

    for made in [literal(values[0].encode()), enum_strings(values)]:
        computed = DFA(made.transitions, made.accepting)
        assert made.finite == computed.finite == is_finite(computed) is True
        assert made.widest == computed.widest == int((computed.transitions >= 0).sum(axis=1).max())
