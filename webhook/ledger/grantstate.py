"""One tenant's grant as a process knows it, and the times every grant keeps.

`GrantBook` (`webhook.ledger.grants`, where the scheme is described) holds one `Grant` per
tenant under its lock; a `Flight` is the write of the tenant's records in flight, which the
admissions made meanwhile must fit whichever way it ends.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

from webhook.ledger.accounting import Holds

LEASE_SECONDS = 60.0
"""How long a written grant stays live without being written again."""
MIN_LEASE_LEFT = 40.0
"""No admission from a grant whose stored lease ends sooner (see `webhook.ledger.grants`)."""
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

Devices = dict[str, int]


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


def minus(devices: Mapping[str, int], taken: Mapping[str, int]) -> Devices:
    return {c: n - taken.get(c, 0) for c, n in devices.items()} | {
        c: -n for c, n in taken.items() if c not in devices
    }
