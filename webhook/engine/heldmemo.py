"""Answers remembered per key while the objects they were computed from stay the same objects.

A review's facts are shared, read-only objects: the policy set, a tenant, the templates of
a watch cache, the feasibility of one inventory. While none is replaced, what the engine
derives from them is the same, so an answer is remembered under a hashable key with the
objects it read, compared by identity on every hit (held, so their ids cannot be reused).
A reload, a changed template or a new inventory makes new objects, and the entry misses.

The first `epoch` held objects are those every entry shares at a time (the policy set, the
published devices): storing an answer with other ones empties the table first, so a table
never keeps an old inventory or policy set alive, only the current one. Bounded (past
`max_entries` the table starts over too) and shared by the threads of a process: a lost race
computes twice and stores the same answer.
"""

from __future__ import annotations

import operator
from collections.abc import Hashable
from typing import Generic, TypeVar

T = TypeVar("T")

MAX_ENTRIES = 1024


class HeldMemo(Generic[T]):
    """`answer` per key, valid while `held` are the very objects it was stored with."""

    def __init__(self, epoch: int = 0, max_entries: int = MAX_ENTRIES) -> None:
        self._table: dict[Hashable, tuple[tuple[object, ...], T]] = {}
        self._epoch = epoch
        self._current: tuple[object, ...] = ()
        self._max_entries = max_entries

    def get(self, key: Hashable, held: tuple[object, ...]) -> T | None:
        found = self._table.get(key)
        if found is None:
            return None
        return found[1] if _same(found[0], held) else None

    def put(self, key: Hashable, held: tuple[object, ...], answer: T) -> None:
        epoch = held[: self._epoch]
        if len(self._table) >= self._max_entries or not _same(epoch, self._current):
            self._table.clear()
            self._current = epoch
        self._table[key] = (held, answer)

    def forget(self) -> None:
        """Empty the table (tests)."""
        self._table.clear()
        self._current = ()

    def __len__(self) -> int:
        return len(self._table)


def _same(kept: tuple[object, ...], given: tuple[object, ...]) -> bool:
    if len(kept) != len(given):
        return False
    return all(map(operator.is_, kept, given))
