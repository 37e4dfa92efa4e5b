"""What `kubectl dragate` reads from a live cluster: policies, a tenant's ledger records, a
Pod and the objects its claims come from, the device inventory, the scheduler's events.

Every read goes through `KubeApi.request`, the one adapter boundary (tests fake it with
canned JSON); an object that does not exist reads as None, never as an error.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from webhook.engine.inventory import Inventory
from webhook.kube.api import ApiError, KubeApi, list_pages
from webhook.kube.policyreports import REPORT_NAME
from webhook.kube.policywatch import GROUP_PATH
from webhook.ledger import accounting, tenantusage
from webhook.ledger.accounting import Records
from webhook.policy.policyobjects import load_with_objects
from webhook.types import Object, PolicySet

RESOURCE_V1 = "/apis/resource.k8s.io/v1"
REPORTS = "/apis/wgpolicyk8s.io/v1alpha2"
WORKLOAD_PATHS = {
    **dict.fromkeys(("Deployment", "ReplicaSet", "StatefulSet", "DaemonSet"), "/apis/apps/v1"),
    "Job": "/apis/batch/v1",
}
"""Where each controller that creates Pods is read."""


class ClusterFacts:
    """Reads of one cluster through `api`, each made when first asked."""

    def __init__(self, api: KubeApi, policy_paths: Sequence[Path] = ()) -> None:
        self.api = api
        self.policy_paths = tuple(policy_paths)

    def get(self, path: str) -> Object | None:
        """The object at `path`, or None when the API server says 404."""
        try:
            return self.api.request("GET", path)
        except ApiError as error:
            if error.status == 404:
                return None
            raise

    def policies(self) -> PolicySet:
        """The files of `--policies` when given, else the cluster's Tenant objects (none when
        their CRD is not installed)."""
        if self.policy_paths:
            return load_with_objects(self.policy_paths, ())
        try:
            found = list(list_pages(self.api, f"{GROUP_PATH}/tenants"))
        except ApiError as error:
            if error.status != 404:
                raise
            found = []  # the CRD is not installed: no Tenant, no quota
        tenants = [{"apiVersion": "dragate.io/v1alpha1", "kind": "Tenant", **t} for t in found]
        return load_with_objects((), tenants)

    def records(self, tenant: str) -> Records:
        """The tenant's ledger records that count against its quota now (none stored: {})."""
        found = self.get(f"{tenantusage.COLLECTION}/{tenantusage.object_name(tenant)}")
        stored = tenantusage.records_of(found) if found is not None else {}
        return accounting.live(stored, now=time.time())

    def namespace(self, name: str) -> Object | None:
        return self.get(f"/api/v1/namespaces/{name}")

    def pod(self, namespace: str, name: str) -> Object | None:
        return self.get(f"/api/v1/namespaces/{namespace}/pods/{name}")

    def claim(self, namespace: str, name: str) -> Object | None:
        return self.get(f"{RESOURCE_V1}/namespaces/{namespace}/resourceclaims/{name}")

    def template(self, namespace: str, name: str) -> Object | None:
        return self.get(f"{RESOURCE_V1}/namespaces/{namespace}/resourceclaimtemplates/{name}")

    def claims(self) -> list[Object]:
        """Every ResourceClaim in the cluster: the allocated ones hold devices."""
        return list(list_pages(self.api, f"{RESOURCE_V1}/resourceclaims"))

    def nodes(self) -> list[Object]:
        return list(list_pages(self.api, "/api/v1/nodes"))

    def workload(self, kind: str, namespace: str, name: str) -> Object | None:
        return self.get(f"{WORKLOAD_PATHS[kind]}/namespaces/{namespace}/{kind.lower()}s/{name}")

    def replica_sets(self, namespace: str) -> list[Object]:
        """The namespace's ReplicaSets (a Deployment's are found by their owner reference)."""
        return list(list_pages(self.api, f"/apis/apps/v1/namespaces/{namespace}/replicasets"))

    def policy_report(self, namespace: str) -> Object | None:
        """The namespace's `dragate` PolicyReport; None when none is written (or no CRD)."""
        try:
            return self.get(f"{REPORTS}/namespaces/{namespace}/policyreports/{REPORT_NAME}")
        except ApiError as error:
            if error.status == 403:
                return None  # reports are extra: a user who may not read them still gets why
            raise

    def device_classes(self) -> dict[str, Object]:
        found = list_pages(self.api, f"{RESOURCE_V1}/deviceclasses")
        return {str(c["metadata"]["name"]): c for c in found}

    def inventory(self) -> Inventory:
        return Inventory.from_slices(list(list_pages(self.api, f"{RESOURCE_V1}/resourceslices")))

    def events(self, namespace: str, name: str, kind: str = "Pod") -> list[Mapping[str, Any]]:
        """The object's events, oldest first."""
        query = {"fieldSelector": f"involvedObject.name={name},involvedObject.kind={kind}"}
        found = self.api.request("GET", f"/api/v1/namespaces/{namespace}/events", query=query)
        return sorted(found.get("items") or [], key=_event_time)


def _event_time(event: Mapping[str, Any]) -> str:
    return str(
        event.get("lastTimestamp")
        or (event.get("series") or {}).get("lastObservedTime")
        or event.get("eventTime")
        or (event.get("metadata") or {}).get("creationTimestamp")
        or ""
    )
