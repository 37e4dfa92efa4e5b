"""Why a request whose devices exist still cannot be allocated now: every matching device is
on a node the Pod may not run on, is allocated to another claim, or shares the counters of a
partitionable device (KEP-4815) that allocated devices have used up.

Feasibility ignores allocations on purpose (a full cluster frees up); a Pending Pod's owner
asks what holds it now, so this reads them: which claims, reserved for which Pods.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from webhook.engine.devices import CounterSetKey, Device

DeviceKey = tuple[str, str]
"""A device as an allocation names it: driver and `<pool>/<device>`."""
SHOWN = 3


def device_key(device: Device) -> DeviceKey:
    return device.driver, device.name


@dataclass(frozen=True)
class Holding:
    """An allocated device's claim (`ResourceClaim ns/name`) and the Pods it is reserved for."""

    claim: str
    pods: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        return f"{self.claim} (Pod {', '.join(self.pods)})" if self.pods else self.claim


@dataclass(frozen=True)
class Blockage:
    """The decisive reason a request cannot be allocated now; `source` the object to cite."""

    cause: str  # node | allocated | counters
    source: str
    message: str


@dataclass(frozen=True)
class Occupancy:
    """The cluster's allocated devices, the devices published, and the pools' counter sets."""

    allocated: Mapping[DeviceKey, Holding]
    devices: Mapping[DeviceKey, Device]
    counters: Mapping[CounterSetKey, Mapping[str, Fraction]]

    def left(self) -> dict[CounterSetKey, dict[str, Fraction]]:
        """Each counter set after what the allocated devices consume from it."""
        found = {k: dict(v) for k, v in self.counters.items()}
        for key in self.allocated:
            device = self.devices.get(key)
            for counter_set, amounts in device.consumes if device is not None else ():
                for name, amount in amounts:
                    if counter_set in found and name in found[counter_set]:
                        found[counter_set][name] -= amount
        return found

    def consumers(self, counter_set: CounterSetKey) -> list[tuple[Device, Holding]]:
        """Allocated devices drawing on `counter_set`, with their holders."""
        found = []
        for key, holding in self.allocated.items():
            device = self.devices.get(key)
            if device is not None and any(s == counter_set for s, _ in device.consumes):
                found.append((device, holding))
        return found


def blockage(
    request: str,
    needed: int,
    matching: Sequence[Device],
    occupancy: Occupancy,
    allowed: Callable[[str | None], bool],
) -> Blockage | None:
    """Why `needed` of the `matching` devices cannot go to one node now, or None."""
    placeable = [d for d in matching if allowed(d.node)]
    if not placeable:
        nodes = sorted({d.node or "every node" for d in matching})
        return Blockage("node", "", f"request {request!r}: every node with a matching device is "
                        f"excluded ({_some(nodes)})")  # fmt: skip
    taken = [d for d in placeable if device_key(d) in occupancy.allocated]
    left = occupancy.left()
    short = [d for d in placeable if d not in taken and not _fits(d, left)]
    free = [d for d in placeable if d not in taken and d not in short]
    if _most_on_one_node(free) >= needed:
        return None
    if short:
        return _counters(request, short, left, occupancy)
    holders = [f"{d.name} to {occupancy.allocated[device_key(d)].text}" for d in taken]
    first = occupancy.allocated[device_key(taken[0])].claim if taken else ""
    message = f"request {request!r} needs {needed}, {len(placeable)} match, {len(taken)} allocated"
    return Blockage("allocated", first, f"{message}: {_some(holders)}")


def _counters(
    request: str, short: Sequence[Device], left: Mapping[CounterSetKey, Mapping[str, Fraction]],
    occupancy: Occupancy,
) -> Blockage:  # fmt: skip
    device = short[0]
    sets = [s for s, amounts in device.consumes if not _enough(left.get(s, {}), amounts)]
    users = [u for s in sets for u in occupancy.consumers(s)]
    names = ", ".join(f"{driver}/{pool}/{name}" for driver, pool, name in sets)
    used = [f"{d.name} to {h.text}" for d, h in users]
    message = (
        f"request {request!r}: {len(short)} matching devices ({_some([d.name for d in short])}) "
        f"need counters of {names}, used up by {_some(used) or 'nothing allocated'}"
    )
    return Blockage("counters", users[0][1].claim if users else "", message)


def _fits(device: Device, left: Mapping[CounterSetKey, Mapping[str, Fraction]]) -> bool:
    return all(_enough(left.get(s, {}), amounts) for s, amounts in device.consumes)


def _enough(left: Mapping[str, Fraction], amounts: Iterable[tuple[str, Fraction]]) -> bool:
    return all(left.get(name, Fraction(0)) >= amount for name, amount in amounts)


def _most_on_one_node(devices: Sequence[Device]) -> int:
    per_node: dict[str | None, int] = {}
    for device in devices:
        per_node[device.node] = per_node.get(device.node, 0) + 1
    shared = per_node.pop(None, 0)
    return shared + max(per_node.values(), default=0)


def _some(items: Sequence[str]) -> str:
    more = len(items) - SHOWN
    return ", ".join(items[:SHOWN]) + (f" (+{more} more)" if more > 0 else "")
