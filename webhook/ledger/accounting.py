"""The arithmetic every ledger shares: usage from holders, and the atomic limit check.

Kept apart from storage so the memory, SQLite and Kubernetes ledgers cannot disagree on what
"fits" means; each only supplies the transaction around `apply_holds`.
"""

from __future__ import annotations

from collections.abc import Mapping

from webhook.types import ClassUsage, Holder

Holds = dict[str, dict[str, int]]
"""holder key -> device class -> devices."""


def usage_of(holds: Mapping[str, Mapping[str, int]]) -> dict[str, ClassUsage]:
    """Per class: total devices and the holders behind them."""
    holders: dict[str, list[Holder]] = {}
    for key, devices in holds.items():
        for device_class, count in devices.items():
            if count:
                holders.setdefault(device_class, []).append(Holder(key, count))
    return {
        device_class: ClassUsage(sum(h.devices for h in items), tuple(items))
        for device_class, items in holders.items()
    }


def apply_holds(
    current: Mapping[str, Mapping[str, int]],
    holds: Mapping[str, Mapping[str, int]],
    limits: Mapping[str, int],
) -> Holds | None:
    """`current` with `holds` set, or None when a class that grows would pass its limit.

    Only classes that grow are checked: shrinking or keeping a reservation is always allowed,
    even for a tenant already over a lowered limit.
    """
    updated: Holds = {key: dict(devices) for key, devices in current.items()}
    before = totals(updated)
    for key, devices in holds.items():
        updated[key] = {c: n for c, n in devices.items() if n}
    after = totals(updated)
    for device_class, total in after.items():
        limit = limits.get(device_class)
        grew = total > before.get(device_class, 0)
        if limit is not None and grew and total > limit:
            return None
    return updated


def totals(holds: Mapping[str, Mapping[str, int]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for devices in holds.values():
        for device_class, count in devices.items():
            total[device_class] = total.get(device_class, 0) + count
    return total
