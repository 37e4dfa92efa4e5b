"""The TenantUsage object: how one tenant's records are stored in the cluster.

One object per tenant (`object_name`), its holders as one string in `spec.records`
(`recordtext`: the API server's cost per write stays flat as holders accumulate), and, for
replicas of the version before, the totals as the one entry of `spec.holders`. Reading
accepts both formats; the next write migrates the old one.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from webhook.ledger import accounting, recordtext, wants
from webhook.ledger.accounting import Records
from webhook.ledger.tenantrecords import Rows

GROUP, VERSION, PLURAL = "dragate.io", "v1alpha1", "tenantusages"
COLLECTION = f"/apis/{GROUP}/{VERSION}/{PLURAL}"
WANTED_LABEL = f"{GROUP}/wanted"
WANTED_SELECTOR = f"{WANTED_LABEL}=true"
"""The TenantUsages with a live want in their records. A label, not a CRD selectable field
of the spec: with `selectableFields` declared, the e2e API server's compare-and-swap writes
of one tenant slowed by a quarter (2 processes x 4 threads: 115-154 decisions/s against
172-217 without; labels are matched from the object's metadata alone)."""
TOTALS_KEY = "totals:spec.records"
"""The one holder in `spec.holders`: the totals of `spec.records`, for older readers."""
_DNS_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")


def object_name(tenant: str) -> str:
    """The tenant's own name when the API accepts it, else a stable hash of it."""
    if _DNS_NAME.match(tenant):
        return tenant
    return "tenant-" + hashlib.sha256(tenant.encode()).hexdigest()[:20]


@dataclass(frozen=True)
class Stored:
    """A TenantUsage as read or written: its rows (records with their totals kept) and the
    resourceVersion to write against."""

    rows: Rows
    resource_version: str | None  # None: the object does not exist yet
    lines: recordtext.Lines = field(default_factory=recordtext.Lines, compare=False)  # as stored
    uid: str = ""  # metadata.uid: a write based on this copy is refused for another object

    @property
    def records(self) -> Records:
        return self.rows.records


def stored_of(obj: Mapping[str, Any]) -> Stored:
    lines = recordtext.Lines()
    metadata = obj["metadata"]
    rows = Rows(records_of(obj, lines))
    return Stored(rows, str(metadata["resourceVersion"]), lines, str(metadata.get("uid", "")))


def records_of(obj: Mapping[str, Any], lines: recordtext.Lines | None = None) -> Records:
    """The records of a TenantUsage: `spec.records` (one string, `recordtext`; its lines
    remembered in `lines`), or for an object no replica of this version has written yet, the
    `spec.holders` map (the format before: migrated by the next write)."""
    spec = obj.get("spec") or {}
    if isinstance(spec.get("records"), str):
        where = f"TenantUsage {spec.get('tenant')!r}"
        return recordtext.decode(spec["records"], where, lines)
    holders = spec.get("holders") or {}
    return {str(k): accounting.Record.from_json(v) for k, v in holders.items()}


def tenant_usage(
    tenant: str,
    records: Records,
    resource_version: str | None,
    lines: recordtext.Lines | None = None,
    *,
    now: float | None = None,
    totals: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """The object to write; raises recordtext.Unstorable when the records do not fit in it.
    `lines` (as `recordtext.encode`) spares formatting the records that did not change;
    with `now`, a live want among the records (read off the text's want lines) sets the
    WANTED_LABEL, which the processes holding grants watch (`wants`); a write without one
    drops the label. `totals`: `accounting.totals(records)`, when the caller has them.

    Besides `spec.records`, `spec.holders` carries one holder, TOTALS_KEY, holding the totals
    per class: a replica of the version before (which reads only `holders`) sees the tenant's
    usage and keeps within its quota during a rolling upgrade. Its write drops `records`
    and the holders behind the totals; the totals stay a holder of their own (read back as
    one, counted in the next totals) until the reconciler rebuilds the holders from the
    claims: an over-count for a while, never an overcommit.
    """
    metadata: dict[str, Any] = {"name": object_name(tenant)}
    if resource_version is not None:
        metadata["resourceVersion"] = resource_version
    text = recordtext.encode(records, tenant, lines)
    if now is not None and wants.wanting(text, now):
        metadata["labels"] = {WANTED_LABEL: "true"}
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "TenantUsage",
        "metadata": metadata,
        "spec": {
            "tenant": tenant,
            "records": text,
            "holders": {TOTALS_KEY: {"devices": dict(totals or accounting.totals(records))}},
        },
    }
