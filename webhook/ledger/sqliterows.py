"""The SQLite ledger's rows as read: decoded once, remembered per connection and tenant.

Each connection keeps a tenant's decoded rows with the `PRAGMA data_version` they were read
under (`TenantRows`). SQLite changes `data_version` whenever another connection commits
(another thread's, another process's, anything's) and never for the connection's own
commits. So a read that finds `data_version` unchanged answers from memory and is still
exact, and a write, holding the write lock (no other connection can commit then), starts
from remembered rows under an unchanged `data_version` and keeps what it wrote. Rows are
shared by later reads: nothing may change them (`accounting` builds new records and never
changes those it is given).
"""

from __future__ import annotations

import functools
import json
import sqlite3
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import NamedTuple

from webhook.ledger import accounting, holdernames
from webhook.ledger.accounting import Record, Records
from webhook.types import ClassUsage, Reservation

MAX_REMEMBERED_TENANTS = 256
"""Tenants whose decoded rows one connection keeps; past this it starts over."""


class Rows:
    """One tenant's decoded rows as read once, and what follows from them alone.

    Shared by later reads: callers must not change `records` (`accounting` builds new
    records and never changes those it is given) and get copies of `usage`. `live_until`
    may be earlier than the first expiry (never later): rows then take the longer way.
    """

    def __init__(
        self,
        records: Records,
        totals: dict[str, int] | None = None,
        live_until: float | None = None,
    ) -> None:
        self.records = records
        if live_until is None:
            live_until = accounting.lease_end(records)
        self._live_until = live_until
        if totals is not None:
            self.__dict__["totals"] = totals

    def all_live(self, now: float) -> bool:
        """Whether no lease has ended by `now` (`accounting.live` would keep all)."""
        return now < self._live_until

    @functools.cached_property
    def usage(self) -> dict[str, ClassUsage]:
        """`accounting.usage_of(records)`: the usage while `all_live`."""
        return accounting.usage_of(self.records)

    @functools.cached_property
    def totals(self) -> dict[str, int]:
        """`accounting.totals(records)`, kept from one write to the next (`with_changes`)."""
        return accounting.totals(self.records)

    def with_changes(self, changed: Records) -> Rows:
        """These rows with `changed` set, their totals and first expiry moved, not recounted:
        a new holder among thousands costs a copy of the table, not a walk of every holder."""
        totals = dict(self.totals)
        live_until = self._live_until
        for key, record in changed.items():
            known = self.records.get(key)
            accounting.move(totals, known.devices if known is not None else {}, record.devices)
            if record.expires_at is not None and accounting.is_lease(key):
                live_until = min(live_until, record.expires_at)
        return Rows({**self.records, **changed}, totals, live_until)

    def planned(
        self,
        holds: Mapping[str, Mapping[str, int]],
        limits: Mapping[str, int],
        *,
        now: float,
        pending_seconds: float,
        names: Mapping[str, str] | None = None,
    ) -> Plan:
        """What reserving `holds` on these rows answers, leaves and writes: from the kept
        totals while every holder is live, else by `accounting.reserve` over the records."""
        if self.all_live(now):
            change = accounting.changes(
                self.records, self.totals, holds, limits, now=now,
                pending_seconds=pending_seconds, names=names,
            )  # fmt: skip
            if not change.granted or not change.changed:
                return Plan(change.granted, self)
            return Plan(True, self.with_changes(change.changed), change.changed)
        outcome = accounting.reserve(
            self.records, holds, limits, now=now, pending_seconds=pending_seconds, names=names
        )
        if not outcome.granted:
            return Plan(False, self, refused_usage=accounting.usage_of(outcome.records))
        after, before = outcome.records, self.records
        puts = {k: r for k, r in after.items() if before.get(k) is not r and before.get(k) != r}
        return Plan(True, Rows(after), puts, tuple(before.keys() - after.keys()))


class Stamp(NamedTuple):
    """What a write transaction read before its rows: the connection's `data_version`."""

    version: int


class Plan:
    """A reservation worked out on rows as read: granted or not, the rows it leaves (the rows
    themselves when it changes nothing) and the holders to store and to delete for that."""

    def __init__(
        self,
        granted: bool,
        after: Rows,
        puts: Records | None = None,
        deletes: tuple[str, ...] = (),
        refused_usage: dict[str, ClassUsage] | None = None,
    ) -> None:
        self.granted = granted
        self.after = after
        self.puts: Records = puts or {}
        self.deletes = deletes
        self._refused_usage = refused_usage

    @property
    def writes(self) -> bool:
        return bool(self.puts or self.deletes)

    def reservation(self) -> Reservation:
        """The answer: a grant's usage worked out when read, a refusal's the live usage."""
        if self.granted:
            return Reservation(True, UsageOf(self.after))
        usage = self._refused_usage
        return Reservation(False, dict(self.after.usage) if usage is None else usage)


