"""A cache of the most recently used values within a budget of their sizes:
what is kept across grammars (products of automata, walks that grammars over
one vocabulary share). Several threads may compile or index at once, so its
operations hold a lock."""

import threading
from collections import OrderedDict


class Recent:
    """The most recently used values, while their sizes (at least 1 each) add up to ``budget``."""

    def __init__(self, budget: int):
        self.budget, self.size, self._items = budget, 0, OrderedDict()
        self._lock = threading.Lock()

    def get(self, key):
        with self._lock:
            hit = self._items.get(key)
            if hit is None:
                return None
            self._items.move_to_end(key)
            return hit[0]

    def put(self, key, value, size: int) -> None:
        size = max(size, 1)
        with self._lock:
            replaced = self._items.pop(key, None)
            if replaced is not None:
                self.size -= replaced[1]
            self._items[key] = (value, size)
            self.size += size
            while self.size > self.budget and len(self._items) > 1:
                _, (_, old) = self._items.popitem(last=False)
                self.size -= old
