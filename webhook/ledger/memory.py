"""A ledger in process memory: for `dragate check` and for tests of the pipeline.

It has the same atomic check-and-reserve as the SQLite and Kubernetes ledgers, under a lock,
so the offline CLI counts exactly as a single webhook process would.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

from webhook.ledger.accounting import Holds, apply_holds, usage_of
from webhook.types import ClassUsage, Reservation


class MemoryLedger:
    """Per tenant: holder -> devices per class."""

    def __init__(self, initial: Mapping[str, Holds] | None = None) -> None:
        self._lock = threading.Lock()
        self._tenants: dict[str, Holds] = {t: dict(h) for t, h in (initial or {}).items()}

    def usage(self, tenant: str) -> Mapping[str, ClassUsage]:
        with self._lock:
            return usage_of(self._tenants.get(tenant, {}))

    def reserve(
        self,
        tenant: str,
        holds: Mapping[str, Mapping[str, int]],
        limits: Mapping[str, int],
    ) -> Reservation:
        with self._lock:
            current = self._tenants.get(tenant, {})
            updated = apply_holds(current, holds, limits)
            if updated is None:
                return Reservation(granted=False, usage=usage_of(current))
            self._tenants[tenant] = updated
            return Reservation(granted=True, usage=usage_of(updated))

    def release(self, tenant: str, holder: str) -> None:
        with self._lock:
            self._tenants.get(tenant, {}).pop(holder, None)