class UsageOf(Mapping[str, ClassUsage]):
    """A granted reservation's usage, worked out when first read: only a refusal is judged
    with it (and tests read it), and working it out walks every holder of the tenant."""

    def __init__(self, rows: Rows) -> None:
        self._rows = rows

    def __getitem__(self, device_class: str) -> ClassUsage:
        return self._rows.usage[device_class]

    def __iter__(self) -> Iterator[str]:
        return iter(self._rows.usage)

    def __len__(self) -> int:
        return len(self._rows.usage)


class TenantRows:
    """One connection's decoded rows per tenant, with the connection's `PRAGMA data_version`
    they were read under.

    A read asks `data_version` (one read transaction, no rows) and answers from memory while
    it is where it was. It is read before the rows, so rows read after another connection's
    commit are kept under the older mark and read again next time: never stale, at worst
    read twice. The connection's own commits do not change `data_version`, so a write either
    forgets everything first (`forget`) or takes its tenant's rows out and puts back what it
    wrote (`locked`, `keep`).
    """

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db
        self._tenants: dict[str, tuple[int, Rows]] = {}

    def read(self, tenant: str) -> Rows:
        version = self._data_version()
        found = self._tenants.get(tenant)
        if found is not None and found[0] == version:
            return found[1]
        rows = Rows(records_of(self._db, tenant))
        self._remember(tenant, (version, rows))
        return rows

    def locked(self, tenant: str) -> tuple[Stamp, Rows]:
        """Inside a write transaction: the mark to `keep` the result under, and the tenant's
        rows exact as of now.

        No other connection can commit while this one holds the write lock, so rows
        remembered under the `data_version` read now are the stored rows; others are read."""
        stamp = Stamp(self._data_version())
        found = self._tenants.pop(tenant, None)  # `keep` puts the rows written back
        if found is not None and found[0] == stamp.version:
            return stamp, found[1]
        return stamp, Rows(records_of(self._db, tenant))

    def keep(self, tenant: str, stamp: Stamp, rows: Rows) -> None:
        """After this connection committed `rows` for `tenant` under the write lock `stamp`
        was read under: its own commit leaves `data_version` as it was, and any other
        connection's commit moves it, so `rows` stay exact until then."""
        self._remember(tenant, (stamp.version, rows))

    def _remember(self, tenant: str, entry: tuple[int, Rows]) -> None:
        if len(self._tenants) >= MAX_REMEMBERED_TENANTS:
            self._tenants.clear()
        self._tenants[tenant] = entry

    def _data_version(self) -> int:
        return int(self._db.execute("PRAGMA data_version").fetchone()[0])

    def forget(self) -> None:
        self._tenants.clear()

    def remembered(self) -> int:
        """How many tenants' rows are kept now (tests check the bound)."""
        return len(self._tenants)


def _record(devices: str, expires_at: float | None) -> Record:
    if holdernames.MARK not in devices:
        return Record(_devices(devices), expires_at)
    plain, name = holdernames.split(_devices(devices))
    return Record(plain, expires_at, name)


@functools.lru_cache(maxsize=1024)
def _devices(text: str) -> Mapping[str, int]:
    """A row's devices, decoded once per distinct text: a tenant's thousands of holders
    mostly hold the same few (`{"gpu.nvidia.com": 1}`), and a read decodes every row.
    Shared between records, so read-only: `accounting` never changes a record's devices."""
    parsed = json.loads(text)
    return MappingProxyType({str(c): int(n) for c, n in parsed.items()})


def records_of(db: sqlite3.Connection, tenant: str) -> Records:
    rows = db.execute("SELECT holder, devices, expires_at FROM holders WHERE tenant = ?", (tenant,))
    return {holder: _record(devices, expires) for holder, devices, expires in rows}


def all_records(db: sqlite3.Connection) -> dict[str, Records]:
    stored: dict[str, Records] = {}
    for tenant, holder, devices, expires in db.execute(
        "SELECT tenant, holder, devices, expires_at FROM holders"
    ):
        stored.setdefault(tenant, {})[holder] = _record(devices, expires)
    return stored
