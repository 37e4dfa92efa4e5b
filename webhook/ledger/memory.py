"""A ledger in process memory: for `dragate check`, `dragate test` and the pipeline's tests.

It has the same atomic check-and-reserve as the SQLite and Kubernetes ledgers, under a lock,
so the offline CLI counts exactly as a single webhook process would. Each tenant's holders
are `Rows` with their totals kept, as the SQLite ledger keeps them: a reservation checks the
classes it grows without walking every holder, so a gang of a thousand Pods is admitted in
time linear in its size.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet

from webhook.ledger import accounting
from webhook.ledger.accounting import PENDING_SECONDS, Holds
from webhook.ledger.tenantrecords import Rows
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
        self._tenants: dict[str, Rows] = {
            tenant: Rows(accounting.confirmed(holds, names))
            for tenant, holds in (initial or {}).items()
        }

    def usage(self, tenant: str, deadline: Deadline | None = None) -> Mapping[str, ClassUsage]:
        with self._lock:
            return self._rows(tenant).usage_at(self._clock())

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
            plan = self._rows(tenant).planned(
                holds, limits, now=self._clock(), pending_seconds=PENDING_SECONDS, names=names
            )
            self._tenants[tenant] = plan.after
            return plan.reservation()

    def release(self, tenant: str, holder: str) -> None:
        with self._lock:
            records = self._rows(tenant).records
            if holder in records:
                self._tenants[tenant] = Rows({k: r for k, r in records.items() if k != holder})

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
                current = self._rows(tenant).records
                records = accounting.reconcile(
                    current, truth.get(tenant, {}), now=now, names=names, gone=gone
                )
                self._tenants[tenant] = Rows(records)

    def _rows(self, tenant: str) -> Rows:
        return self._tenants.get(tenant) or Rows({})
