"""Recent search results, kept for one state of the memory index.

A search's result depends on its arguments, the day (recency and relative dates count
from it) and what the index holds; `MemoryIndex.state` names the last, so a result is kept
under (state, arguments, day) and the whole store is dropped the moment the state differs:
a changed memory never serves a result computed before the change. A repeated question
(auto-recall of a message asked again, the model's memory_search of the text just
recalled) then costs the freshness check alone.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

T = TypeVar("T")

KEPT = 64


class Results(Generic[T]):
    """At most KEPT results by key, all of one index state, least recently used out first.
    Read from the index's worker thread (inside a search's visit) and written on the loop:
    one lock."""

    def __init__(self, kept: int = KEPT) -> None:
        self._kept = kept
        self._state: Hashable | None = None
        self._found: OrderedDict[Hashable, T] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, state: Hashable | None, key: Hashable) -> T | None:
        with self._lock:
            if state is None or state != self._state:
                return None
            found = self._found.get(key)
            if found is not None:
                self._found.move_to_end(key)
            return found

    def put(self, state: Hashable | None, key: Hashable, value: T) -> None:
        if state is None:
            return
        with self._lock:
            if state != self._state:
                self._found.clear()
                self._state = state
            self._found[key] = value
            self._found.move_to_end(key)
            while len(self._found) > self._kept:
                self._found.popitem(last=False)
