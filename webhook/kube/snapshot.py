"""Cluster facts offline: a snapshot file of Namespaces, claims, templates, classes and slices
(and the Pods and gang workloads among them, for the truth of gangs' holders).

`dragate check` and `dragate serve` without a cluster read the same kinds the watch caches
hold in a cluster, from a file a platform team can export with
`kubectl get ns,resourceclaims,resourceclaimtemplates,deviceclasses,resourceslices -A -o yaml`.
Objects admitted by `check` are added, so later manifests see earlier ones.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence

from webhook.files.manifests import read_manifests
from webhook.files.yamlio import YamlError
from webhook.types import API_VERSION, Object

STATE_KINDS = frozenset(
    {"Namespace", "ResourceClaim", "ResourceClaimTemplate", "DeviceClass", "ResourceSlice"}
)
WORKLOAD_KINDS = frozenset({"Pod", "Job", "JobSet", "LeaderWorkerSet", "PodGroup", "Workload"})
"""Kept for the truth of gangs' holders (`ledger.usage.gang_holds`)."""


class SnapshotState:
    """An in-memory ClusterState; safe for the threads of one process."""

    def __init__(self, objects: Iterable[Object] = ()) -> None:
        self._lock = threading.Lock()
        self._by_kind: dict[str, dict[tuple[str, str], Object]] = {}  # kind -> (ns, name)
        for obj in objects:
            self.add(obj)

    @classmethod
    def empty(cls) -> SnapshotState:
        return cls()

    def add(self, obj: Object) -> None:
        """Remember an object of a kind the state holds; other kinds are ignored."""
        kind = str(obj.get("kind", ""))
        if kind not in STATE_KINDS and kind not in WORKLOAD_KINDS:
            return
        meta = obj.get("metadata") or {}
        key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
        with self._lock:
            self._by_kind.setdefault(kind, {})[key] = obj

    def _of_kind(self, kind: str) -> list[Object]:
        """One kind's objects, without looking at the others (claims may number 100,000)."""
        with self._lock:
            return list(self._by_kind.get(kind, {}).values())

    def _get(self, kind: str, namespace: str, name: str) -> Object | None:
        return self._by_kind.get(kind, {}).get((namespace, name))

    def namespace(self, name: str) -> Object | None:
        return self._get("Namespace", "", name)

    def template(self, namespace: str, name: str) -> Object | None:
        return self._get("ResourceClaimTemplate", namespace, name)

    def device_classes(self) -> Mapping[str, Object]:
        return {str(c["metadata"]["name"]): c for c in self._of_kind("DeviceClass")}

    def claims(self) -> Sequence[Object]:
        return self._of_kind("ResourceClaim")

    def namespaces(self) -> Sequence[Object]:
        return self._of_kind("Namespace")

    def slices(self) -> Sequence[Object]:
        return self._of_kind("ResourceSlice")

    def workloads(self) -> Sequence[Object]:
        return [obj for kind in sorted(WORKLOAD_KINDS) for obj in self._of_kind(kind)]

    def workload(self, namespace: str, kind: str, name: str) -> Object | None:
        with self._lock:
            return self._get(kind, namespace, name)


def load_state(path: str) -> SnapshotState:
    """The snapshot in `path`; raises YamlError for unreadable files and unexpected kinds.

    dragate's own objects are left out: `kubectl get tenants,deviceclasses,... -o yaml` is a
    state file too, its policies read by `--policies`."""
    manifests = read_manifests([path])
    if manifests.problems:
        raise manifests.problems[0]
    documents = [d for d in manifests.documents if d.data.get("apiVersion") != API_VERSION]
    for doc in documents:
        kind = doc.data.get("kind")
        if kind not in STATE_KINDS:
            allowed = ", ".join(sorted(STATE_KINDS))
            raise YamlError(doc.source, f"a state file holds only {allowed}; found {kind!r}")
        if not (doc.data.get("metadata") or {}).get("name"):
            raise YamlError(doc.source, f"{kind} without metadata.name")
    return SnapshotState(doc.data for doc in documents)
