"""A ledger in process memory: for `dragate check`, `dragate test` and the pipeline's tests.

It has the same atomic check-and-reserve as the SQLite and Kubernetes ledgers, under a lock,
so the offline CLI counts exactly as a single webhook process would.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet

from webhook.ledger import accounting
from webhook.ledger.accounting import Holds, Records
from webhook.types import ClassUsage, Deadline, Reservation


class MemoryLedger:
    """Per tenant: holder -> record (devices per class, pending expiry)."""

    def __init__(
        self,
        initial: Mapping[str, Holds] | None = None,
        clock: Callable[[], float] = time.time,
        names: Mapping[str, str] | None = None,
    ) -> None:
        self._lock = threading.Lock()
        self._clock = clock
        self._tenants: dict[str, Records] = {
            tenant: accounting.confirmed(holds, names) for tenant, holds in (initial or {}).items()
        }

    def usage(self, tenant: str, deadline: Deadline | None = None) -> Mapping[str, ClassUsage]:
        with self._lock:
            records = self._tenants.get(tenant, {})
            return accounting.usage_of(accounting.live(records, now=self._clock()))

    def reserve(
        self,
        tenant: str,
        holds: Mapping[str, Mapping[str, int]],
        limits: Mapping[str, int],
        deadline: Deadline | None = None,
        names: Mapping[str, str] | None = None,
    ) -> Reservation:
        with self._lock:
            if deadline is not None:
                deadline.check("reserving quota")
            current = self._tenants.get(tenant, {})
            outcome = accounting.reserve(current, holds, limits, now=self._clock(), names=names)
            self._tenants[tenant] = outcome.records
            return Reservation(outcome.granted, accounting.usage_of(outcome.records))

    def release(self, tenant: str, holder: str) -> None:
        with self._lock:
            self._tenants.get(tenant, {}).pop(holder, None)

    def reconcile(
        self,
        truth: Mapping[str, Holds],
        names: Mapping[str, str] | None = None,
        *,
        seen_at: float | None = None,
        gone: AbstractSet[str] = frozenset(),
    ) -> None:
        """Confirm, keep or drop holders given the holds of existing objects per tenant, seen
        at `seen_at` (now when not given), the names of the Pods behind holders keyed by uid,
        and the holders whose objects were seen deleted before (`accounting.reconcile`)."""
        with self._lock:
            now = self._clock() if seen_at is None else seen_at
            for tenant in set(self._tenants) | set(truth):
                current = self._tenants.get(tenant, {})
                self._tenants[tenant] = accounting.reconcile(
                    current, truth.get(tenant, {}), now=now, names=names, gone=gone
                )
