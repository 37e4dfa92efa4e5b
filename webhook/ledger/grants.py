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
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from webhook.ledger import accounting, wants
from webhook.ledger.accounting import Holds, Record, Records
from webhook.ledger.wants import GRANT_PREFIX

LEASE_SECONDS = 60.0
"""How long a written grant stays live without being written again."""
MIN_LEASE_LEFT = 40.0
"""No admission from a grant whose stored lease ends sooner (see the module docstring)."""
RENEW_LEFT = 50.0
"""A write that leaves the grant's size as it was renews its lease only if it ends sooner."""
DEMAND_SECONDS = 1.0
"""The window of recent admissions a grant is sized for (twice their devices): twice
FLUSH_INTERVAL, so the flush at the end of a burst's window still sees the whole burst."""
STANDING_SECONDS = LEASE_SECONDS - MIN_LEASE_LEFT
"""A grant outlives the tenant's last admission this long, then it is given back: about as
long as its lease, renewed by the writes of that admission at the latest, still lets it
admit (an idle grant is never written just to renew it; an admission that finds the lease
too short is decided by a write, which renews it). A request it blocks meanwhile gets it
back through a want (`wants`, `wantwatch`)."""
FLUSH_INTERVAL = 0.5
"""Queued holders are written this long after the first of them was queued, and at most one
flush per tenant this often: a burst of admissions shares one write. Each write costs the
process O(holders) and the API server a PUT of the whole TenantUsage, so writing the first
holder of a burst at once and the rest at a short interval would make the flusher a large
share of dragate's CPU per created claim. The lease, not this interval, keeps a crashed
process's admissions counted."""

T = TypeVar("T")
Devices = dict[str, int]
Apply = Callable[[Records], tuple[Records, T]]


def process_owner() -> str:
    """This process's name in grant and want keys: host (the Pod's name in a cluster), pid
    and a random part, so a restarted process never takes over a dead one's grant."""
    host = "".join(c for c in socket.gethostname() if c.isalnum() or c in "-.") or "host"
    return f"{host}/{os.getpid()}-{secrets.token_hex(3)}"


def grant_key(owner: str) -> str:
    return GRANT_PREFIX + owner


def consumption(holds: Mapping[str, Mapping[str, int]], limits: Mapping[str, int]) -> Devices:
    """Devices of the limited classes that `holds` take from a grant."""
    taken: Devices = {}
    for devices in holds.values():
        for device_class, count in devices.items():
            if device_class in limits and count > 0:
                taken[device_class] = taken.get(device_class, 0) + count
    return taken


@dataclass(frozen=True)
class Flight:
    """A write of the tenant's records in flight: what it stores for this process."""

    taken: Devices  # all the grant the queued holders in it had taken
    holds: Holds  # the queued holders it writes
    size: Devices  # the grant it sets
    expires_at: float  # the grant's lease it sets (wall clock)
    limits: Mapping[str, int]  # the limits it was sized under


@dataclass
class Grant:
    """One tenant's grant as this process knows it."""

    size: Devices = field(default_factory=dict)  # as stored by this process's last write
    expires_at: float = 0.0  # that write's lease (wall clock)
    sized_under: Mapping[str, int] = field(default_factory=dict)  # that write's limits
    used: Devices = field(default_factory=dict)  # taken by admissions not stored yet
    queued: Holds = field(default_factory=dict)  # holders admitted, not stored yet
    names: dict[str, str] = field(default_factory=dict)  # of queued holders, when known
    flight: Flight | None = None
    limits: dict[str, int] = field(default_factory=dict)  # the latest admission's
    admitted: deque[tuple[float, Devices]] = field(default_factory=deque)  # (monotonic, taken)
    last_admission: float | None = None  # monotonic
    peak: Devices = field(default_factory=dict)  # the largest size since the tenant went busy
    give_back: bool = False  # another process wants capacity: size 0 at the next flush
    last_flush: float = 0.0  # monotonic time the last flush began
    queued_since: float = 0.0  # monotonic time a holder was queued into an empty queue
    retry_at: float = 0.0  # monotonic: no flush before (the last one failed)

    def room(self, device_class: str) -> int:
        """What an admission may still take now, whichever way a write in flight ends."""
        cap = self.size.get(device_class, 0)
        if self.flight is not None:
            flight = self.flight
            cap = min(cap, flight.taken.get(device_class, 0) + flight.size.get(device_class, 0))
        return cap - self.used.get(device_class, 0)

    def demand(self, now: float) -> Devices:
        """Devices admitted per class in the last DEMAND_SECONDS (older entries dropped)."""
        while self.admitted and self.admitted[0][0] <= now - DEMAND_SECONDS:
            self.admitted.popleft()
        total: Devices = {}
        for _, taken in self.admitted:
            for device_class, count in taken.items():
                total[device_class] = total.get(device_class, 0) + count
        return total

    def record(self, now: float, taken: Devices) -> None:
        self.admitted.append((now, taken))
        self.last_admission = now

    def standing(self, now: float) -> bool:
        """Whether the tenant admitted anything in the last STANDING_SECONDS."""
        return self.last_admission is not None and now - self.last_admission < STANDING_SECONDS

    def flush_window_start(self) -> float:
        """Queued holders are written FLUSH_INTERVAL after this: the first of them was queued,
        or the last flush began (monotonic)."""
        return max(self.last_flush, self.queued_since)

    def holds_any(self) -> bool:
        return any(self.size.values())

    def is_empty(self, now: float) -> bool:
        """Nothing to remember: no grant, nothing queued or in flight, no recent admission."""
        return not (self.holds_any() or self.queued or self.flight or self.standing(now))


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

    def plan(self, tenant: str, records: Records, apply: Apply[T]) -> tuple[Records, T]:
        """The records to write for the tenant: `records` as read, with the queued holders
        in, this process's grant taken out for `apply` to use, then sized again.

        The write is registered as in flight before the lock is let go, so admissions meanwhile
        stay within both sizes; follow with exactly one `settle`.
        """
        with self._lock:
            grant = self._grants.setdefault(tenant, Grant())
            now = self.clock()
            queued, taken = dict(grant.queued), dict(grant.used)
            outcome = accounting.reserve(records, queued, {}, now=now, names=grant.names)
            folded, tally = outcome.records, outcome.totals
            mine = folded.pop(self.key, None)
            if mine is not None:
                accounting.move(tally, mine.devices, {})
            after, result = apply(folded)
            size = self._size(grant, after, now, tally if after is folded else None)
            expires = self._lease(grant, mine, size, now)
            if size:
                after = {**after, self.key: Record(size, expires)}
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
            grant.used = _minus(grant.used, flight.taken)
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

    def _size(
        self, grant: Grant, records: Records, now: float, tally: Mapping[str, int] | None
    ) -> Devices:
        """Twice the recent demand per limited class, at least the largest size since the
        tenant went busy (a standing grant), at most half of what is left free; nothing once
        it is idle, while another process wants capacity back, or while shutting down.
        `tally`: the totals of `records`, all live, when known (None: they are counted)."""
        mono = self.monotonic()
        if (
            self.closing
            or grant.give_back
            or not grant.standing(mono)
            or wants.others_want(records, self.owner, now)
        ):
            grant.peak = {}
            return {}
        demand = grant.demand(mono)
        live = tally if tally is not None else accounting.totals(accounting.live(records, now=now))
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


def _minus(devices: Mapping[str, int], taken: Mapping[str, int]) -> Devices:
    return {c: n - taken.get(c, 0) for c, n in devices.items()} | {
        c: -n for c, n in taken.items() if c not in devices
    }
