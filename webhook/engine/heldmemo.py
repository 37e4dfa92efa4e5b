"""Answers remembered per key while the objects they were computed from stay the same objects.

A review's facts are shared, read-only objects: the policy set, a tenant, the templates of
a watch cache, the feasibility of one inventory. While none is replaced, what the engine
derives from them is the same, so an answer is remembered under a hashable key with the
objects it read, compared by identity on every hit (held, so their ids cannot be reused).
A reload, a changed template or a new inventory makes new objects, and the entry misses.

Bounded (past `max_entries` the table starts over) and shared by the threads of a process:
a lost race computes twice and stores the same answer.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Generic, TypeVar

T = TypeVar("T")

MAX_ENTRIES = 1024


class HeldMemo(Generic[T]):
    """`answer` per key, valid while `held` are the very objects it was stored with."""

    def __init__(self, max_entries: int = MAX_ENTRIES) -> None:
        self._table: dict[Hashable, tuple[tuple[object, ...], T]] = {}
        self._max_entries = max_entries

    def get(self, key: Hashable, held: tuple[object, ...]) -> T | None:
        found = self._table.get(key)
        if found is None or len(found[0]) != len(held):
            return None
        for kept, given in zip(found[0], held, strict=True):
            if kept is not given:
                return None
        return found[1]

    def put(self, key: Hashable, held: tuple[object, ...], answer: T) -> None:
        if len(self._table) >= self._max_entries:
            self._table.clear()
        self._table[key] = (held, answer)

    def forget(self) -> None:
        """Empty the table (tests)."""
        self._table.clear()

    def __len__(self) -> int:
        return len(self._table)
