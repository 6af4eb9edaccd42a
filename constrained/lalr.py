"""Lark's LALR(1) parse table, driven on terminal indices, with every answer
remembered under the top of the stack that decided it.

A parser stack is a tuple of LR states. Feeding a terminal pops and pushes a
few states at the top; what lies deeper is never read. So each result (the
stack after a terminal that is reduced, the terminals a stack accepts, a token
mask) is stored with the number of top states that were read to compute it,
and found again for any stack that ends with the same states, at any nesting
depth. That is what keeps the cost of a step independent of the length of the
output. (A shift is read off the top state's actions: no memo is quicker.)

Callers that build larger answers from several parser calls wrap them in
``reading(stack)`` to learn how deep their answer looked.
"""

END = -1  # the parser's end-of-input terminal, $END
_MISSING = object()
_WHOLE_LIMIT = 8192


class SuffixMemo:
    """Values keyed by (key, the top ``depth`` states of a stack): stored once
    under the shortest suffix that decided them."""

    def __init__(self, limit: int):
        self.limit = limit
        self._depths: dict = {}  # (key, top state) -> depths stored, ascending
        self._values: dict = {}  # (key, suffix) -> value
        self._whole: dict = {}  # (key, whole stack) -> (depth, value): recent hits, found in one lookup

    def get(self, key, stack: tuple):
        """(depth, value) stored for a suffix of ``stack``, or None."""
        hit = self._whole.get((key, stack))
        if hit is not None:
            return hit
        for depth in self._depths.get((key, stack[-1]), ()):
            value = self._values.get((key, stack[-depth:]), _MISSING)
            if value is not _MISSING:
                if len(self._whole) >= _WHOLE_LIMIT:  # small, so that clearing it never stalls a step
                    self._whole.clear()
                self._whole[(key, stack)] = (depth, value)
                return depth, value
        return None

    def put(self, key, stack: tuple, depth: int, value) -> None:
        if len(self._values) >= self.limit:
            self._depths.clear()
            self._values.clear()
            self._whole.clear()
        slot = (key, stack[-1])
        depths = self._depths.get(slot, ())
        if depth not in depths:
            self._depths[slot] = tuple(sorted(depths + (depth,)))
        self._values[(key, stack[-depth:])] = value


class ParseTable:
    """The parse table of one start rule, on terminal indices (``END`` for $END).

    ``acceptable[state]``: the terminals with an action in the state (what lark's
    contextual lexer tries there, before ``%ignore``'d ones are added)."""

    def __init__(self, table, start: str, terminal_index: dict, memo_limit: int = 200_000):
        from lark.parsers.lalr_analysis import Shift

        self.start_state = table.start_states[start]
        self.end_state = table.end_states[start]
        self.actions: dict = {}
        self.goto: dict = {}
        self.acceptable: dict = {}
        for state, row in table.states.items():
            actions, gotos = {}, {}
            for name, (action, arg) in row.items():
                term = END if name == "$END" else terminal_index.get(name)
                if term is None:  # a rule: the goto part
                    gotos[name] = arg
                elif action is Shift:
                    actions[term] = (True, arg, 0)
                else:
                    actions[term] = (False, arg.origin.name, len(arg.expansion))
            self.actions[state] = actions
            self.goto[state] = gotos
            self.acceptable[state] = frozenset(t for t in actions if t != END)
        self._feeds = SuffixMemo(memo_limit)
        self._lows: list[int] = []  # per open reading(): lowest stack index read

    def start_stack(self) -> tuple:
        return (self.start_state,)

    def reading(self, stack: tuple) -> "_Reading":
        """Within the block, parser calls record how deep they read ``stack`` (and
        stacks derived from it, which share its lower part); binds a function
        giving that depth so far."""
        return _Reading(self._lows, len(stack))

    def read(self, stack: tuple, depth: int) -> None:
        """Record that an answer about ``stack`` depended on its top ``depth`` states."""
        if self._lows:
            low = len(stack) - depth
            if low < self._lows[-1]:
                self._lows[-1] = low

    def feed(self, stack: tuple, term: int):
        """The stack after the parser shifts ``term`` (END: the stack once the input
        is accepted), or None if the parser rejects it."""
        action = self.actions[stack[-1]].get(term)
        if action is None or action[0]:  # (most feeds: the top state decides, no memo needed)
            self.read(stack, 1)
            return None if action is None else stack + (action[1],)
        hit = self._feeds.get(term, stack)
        if hit is None:
            depth, tail = self._feed(stack, term)
            self._feeds.put(term, stack, depth, tail)
        else:
            depth, tail = hit
        self.read(stack, depth)
        return None if tail is None else stack[: len(stack) - depth] + tail

    def _feed(self, stack: tuple, term: int):
        """(depth read, the states replacing the top ``depth`` ones, or None).
        The stack is read as ``stack[:base]`` plus the states pushed since, never
        copied: stacks run hundreds of states deep (a member per state in a long
        object), and a reduction reads a few at the top."""
        base, pushed = len(stack), []
        while True:
            action = self.actions[pushed[-1] if pushed else stack[base - 1]].get(term)
            if action is None:
                return len(stack) - base + 1, None
            shift, arg, size = action
            if shift:
                pushed.append(arg)
                break
            if size > len(pushed):
                base -= size - len(pushed)
                pushed.clear()
            elif size:
                del pushed[-size:]
            pushed.append(self.goto[pushed[-1] if pushed else stack[base - 1]][arg])
            if term == END and pushed[-1] == self.end_state:
                break
        return len(stack) - base + 1, (stack[base - 1],) + tuple(pushed)


class _Reading:
    """``ParseTable.reading``'s block (a class: a generator-based context manager
    costs a microsecond, and a mask step opens dozens)."""

    __slots__ = ("lows", "size")

    def __init__(self, lows: list, size: int):
        self.lows, self.size = lows, size

    def __enter__(self) -> "_Reading":
        self.lows.append(self.size - 1)
        return self

    def __call__(self) -> int:
        return self.size - self.lows[-1]

    def __exit__(self, *exc) -> None:
        low = self.lows.pop()
        if self.lows and low < self.lows[-1]:
            self.lows[-1] = low
