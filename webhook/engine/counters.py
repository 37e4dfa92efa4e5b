"""Can the devices chosen for one claim share their counter sets? (KEP-4815 partitions.)

A partitionable GPU publishes the whole GPU and every MIG placement as devices that consume
counters (memory, slices) from one counter set; the allocator takes a device only while every
counter of the sets it consumes stays within the set's amount. Whether some choice of devices
fits is a packing problem, so it is searched like the allocator does - device by device with
backtracking - over kinds of interchangeable devices. A search that runs out of steps answers
"fits": feasibility denies only what it can show.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

from webhook.engine.devices import Amounts

MAX_STEPS = 20_000
"""Devices tried per node and choice of alternatives before the search gives up (fits)."""

LocalConsumption = tuple[tuple[int, Amounts], ...]
"""What one device consumes, by the position of the counter set on its node."""
Capacities = tuple[Amounts | None, ...]
"""Per counter set on a node, its counters (None: a set the pool does not publish)."""


class _OutOfSteps(Exception):
    pass


def pack(
    needed: Sequence[tuple[int, Sequence[int]]],
    whole: Sequence[int],
    kinds: Sequence[tuple[LocalConsumption, int]],
    capacities: Capacities,
) -> bool:
    """Whether `whole` kinds (taken entirely by `All` requests) and, per demand, `count`
    devices of its usable kinds fit the counter sets together."""
    left = [None if c is None else dict(c) for c in capacities]
    free = [n for _, n in kinds]
    for i in whole:
        for _ in range(free[i]):
            if not _take(left, kinds[i][0]):
                return False
        free[i] = 0
    search = _Search(needed, [c for c, _ in kinds], left, free)
    try:
        return search.place(0, needed[0][0] if needed else 0, 0)
    except _OutOfSteps:
        return True


class _Search:
    def __init__(
        self,
        needed: Sequence[tuple[int, Sequence[int]]],
        consumption: list[LocalConsumption],
        left: list[dict[str, Fraction] | None],
        free: list[int],
    ) -> None:
        self.needed, self.consumption, self.left, self.free = needed, consumption, left, free
        self.steps = 0

    def place(self, demand: int, remaining: int, start: int) -> bool:
        """Devices for demand `demand` onwards; kinds below `start` were tried already."""
        if demand == len(self.needed):
            return True
        if remaining == 0:
            following = demand + 1
            count = self.needed[following][0] if following < len(self.needed) else 0
            return self.place(following, count, 0)
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise _OutOfSteps
        for kind in self.needed[demand][1]:
            if kind < start or not self.free[kind]:
                continue
            if not _take(self.left, self.consumption[kind]):
                continue
            self.free[kind] -= 1
            placed = self.place(demand, remaining - 1, kind)
            self.free[kind] += 1
            _give(self.left, self.consumption[kind])
            if placed:
                return True
        return False


def _take(left: list[dict[str, Fraction] | None], consumption: LocalConsumption) -> bool:
    """Subtract a device's consumption if every counter it names stays within its set."""
    for index, amounts in consumption:
        counters = left[index]
        if counters is not None and any(counters.get(n, a) < a for n, a in amounts):
            return False
    for index, amounts in consumption:
        counters = left[index]
        for name, amount in amounts:
            if counters is not None and name in counters:
                counters[name] -= amount
    return True


def _give(left: list[dict[str, Fraction] | None], consumption: LocalConsumption) -> None:
    for index, amounts in consumption:
        counters = left[index]
        for name, amount in amounts:
            if counters is not None and name in counters:
                counters[name] += amount
