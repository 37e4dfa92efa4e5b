"""The memo tables a compiled policy set owns, so a reload drops them with the set.

What the engine and the rewriter remember depends on the policy set (a rule's result, a Pod's
shape, a pod spec's rewrite under the set's mappings) or on content a review read (a
template's normalized spec). Each such table is a `Slot`, declared by the module that uses it,
and made in a set's `Memos` on first use: a new set (a reload, `dataclasses.replace`) starts
with none, and a set no review holds any more is collected with everything it remembered.

These module-level caches stay, since each is pure, bounded and keyed by the text it parses,
and answers the same whatever the policies:
- `engine.cel.quantity` (parsed quantity literals), `engine.cel.semver` (parsed versions) and
  `engine.cel.regex` (compiled RE2 patterns): `lru_cache` of a few hundred entries;
- `engine.devices.is_id` (whether an attribute name is a per-device id): `lru_cache`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

T = TypeVar("T")


@dataclass(frozen=True, eq=False)
class Slot(Generic[T]):
    """One kind of table: `make()` builds it empty in each set's `Memos` (compared by identity)."""

    name: str
    make: Callable[[], T]


class Memos:
    """The tables of one policy set, each made on first use; never copied with the set."""

    def __init__(self) -> None:
        self._tables: dict[Slot[Any], Any] = {}
        self._lock = threading.Lock()

    def of(self, slot: Slot[T]) -> T:
        """The set's table of `slot`, made empty the first time it is asked for."""
        table = self._tables.get(slot)
        if table is None:
            with self._lock:
                table = self._tables.get(slot)
                if table is None:
                    table = self._tables[slot] = slot.make()
        return cast(T, table)

    def made(self) -> tuple[str, ...]:
        """The names of the tables made so far (tests)."""
        return tuple(slot.name for slot in self._tables)

    def forget(self) -> None:
        """Drop every table (tests; a reload makes a new set, hence new tables)."""
        with self._lock:
            self._tables.clear()

    def __deepcopy__(self, memo: dict[int, Any]) -> Memos:
        return Memos()

    def __reduce__(self) -> tuple[type[Memos], tuple[()]]:
        return (Memos, ())
