"""The arithmetic every ledger shares: usage from holders, the atomic limit check, reconcile.

Kept apart from storage so the memory, SQLite and Kubernetes ledgers cannot disagree on what
"fits" means; each only supplies the transaction around these functions.

A holder admitted by the webhook is *pending* until the object it stands for is seen (a
claim, or the claim generated for a Pod's template): the request may still be refused by a
later admission plugin, or the client may give up. A pending holder carries an expiry; the
reconciler confirms it when the object appears and drops it once a truth seen after that
expiry still lacks it (or a deletion named it). Nothing else drops it: only the existing
claims say whether it is held, so a webhook with no reconciler running (no replica holds the
Lease, offline serving) keeps counting it, whatever its age. A leak needs a reconciler
that says so; a pending holder never stops counting by the clock alone, which would leave a
tenant's claims over its limit while nobody confirms them.

Grants and wants (`grant:` and `want:` records, `webhook.ledger.grants`) are leases between
serving processes, not holders: they stop counting when their lease ends.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from webhook.types import ClassUsage, Holder

Holds = dict[str, dict[str, int]]
"""holder key -> device class -> devices."""

PENDING_SECONDS = 120.0
"""How long an admitted holder may wait for its object before a reconciler releases it."""
GRANT_PREFIX = "grant:"
WANT_PREFIX = "want:"
LEASE_PREFIXES = (GRANT_PREFIX, WANT_PREFIX)
"""Records that are leases between processes (grants, wants), ended by the clock."""


@dataclass(frozen=True)
class Record:
    """One holder's devices; `expires_at` is set while the holder is still pending; `name`
    is what a person knows the holder by when its key does not say it (a Pod's
    `<namespace>/<name>`: its holders are keyed by uid, as the claims made for it refer to it)."""

    devices: Mapping[str, int]
    expires_at: float | None = None
    name: str | None = None

    def as_json(self) -> dict[str, object]:
        data: dict[str, object] = {"devices": dict(self.devices)}
        if self.expires_at is not None:
            data["expiresAt"] = self.expires_at
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Record:
        devices = data.get("devices") or {}
        expires = data.get("expiresAt")
        return cls(
            devices={str(k): int(v) for k, v in dict(devices).items()},  # type: ignore[call-overload]
            expires_at=float(expires) if isinstance(expires, int | float) else None,
        )


Records = dict[str, Record]


@dataclass(frozen=True)
class Outcome:
    """Records after a reservation attempt; `granted` False leaves `records` unchanged."""

    granted: bool
    records: Records = field(default_factory=dict)


def usage_of(records: Mapping[str, Record]) -> dict[str, ClassUsage]:
    """Per class: total devices, the holders behind them and how many of them are pending."""
    holders: dict[str, list[Holder]] = {}
    pending: dict[str, int] = {}
    for key, record in sorted(records.items()):
        waiting = record.expires_at is not None and not is_lease(key)
        for device_class, count in record.devices.items():
            if count:
                holders.setdefault(device_class, []).append(Holder(key, count, record.name or ""))
                pending[device_class] = pending.get(device_class, 0) + (count if waiting else 0)
    return {
        device_class: ClassUsage(sum(h.devices for h in items), tuple(items), pending[device_class])
        for device_class, items in holders.items()
    }


def reserve(
    current: Mapping[str, Record],
    holds: Mapping[str, Mapping[str, int]],
    limits: Mapping[str, int],
    *,
    now: float,
    pending_seconds: float = PENDING_SECONDS,
    names: Mapping[str, str] | None = None,
) -> Outcome:
    """`current` with `holds` set, unless a class that grows would pass its limit.

    Only classes that grow are checked: shrinking or keeping a reservation is always allowed,
    even for a tenant already over a lowered limit. Ended leases no longer count (and are
    dropped from the records written). A holder already confirmed keeps its
    confirmation; one still pending keeps its expiry, so admitting the same object again (a
    forged review re-sent in a loop) never renews it; a new one is pending until
    `now + pending_seconds`. A holder re-admitted with the same devices is left as it is: the
    retry changes nothing, so a ledger need not write. A holder set keeps its name unless
    `names` gives it one. A holder given negative counts is not set but drawn from
    (`is_draw`): lowered by what the call's other holders grow by, so a gang's Pod moves
    devices from the gang's reservation to its own holders in the same atomic step.
    """
    current = live(current, now=now)
    change = changes(
        current, totals(current), holds, limits, now=now, pending_seconds=pending_seconds,
        names=names,
    )  # fmt: skip
    if not change.granted:
        return Outcome(False, current)
    return Outcome(True, {**current, **change.changed})


@dataclass(frozen=True)
class Change:
    """What a reservation does to live records: whether it is granted, the holders it
    sets (new or changed records; none when refused or when nothing changes) and, when
    granted, the totals per class once they are set."""

    granted: bool
    changed: Records = field(default_factory=dict)
    totals: dict[str, int] = field(default_factory=dict)


def changes(
    current: Mapping[str, Record],
    current_totals: Mapping[str, int],
    holds: Mapping[str, Mapping[str, int]],
    limits: Mapping[str, int],
    *,
    now: float,
    pending_seconds: float = PENDING_SECONDS,
    names: Mapping[str, str] | None = None,
) -> Change:
    """`reserve` on records all live, given their `totals`: only the holders that change.

    A ledger that keeps its records' totals (the SQLite ledger's rows) checks a new holder
    without walking the tenant's thousands of others; `reserve` is this over `live` records.
    """
    after = dict(current_totals)  # moved by the holders that change
    changed: Records = {}
    sets = {key: devices for key, devices in holds.items() if not is_draw(devices)}
    for key, devices in sets.items():
        known = current.get(key)
        wanted = {c: n for c, n in devices.items() if n}
        name = (names or {}).get(key) or (known.name if known is not None else None)
        if known is not None and unchanged(known, wanted) and name == known.name:
            continue
        expires = known.expires_at if known is not None else now + pending_seconds
        changed[key] = Record(wanted, expires, name)
        move(after, known.devices if known is not None else {}, wanted)
    grown = {c: n - current_totals.get(c, 0) for c, n in after.items()}
    for key, devices in holds.items():
        if key not in sets and (drawn := _drawn(current.get(key), devices, grown)) is not None:
            move(after, current[key].devices, drawn.devices)
            changed[key] = drawn
    for device_class, total in after.items():
        limit = limits.get(device_class)
        if limit is not None and total > current_totals.get(device_class, 0) and total > limit:
            return Change(False)
    return Change(True, changed, after)


def is_draw(devices: Mapping[str, int]) -> bool:
    """Whether a hold draws from its holder (negative counts) instead of setting it."""
    return any(n < 0 for n in devices.values())


def _drawn(
    known: Record | None, devices: Mapping[str, int], grown: dict[str, int]
) -> Record | None:
    """`known` lowered, per class, by what the call's other holders grew by (at most the
    count drawn, never below 0): a Pod drawing from its gang moves devices from the gang's
    holder to its own, and re-admitting the Pod (which grows nothing) draws nothing. None
    when nothing changes: no such holder, or nothing grew."""
    if known is None:
        return None
    left = dict(known.devices)
    for device_class, count in devices.items():
        take = min(-count, grown.get(device_class, 0), left.get(device_class, 0))
        if take > 0:
            left[device_class] -= take
            grown[device_class] -= take
    if left == dict(known.devices):
        return None
    return Record({c: n for c, n in left.items() if n}, known.expires_at, known.name)


def readmitted(
    current: Mapping[str, Record],
    holds: Mapping[str, Mapping[str, int]],
    now: float,
    names: Mapping[str, str] | None = None,
) -> bool:
    """Whether every holder of `holds` already holds exactly these devices (and already has
    the name `names` gives it).

    When it does and no lease of `current` has ended, `reserve` grants and returns `current`
    as it is (nothing grows, nothing is dropped): a ledger may answer without the arithmetic.
    """
    for key, devices in holds.items():
        known = current.get(key)
        if known is None:
            return False
        wanted = devices if all(devices.values()) else {c: n for c, n in devices.items() if n}
        if dict(known.devices) != dict(wanted):  # `unchanged`, inlined: asked every review
            return False
    return not names or all(_named(current.get(key), name) for key, name in names.items())


def _named(record: Record | None, name: str) -> bool:
    return record is not None and record.name == name


def live(records: Mapping[str, Record], *, now: float) -> Records:
    """What counts against a quota: every holder, confirmed or pending whatever its age, and
    the leases (grants, wants) that have not ended.

    A pending holder is dropped by `reconcile` alone: the clock cannot tell a claim that
    was never created from one that nobody confirmed.
    """
    if not any(r.expires_at is not None and r.expires_at <= now and is_lease(k)
               for k, r in records.items()):  # fmt: skip
        return dict(records)  # the usual case, tested without a call per holder
    return {k: r for k, r in records.items() if not ended(k, r, now)}


def is_lease(key: str) -> bool:
    return key.startswith(LEASE_PREFIXES)


def ended(key: str, record: Record, now: float) -> bool:
    """Whether `record` is a lease (grant, want) past its end."""
    return record.expires_at is not None and record.expires_at <= now and is_lease(key)


def lease_end(records: Mapping[str, Record]) -> float:
    """When the first lease of `records` ends (inf without one): until then `live` keeps all."""
    ends = [r.expires_at for k, r in records.items() if r.expires_at is not None and is_lease(k)]
    return min(ends, default=math.inf)


def unchanged(known: Record, devices: Mapping[str, int]) -> bool:
    """Whether setting `devices` would leave `known` as it is (a pending holder keeps its
    expiry: re-admitting it never renews it)."""
    return dict(known.devices) == dict(devices)


def reconcile(
    current: Mapping[str, Record],
    truth: Mapping[str, Mapping[str, int]],
    *,
    now: float,
    drop_grace: float = 0.0,
    names: Mapping[str, str] | None = None,
    gone: AbstractSet[str] = frozenset(),
) -> Records:
    """The records once existing objects (`truth`, seen at `now` or later) are known.

    Holders backed by an object are confirmed with the object's devices (and the name they
    have, else the one `names` gives); confirmed holders whose object is gone are dropped,
    or with `drop_grace` first kept pending that long; pending holders stay until their
    expiry is past `now`, then go. A holder in `gone` (a deletion of its object was seen
    before the truth) and not in `truth` is dropped at once, pending or not: a pending holder
    whose object is merely not created yet is never named by a deletion.
    """
    records: Records = {}
    named = names or {}
    for key, devices in truth.items():
        known = current.get(key)
        name = known.name if known is not None and known.name else named.get(key)
        records[key] = Record(dict(devices), None, name)
    for key, record in current.items():
        if key in records or (key in gone and not is_lease(key)):
            continue
        if record.expires_at is not None and record.expires_at > now:
            records[key] = record
        elif record.expires_at is None and drop_grace > 0:
            records[key] = Record(record.devices, now + drop_grace, record.name)
    return records


def move(total: dict[str, int], was: Mapping[str, int], now: Mapping[str, int]) -> None:
    """`total` with one holder's devices `was` replaced by `now`."""
    for device_class, count in was.items():
        total[device_class] = total.get(device_class, 0) - count
    for device_class, count in now.items():
        total[device_class] = total.get(device_class, 0) + count


def totals(records: Mapping[str, Record]) -> dict[str, int]:
    total: dict[str, int] = {}
    for record in records.values():
        for device_class, count in record.devices.items():
            total[device_class] = total.get(device_class, 0) + count
    return total


def confirmed(
    holds: Mapping[str, Mapping[str, int]], names: Mapping[str, str] | None = None
) -> Records:
    """Records for holders known to exist (a ledger's starting truth), with their names."""
    named = names or {}
    return {key: Record(dict(devices), None, named.get(key)) for key, devices in holds.items()}
