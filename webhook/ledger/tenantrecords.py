"""One tenant's holders with their totals kept: what both local ledgers reserve on.

A reservation checks only the classes it grows against totals kept from one change to the
next, so a new holder among thousands costs a copy of the table, not a walk of every holder.
The records are shared by later reads: nothing may change them (`accounting` builds new
records and never changes those it is given). The memory ledger keeps one `Rows` per
tenant; the SQLite ledger keeps the rows it decoded per connection (`sqliterows`).
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

    def usage_at(self, now: float) -> dict[str, ClassUsage]:
        """What counts against the quota at `now`: ended leases left out."""
        if self.all_live(now):
            return dict(self.usage)
        return accounting.usage_of(accounting.live(self.records, now=now))

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
