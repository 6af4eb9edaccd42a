"""A cache of the most recently used values within a budget of their sizes:
what is kept across grammars (products of automata, walks that grammars over
one vocabulary share). Several threads may compile or index at once, so its
operations hold a lock."""

import threading
from collections import OrderedDict


class Recent:
    """The most recently used values, while their sizes (at least 1 each) add up to ``budget``.

    A value may hold parts that other values hold too (the same array in many
    walks): ``put`` takes them as (part id, size) pairs, and a part counts once
    while any value kept holds it."""

    def __init__(self, budget: int):
        self.budget, self.size, self._items = budget, 0, OrderedDict()
        self._parts: dict = {}  # part id: [values holding it, its size]
        self._lock = threading.Lock()

    def get(self, key):
        with self._lock:
            hit = self._items.get(key)
            if hit is None:
                return None
            self._items.move_to_end(key)
            return hit[0]

    def put(self, key, value, size: int, parts=()) -> None:
        size = max(size, 1)
        parts = tuple(parts)
        with self._lock:
            replaced = self._items.pop(key, None)
            if replaced is not None:
                self._drop(replaced)
            self._items[key] = (value, size, parts)
            self.size += size
            for part, part_size in parts:
                held = self._parts.get(part)
                if held is None:
                    self._parts[part] = [1, part_size]
                    self.size += part_size
                else:
                    held[0] += 1
            while self.size > self.budget and len(self._items) > 1:
                self._drop(self._items.popitem(last=False)[1])

    def _drop(self, item) -> None:
        _, size, parts = item
        self.size -= size
        for part, _ in parts:
            held = self._parts[part]
            held[0] -= 1
            if not held[0]:
                del self._parts[part]
                self.size -= held[1]
