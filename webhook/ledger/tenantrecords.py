"""One tenant's holders with their totals kept: what every ledger reserves and writes on.

A reservation checks only the classes it grows against totals kept from one change to the
next, so a new holder among thousands costs a copy of the table, not a walk of every holder.
The records are shared by later reads: nothing may change them (`accounting` builds new
records and never changes those it is given). The memory ledger keeps one `Rows` per
tenant; the SQLite ledger keeps the rows it decoded per connection (`sqliterows`); the
cluster ledger keeps the rows it last read or wrote per tenant (`tenantusage.Stored`), and a
grant write plans on them (`grants.GrantBook.plan`).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping

from webhook.ledger import accounting
from webhook.ledger.accounting import Records
from webhook.types import ClassUsage, Reservation


class Rows:
    """One tenant's decoded rows as read once, and what follows from them alone.

    Shared by later reads: callers must not change `records` (`accounting` builds new
    records and never changes those it is given) and get copies of `usage`. The totals and
    the keys of the leases are worked out when first asked, then moved along by each change.
    """

    def __init__(
        self,
        records: Records,
        totals: dict[str, int] | None = None,
        leases: frozenset[str] | None = None,
    ) -> None:
        self.records = records
        if totals is not None:
            self.__dict__["totals"] = totals
        if leases is not None:
            self.__dict__["leases"] = leases

    def all_live(self, now: float) -> bool:
        """Whether no lease has ended by `now` (`accounting.live` would keep all)."""
        return not self.leases or now < accounting.lease_end(self.lease_records())

    @functools.cached_property
    def leases(self) -> frozenset[str]:
        """The keys of the leases among the holders (grants, wants): a few among thousands,
        all that decides whether every holder is live and whether another process wants
        capacity back."""
        return frozenset(k for k in self.records if accounting.is_lease(k))

    def lease_records(self) -> Records:
        return {key: self.records[key] for key in self.leases}

    @functools.cached_property
    def usage(self) -> dict[str, ClassUsage]:
        """`accounting.usage_of(records)`: the usage while `all_live`."""
        return accounting.usage_of(self.records)

    def usage_at(self, now: float) -> dict[str, ClassUsage]:
        """What counts against the quota at `now`: ended leases left out."""
        if self.all_live(now):
            return dict(self.usage)
        return accounting.usage_of(accounting.live(self.records, now=now))

    def totals_at(self, now: float) -> dict[str, int]:
        """The devices that count against the quota at `now`, per class: ended leases left
        out. Shared while `all_live`: callers must not change it."""
        if self.all_live(now):
            return self.totals
        return accounting.totals(accounting.live(self.records, now=now))

    @functools.cached_property
    def totals(self) -> dict[str, int]:
        """`accounting.totals(records)`, kept from one write to the next (`with_changes`)."""
        return accounting.totals(self.records)

    def with_changes(self, changed: Records) -> Rows:
        """These rows with `changed` set, their totals and lease keys moved, not recounted:
        a new holder among thousands costs a copy of the table, not a walk of every holder."""
        totals = dict(self.totals)
        for key, record in changed.items():
            known = self.records.get(key)
            accounting.move(totals, known.devices if known is not None else {}, record.devices)
        added = [key for key in changed if accounting.is_lease(key)]
        leases = self.leases.union(added) if added else self.leases
        return Rows({**self.records, **changed}, totals, leases)

    def without(self, key: str) -> Rows:
        """These rows without the holder `key`, their totals moved, not recounted."""
        known = self.records.get(key)
        if known is None:
            return self
        totals = dict(self.totals)
        accounting.move(totals, known.devices, {})
        records = dict(self.records)
        del records[key]
        return Rows(records, totals, self.leases - {key})

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
