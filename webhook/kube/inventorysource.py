"""The device inventory, rebuilt from ResourceSlices only when they change.

Building an Inventory groups every published device by its signature, which takes a while
for tens of thousands of devices; admissions must not pay it. The source remembers which
slices (name, resourceVersion, generation) it was built from, looks again at most every
`recheck_seconds`, and keeps one SelectorCache for the process so selector results survive
rebuilds.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

from webhook.engine.inventory import Inventory, SelectorCache
from webhook.types import Object

SliceLister = Callable[[], Sequence[Object]]


class InventorySource:
    """`current()` returns the inventory for the slices the cluster publishes now."""

    def __init__(
        self,
        slices: SliceLister,
        *,
        recheck_seconds: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._slices = slices
        self._recheck = recheck_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._cache = SelectorCache()
        self._key: tuple[tuple[str, str, int], ...] | None = None
        self._inventory: Inventory | None = None
        self._checked_at = float("-inf")

    def current(self) -> Inventory | None:
        """The inventory, or None when no device is published (nothing to judge against)."""
        with self._lock:
            if self._clock() - self._checked_at >= self._recheck:
                self._refresh()
            return self._inventory

    def _refresh(self) -> None:
        slices = self._slices()
        key = tuple(sorted(_identity(s) for s in slices))
        self._checked_at = self._clock()
        if key == self._key:
            return
        self._key = key
        self._inventory = Inventory.from_slices(slices, self._cache) if slices else None


def _identity(item: Object) -> tuple[str, str, int]:
    meta = item.get("metadata") or {}
    pool = ((item.get("spec") or {}).get("pool")) or {}
    return (
        str(meta.get("name", "")),
        str(meta.get("resourceVersion", "")),
        int(pool.get("generation") or 0),
    )
