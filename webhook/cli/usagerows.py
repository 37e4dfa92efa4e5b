"""A tenant's quota as `kubectl dragate usage` shows it: per class, the limit, the devices
used (pending ones included), those pending, what is free, and the largest holders.

`limit`, `used` and `pending` are `policystatus.quota_rows`', the rows a Tenant's
`status.usage` carries and /metrics exports, so the command, `kubectl get tenants` and the
graphs never disagree; holders are read from the same ledger records.
"""

from __future__ import annotations

from dataclasses import dataclass

from webhook.engine.counting import holder_shown
from webhook.kube.policystatus import quota_rows
from webhook.ledger import accounting
from webhook.ledger.accounting import Records
from webhook.types import Holder, Tenant

TOP_HOLDERS = 3


@dataclass(frozen=True)
class UsageRow:
    """One tenant's one class."""

    tenant: str
    device_class: str
    limit: int | None
    used: int
    pending: int
    holders: tuple[Holder, ...]  # largest first

    @property
    def free(self) -> int | None:
        return None if self.limit is None else max(self.limit - self.used, 0)

    def as_json(self) -> dict[str, object]:
        return {
            "tenant": self.tenant,
            "deviceClassName": self.device_class,
            "limit": self.limit,
            "used": self.used,
            "pending": self.pending,
            "free": self.free,
            "holders": [
                {"holder": holder_shown(h.key, h.name), "pod": h.name or None, "devices": h.devices}
                for h in self.holders
            ],
        }


def usage_rows(tenant: Tenant, records: Records) -> list[UsageRow]:
    """A row per class the tenant has a quota for or holds devices of."""
    usage = accounting.usage_of(records)
    rows = []
    for row in quota_rows(tenant, usage):
        found = usage.get(row.device_class)
        holders = sorted(found.holders, key=lambda h: -h.devices) if found is not None else []
        rows.append(UsageRow(tenant.name, row.device_class, row.limit, row.used, row.pending,
                             tuple(holders)))  # fmt: skip
    return rows


def holders_text(holders: tuple[Holder, ...], top: int = TOP_HOLDERS) -> str:
    """The largest holders, a Pod by `ns/name`, as `ns/pod=2,claim:ns/c=1 (+3 more)`."""
    shown = ",".join(f"{_holder(h)}={h.devices}" for h in holders[:top])
    more = len(holders) - top
    return shown + (f" (+{more} more)" if more > 0 else "") if shown else "-"


def _holder(holder: Holder) -> str:
    return holder.name if holder.name else holder.key
