"""Quota grants: a share of a tenant's quota that one process admits from without a write.

Without a grant, every admission that charges quota waits for a compare-and-swap write of
the tenant's TenantUsage, most of what dragate adds to a claim's create through the API
server (docs/benchmarks.md). With a grant, the write moves off the request path for all but
the first admission of a burst, without giving up the guarantee that quota is never
overcommitted, whatever the number of replicas (one serving process each):

- A grant is a pending record `grant:<owner>` in the tenant's records, written with the same
  compare-and-swap as every holder, so the API server keeps checking the stored invariant
  "live holders + live grants <= limit". Every reader, older replicas included, counts a
  grant as a pending holder: capacity in a grant is never handed out twice.
- An admission that fits the unused part of its process's grant is answered at once and its
  holder queued; a flush writes the queued holders in one batch, shrinking the grant by what
  they took and sizing it again in the same write (`GrantBook.plan`).
- A write in flight sets the grant to a new size. Admissions made meanwhile take only what is
  left under both the old and the new size (`Grant.room`), so they are covered whichever way
  the write ends: landed, refused, or unknown (a timeout: the book then assumes the smaller).
- An admission is made from a grant only while its stored lease has at least MIN_LEASE_LEFT
  seconds to run. A process that dies before writing its queued holders leaves a grant that
  still counts their devices for that long: longer than the reconciler takes to see their
  claims and record them itself (every 15 s in the Lease holder; when the holder is the
  process that died, another replica takes the Lease within its 15 s and reconciles at once).
- Size: twice the devices the process admitted for the class in the last DEMAND_SECONDS,
  so the write that decides the first admission of a burst already takes a grant for the
  next one, and never less than the size it had while the tenant keeps admitting (a
  standing grant: claims created a few seconds apart, or a controller's bursts, are
  admitted from it instead of each waiting for a write); never more than half of what is
  left free. Near the limit grants shrink to nothing and every admission is decided
  exactly, as without grants; a process idle for STANDING_SECONDS gives its grant back.
- A request refused only because other processes hold grants asks for them back (`wants`);
  a process that sees another's live want sizes its own grant 0, and one that holds a
  grant learns of a want from its watch of wanted TenantUsages (`wantwatch`) and gives the
  grant back at once, idle or not.

The book is pure bookkeeping under one lock; `KubeLedger` does the reads and writes.
"""

from __future__ import annotations

import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Mapping
from typing import TypeVar

from webhook.ledger import accounting, wants
from webhook.ledger.accounting import Record, Records
from webhook.ledger.grantstate import (
    FLUSH_INTERVAL,
    LEASE_SECONDS,
    MIN_LEASE_LEFT,
    RENEW_LEFT,
    STANDING_SECONDS,
    Devices,
    Flight,
    Grant,
    consumption,
    minus,
)
from webhook.ledger.tenantrecords import Rows
from webhook.ledger.wants import GRANT_PREFIX

T = TypeVar("T")
Apply = Callable[[Records], tuple[Records, T]]


def process_owner() -> str:
    """This process's name in grant and want keys: host (the Pod's name in a cluster), pid
    and a random part, so a restarted process never takes over a dead one's grant."""
    host = "".join(c for c in socket.gethostname() if c.isalnum() or c in "-.") or "host"
    return f"{host}/{os.getpid()}-{secrets.token_hex(3)}"


def grant_key(owner: str) -> str:
    return GRANT_PREFIX + owner


