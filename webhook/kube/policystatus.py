"""The status of each policy object: Ready (enforced, or left out and why) and, for a Tenant,
the devices it holds against its quota.

`kubectl get` and GitOps tools (Argo CD and Flux read `status.conditions`) show whether the
object in the cluster is the policy in force, and `kubectl get tenants` prints `usageSummary`
(`gpu.nvidia.com=3/4`). Status is written from the set being served, only for the generation
that set judged (an object edited a moment ago waits for the reload), only when it differs
from what the object already says, by the leader alone, never on the admission path. A change
of usage alone is written at most once per `min_interval` per object (coalesced); the usage
is the ledger's, the one source of truth, read once per pass.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from webhook.kube.api import ApiError, KubeApi, Unreachable
from webhook.kube.background import BackgroundLoop
from webhook.kube.informer import Resource
from webhook.kube.policywatch import POLICY_KINDS, PolicyObjects
from webhook.types import ClassUsage, FactsUnavailable, Object, ObjectVerdict, PolicySet, Tenant

Usage = Callable[[str], Mapping[str, ClassUsage]]
"""A tenant's usage per DeviceClass, from the ledger."""

MERGE_PATCH = "application/merge-patch+json"
READY = "Ready"
MAX_MESSAGE = 32768
"""metav1.Condition's limit on `message`."""
log = logging.getLogger("dragate.kube.policystatus")
PATHS: Mapping[str, Resource] = {r.kind: r for r in POLICY_KINDS}


def ready_condition(verdict: ObjectVerdict, now: str) -> dict[str, Any]:
    """A metav1.Condition saying whether `verdict`'s generation is enforced."""
    return {
        "type": READY,
        "status": "True" if verdict.enforced else "False",
        "reason": "Enforced" if verdict.enforced else "Invalid",
        "message": "enforced" if verdict.enforced else verdict.message[:MAX_MESSAGE],
        "observedGeneration": verdict.generation,
        "lastTransitionTime": now,
    }


def usage_status(tenant: Tenant, usage: Mapping[str, ClassUsage]) -> dict[str, Any]:
    """`usage` rows per class (quota classes, and any class held) and their one-line summary."""
    limits = {q.device_class: q.max_devices for q in tenant.quota}
    held = {c for c, u in usage.items() if u.used}
    rows = []
    for device_class in sorted(limits.keys() | held):
        row: dict[str, Any] = {"deviceClassName": device_class, "used": _used(usage, device_class)}
        if limits.get(device_class) is not None:
            row["limit"] = limits[device_class]
        rows.append(row)
    summary = ",".join(
        f"{r['deviceClassName']}={r['used']}" + (f"/{r['limit']}" if "limit" in r else "")
        for r in rows
    )
    return {"usage": rows, "usageSummary": summary}


def _used(usage: Mapping[str, ClassUsage], device_class: str) -> int:
    found = usage.get(device_class)
    return found.used if found is not None else 0


@dataclass(frozen=True)
class QuotaRow:
    """One row of a Tenant's `status.usage` and the pending devices among its `used`: what
    /metrics exports per tenant and class, so a graph and `kubectl get tenants` agree."""

    tenant: str
    device_class: str
    limit: int | None
    used: int
    pending: int


def quota_rows(tenant: Tenant, usage: Mapping[str, ClassUsage]) -> tuple[QuotaRow, ...]:
    """`usage_status`'s rows for `tenant`, with the pending devices of each class."""
    rows = []
    for row in usage_status(tenant, usage)["usage"]:
        device_class = str(row["deviceClassName"])
        pending = _pending(usage, device_class)
        rows.append(QuotaRow(tenant.name, device_class, row.get("limit"), row["used"], pending))
    return tuple(rows)


def _pending(usage: Mapping[str, ClassUsage], device_class: str) -> int:
    found = usage.get(device_class)
    return found.pending if found is not None else 0


def status_patch(
    obj: Object, verdict: ObjectVerdict, now: str, extra: Mapping[str, Any] | None = None
) -> dict[str, Any] | None:
    """The merge patch of `obj`'s status (`extra`: more status fields, a Tenant's usage), or
    None when it already says the same."""
    want = ready_condition(verdict, now)
    have = _ready_of(obj)
    same_condition = have is not None and all(have.get(k) == want[k] for k in _COMPARED)
    status = obj.get("status") if isinstance(obj.get("status"), dict) else {}
    same_extra = all(status.get(k) == v for k, v in (extra or {}).items())  # type: ignore[union-attr]
    if same_condition and same_extra:
        return None
    if have is not None and have.get("status") == want["status"]:
        want["lastTransitionTime"] = have.get("lastTransitionTime", now)
    body = {"observedGeneration": verdict.generation, "conditions": [want], **(extra or {})}
    return {"status": body}


