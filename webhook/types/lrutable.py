"""A bounded, thread-safe memo table, for the pure layers' caches of pure results.

Request threads of a gthread worker share a table. A lock covers each lookup or store with its
bookkeeping (an OrderedDict's move-to-end and eviction are not atomic); the value is computed
outside it, so two threads that miss one key both compute it (pure: equal values) and the
later store wins. The least recently used entry goes when the table is full.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LruTable(Generic[K, V]):
    """At most `size` entries; `get` counts as a use."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError("an LruTable holds at least one entry")
        self.size = size
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            value = self._entries.get(key)
            if value is not None:
                self._entries.move_to_end(key)
            return value

    def put(self, key: K, value: V) -> None:
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            if len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        with self._lock:  # a store holds one entry too many until its eviction
            return len(self._entries)