class GrantBook:
    """This process's grants, one per tenant; every method is safe across threads."""

    def __init__(
        self,
        owner: str,
        *,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.owner = owner
        self.key = grant_key(owner)
        self.clock = clock
        self.monotonic = monotonic
        self.closing = False  # set on shutdown: every grant is sized 0 and given back
        self.queued_signal = threading.Event()  # set when a holder opens a flush window
        self._lock = threading.Lock()
        self._grants: dict[str, Grant] = {}

    # ------------------------------------------------------------------ admissions

    def admit(
        self,
        tenant: str,
        holds: Mapping[str, Mapping[str, int]],
        limits: Mapping[str, int],
        names: Mapping[str, str] | None = None,
    ) -> bool:
        """Take `holds` from the tenant's grant and queue them; False (nothing taken) when
        they do not fit in it, or its lease is too short to admit from."""
        with self._lock:
            grant = self._grants.setdefault(tenant, Grant())
            grant.limits = dict(limits)
            new = {k: dict(d) for k, d in holds.items() if grant.queued.get(k) != dict(d)}
            taken = consumption(new, limits)
            if taken and self.clock() > grant.expires_at - MIN_LEASE_LEFT:
                return False
            if any(limits[c] < grant.sized_under.get(c, limits[c]) for c in taken):
                return False  # a lowered limit: the next write sizes the grant under it
            if any(count > grant.room(c) for c, count in taken.items()):
                return False
            for device_class, count in taken.items():
                grant.used[device_class] = grant.used.get(device_class, 0) + count
            opens = bool(new) and not grant.queued
            if opens:
                grant.queued_since = self.monotonic()
            grant.queued.update(new)
            grant.names.update((k, n) for k, n in (names or {}).items() if k in new)
            grant.record(self.monotonic(), taken)
        if opens:  # the holders after it are written with it: no deadline moves for them
            self.queued_signal.set()
        return True

    def note(
        self, tenant: str, holds: Mapping[str, Mapping[str, int]], limits: Mapping[str, int]
    ) -> None:
        """Count an admission decided by a write towards the demand the grant is sized for."""
        with self._lock:
            grant = self._grants.setdefault(tenant, Grant())
            grant.limits = dict(limits)
            grant.record(self.monotonic(), consumption(holds, limits))

    # ------------------------------------------------------------------ writes

    def plan(self, tenant: str, rows: Rows, apply: Apply[T]) -> tuple[Rows, T]:
        """The rows to write for the tenant: `rows` as read, with the queued holders in,
        this process's grant taken out for `apply` to use, then sized again. Their totals
        are moved along (`Rows`), so a write sizes the grant and stores the totals without
        walking every holder.

        The write is registered as in flight before the lock is let go, so admissions meanwhile
        stay within both sizes; follow with exactly one `settle`.
        """
        with self._lock:
            grant = self._grants.setdefault(tenant, Grant())
            now = self.clock()
            queued, taken = dict(grant.queued), dict(grant.used)
            folded = rows.planned(
                queued, {}, now=now, pending_seconds=accounting.PENDING_SECONDS, names=grant.names
            ).after
            mine = folded.records.get(self.key)
            folded = folded.without(self.key)
            records, result = apply(folded.records)
            after = folded if records is folded.records else Rows(records)
            size = self._size(grant, after, now)
            expires = self._lease(grant, mine, size, now)
            if size:
                after = after.with_changes({self.key: Record(size, expires)})
            grant.flight = Flight(taken, queued, size, expires, dict(grant.limits))
            grant.last_flush = self.monotonic()
            return after, result

    def settle(self, tenant: str, landed: bool | None) -> None:
        """How the write `plan` registered ended: stored, not stored, or unknown (None)."""
        if landed is None:
            self.unknown(tenant)
        elif landed:
            self.landed(tenant)
        else:
            self.missed(tenant)

    def landed(self, tenant: str) -> None:
        """The write in flight is stored: its grant is the grant, its holders are stored."""
        with self._lock:
            grant = self._grants.get(tenant)
            if grant is None or grant.flight is None:
                return
            flight, grant.flight = grant.flight, None
            grant.size, grant.expires_at = flight.size, flight.expires_at
            grant.sized_under = flight.limits
            grant.used = minus(grant.used, flight.taken)
            grant.give_back = grant.give_back and bool(flight.size)
            for key, devices in flight.holds.items():
                if grant.queued.get(key) == devices:
                    del grant.queued[key]
                    grant.names.pop(key, None)

    def missed(self, tenant: str) -> None:
        """The write in flight was refused or never sent: nothing of it is stored."""
        with self._lock:
            grant = self._grants.get(tenant)
            if grant is not None:
                grant.flight = None

    def unknown(self, tenant: str) -> None:
        """The write in flight may or may not have landed: assume the smaller grant and keep
        its holders queued (writing them again is harmless), until a write lands."""
        with self._lock:
            grant = self._grants.get(tenant)
            if grant is None or grant.flight is None:
                return
            flight, grant.flight = grant.flight, None
            grant.size = {
                c: min(n, flight.taken.get(c, 0) + flight.size.get(c, 0))
                for c, n in grant.size.items()
            }

    # ------------------------------------------------------------------ flushing

    def due(self) -> list[str]:
        """Tenants with holders to write, or a grant to give back."""
        with self._lock:
            now = self.monotonic()
            for tenant in [t for t, g in self._grants.items() if g.is_empty(now)]:
                del self._grants[tenant]
            return [t for t, g in self._grants.items() if self._is_due(g, now)]

    def has_work(self) -> bool:
        """Whether any holder is still queued or any grant still held (shutdown waits)."""
        with self._lock:
            return any(g.queued or g.holds_any() for g in self._grants.values())

    def retry_later(self, tenant: str, seconds: float) -> None:
        """No flush of the tenant for `seconds` (its last one failed)."""
        with self._lock:
            grant = self._grants.get(tenant)
            if grant is not None:
                grant.retry_at = self.monotonic() + seconds

    def next_due_in(self) -> float:
        """Seconds until a grant will need a flush with no further admission (at most 1)."""
        with self._lock:
            now = self.monotonic()
            waits = [1.0]
            for grant in self._grants.values():
                if grant.queued:
                    waits.append(grant.flush_window_start() + FLUSH_INTERVAL - now)
                if grant.give_back:
                    waits.append(grant.retry_at - now)  # at once, unless it just failed
                if grant.holds_any():
                    last = grant.last_admission or grant.last_flush
                    waits.append(last + STANDING_SECONDS - now)
            return max(0.0, min(waits))

    def overlay(self, tenant: str, records: Records) -> Records:
        """`records` as read, as this process sees them: its queued holders in and its own
        grant out (capacity it may use; other processes' grants still count)."""
        with self._lock:
            grant = self._grants.get(tenant)
            queued = dict(grant.queued) if grant is not None else {}
            names = dict(grant.names) if grant is not None else {}
        shown = accounting.reserve(records, queued, {}, now=self.clock(), names=names).records
        shown.pop(self.key, None)
        return shown

    def wanted(self, tenant: str) -> None:
        """Another process wants capacity of the tenant back (seen on the API server's watch
        of wanted TenantUsages): a grant held for it is given back at once."""
        with self._lock:
            grant = self._grants.get(tenant)
            if grant is None or not (grant.holds_any() or grant.flight):
                return
            grant.give_back = True
        self.queued_signal.set()

    def pending(self) -> int:
        """Holders admitted and not stored yet, over every tenant (metrics, shutdown)."""
        with self._lock:
            return sum(len(g.queued) for g in self._grants.values())

    # ------------------------------------------------------------------ internals

    def _is_due(self, grant: Grant, now: float) -> bool:
        if grant.flight is not None or now < grant.retry_at:
            return False  # a flush is under way, or failed a moment ago
        if self.closing or grant.give_back:
            return bool(grant.queued) or grant.holds_any()
        if grant.queued:
            return now - grant.flush_window_start() >= FLUSH_INTERVAL
        if not grant.holds_any():
            return False
        return not grant.standing(now)

    def _size(self, grant: Grant, rows: Rows, now: float) -> Devices:
        """Twice the recent demand per limited class, at least the largest size since the
        tenant went busy (a standing grant), at most half of what is left free; nothing once
        it is idle, while another process wants capacity back, or while shutting down."""
        mono = self.monotonic()
        if (
            self.closing
            or grant.give_back
            or not grant.standing(mono)
            or wants.others_want(rows.lease_records(), self.owner, now)
        ):
            grant.peak = {}
            return {}
        demand = grant.demand(mono)
        live = rows.totals_at(now)
        size: Devices = {}
        for device_class, limit in grant.limits.items():
            free = limit - live.get(device_class, 0)
            wanted = max(2 * demand.get(device_class, 0), grant.peak.get(device_class, 0))
            count = min(wanted, free // 2)
            if count > 0:
                size[device_class] = count
        grant.peak = size
        return size

    def _lease(self, grant: Grant, stored: Record | None, size: Devices, now: float) -> float:
        """A renewed lease, unless the stored grant is unchanged and far from its end
        (then nothing changes, and a batch with nothing else to store writes nothing)."""
        ends = stored.expires_at if stored is not None else None
        if stored is not None and ends is not None and dict(stored.devices) == size:
            return ends if ends - now > RENEW_LEFT else now + LEASE_SECONDS
        return now + LEASE_SECONDS