def condition_changes(obj: Object, verdict: ObjectVerdict) -> bool:
    """Whether the Ready condition itself would change (not only the usage)."""
    have, want = _ready_of(obj), ready_condition(verdict, "")
    return have is None or any(have.get(k) != want[k] for k in _COMPARED)


_COMPARED = ("status", "reason", "message", "observedGeneration")


def _ready_of(obj: Object) -> Mapping[str, Any] | None:
    status = obj.get("status")
    conditions = status.get("conditions") if isinstance(status, dict) else None
    found = [c for c in conditions or [] if isinstance(c, dict) and c.get("type") == READY]
    return found[0] if found else None


class PolicyStatusWriter(BackgroundLoop):
    """Keeps every policy object's status true to the set being served and the ledger."""

    thread_name = "policy-status"

    def __init__(
        self,
        api: KubeApi,
        objects: PolicyObjects,
        served: Callable[[], PolicySet | None],
        *,
        usage: Usage | None = None,
        leading: Callable[[], bool] = lambda: True,
        interval: float = 2.0,
        min_interval: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self.api = api
        self.objects = objects
        self.served = served
        self.usage = usage
        self.leading = leading
        self.interval = interval
        self.min_interval = min_interval
        self._clock = clock
        self._looked: dict[tuple[str, str], float] = {}
        self._quota: dict[str, tuple[QuotaRow, ...]] = {}

    def quota_rows(self) -> tuple[QuotaRow, ...]:
        """The rows of the usage last written per enforced Tenant; none unless leading (a
        former leader's rows would go stale)."""
        if not self.leading():
            return ()
        return tuple(row for name in sorted(self._quota) for row in self._quota[name])

    def write_once(self) -> int:
        """Write every status that differs (usage alone: not more often than `min_interval`);
        the number written. Only the leader writes."""
        policies = self.served()
        if policies is None or not self.leading():
            return 0
        try:
            objects = self.objects.objects()
        except FactsUnavailable:
            return 0
        verdicts = {(v.kind, v.name, v.generation): v for v in policies.objects}
        tenants = {t.name: t for t in policies.tenants}
        for gone in self._quota.keys() - tenants.keys():
            del self._quota[gone]
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        written = 0
        for obj in objects:
            verdict = verdicts.get(_key(obj))
            if verdict is not None and self._write(obj, verdict, tenants, now):
                written += 1
        return written

    def _write(
        self, obj: Object, verdict: ObjectVerdict, tenants: Mapping[str, Tenant], now: str
    ) -> bool:
        if self._recent(obj) and not condition_changes(obj, verdict):
            return False  # usage alone: coalesced, and not even read again yet
        patch = status_patch(obj, verdict, now, self._tenant_usage(obj, verdict, tenants))
        return patch is not None and self._patch(obj, patch)

    def _tenant_usage(
        self, obj: Object, verdict: ObjectVerdict, tenants: Mapping[str, Tenant]
    ) -> dict[str, Any] | None:
        tenant = tenants.get(verdict.name) if obj.get("kind") == "Tenant" else None
        if tenant is None or self.usage is None or not verdict.enforced:
            return None
        try:
            usage = self.usage(tenant.name)
        except FactsUnavailable:
            return None
        self._quota[tenant.name] = quota_rows(tenant, usage)
        return usage_status(tenant, usage)

    def _recent(self, obj: Object) -> bool:
        """Looked at within `min_interval` (and marked looked at now, if not)."""
        key = (str(obj.get("kind")), str((obj.get("metadata") or {}).get("name")))
        now, last = self._clock(), self._looked.get(key)
        if last is not None and now - last < self.min_interval:
            return True
        self._looked[key] = now
        return False

    def _patch(self, obj: Object, patch: dict[str, Any]) -> bool:
        resource = PATHS[str(obj.get("kind"))]
        name = str(obj["metadata"]["name"])
        try:
            self.api.request("PATCH", f"{resource.path}/{name}/status", body=patch,
                             content_type=MERGE_PATCH)  # fmt: skip
        except (ApiError, Unreachable) as err:  # deleted meanwhile, or the API is away
            log.warning("policy status not written", extra={"object": name, "error": str(err)})
            return False
        return True

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.write_once()
            except Exception:  # a status writer that dies would leave conditions stale forever
                log.exception("policy status pass failed")
            self._sleep(self.interval)


def _key(obj: Object) -> tuple[str, str, int]:
    metadata = obj.get("metadata") or {}
    generation = metadata.get("generation", 0)
    return (
        str(obj.get("kind")),
        str(metadata.get("name")),
        generation if isinstance(generation, int) else 0,
    )
