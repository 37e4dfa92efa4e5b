"""The gang workloads of a cluster and their Pods, read by listing when the reconciler asks.

The truth of a gang's holder (`ledger.gangtruth`) needs each running gang's demand and the
Pods that draw from it. Those are listed at each reconcile pass rather than watched: a
cluster-wide watch of every Pod would cost the serving caches far more than a paged list of
the gangs' Pods every pass does, and only the reconciler reads them. JobSet and
LeaderWorkerSet are custom resources: where their CRD is not installed the API answers 404
and the kind is simply absent; so are PodGroups where the cluster does not serve
`scheduling.k8s.io/v1beta1`. Any other failure makes the whole list unavailable, so the
reconciler skips the pass instead of dropping every gang's holder.
"""

from __future__ import annotations

from collections.abc import Iterator

from webhook.kube.api import ApiError, KubeApi, Unreachable, list_pages
from webhook.types import FactsUnavailable, Object

WORKLOAD_PATHS = (
    ("batch/v1", "Job", "/apis/batch/v1/jobs"),
    ("jobset.x-k8s.io/v1alpha2", "JobSet", "/apis/jobset.x-k8s.io/v1alpha2/jobsets"),
    ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet",
     "/apis/leaderworkerset.x-k8s.io/v1/leaderworkersets"),
    ("scheduling.k8s.io/v1beta1", "PodGroup", "/apis/scheduling.k8s.io/v1beta1/podgroups"),
)  # fmt: skip
ONE_PATHS = {kind: (api_version, path) for api_version, kind, path in WORKLOAD_PATHS} | {
    "Workload": ("scheduling.k8s.io/v1beta1", "/apis/scheduling.k8s.io/v1beta1/workloads"),
}
"""Where one object of a kind is read (`path` with the namespace and name put in)."""
GANG_POD_LABELS = ("batch.kubernetes.io/job-name", "leaderworkerset.sigs.k8s.io/name")
"""The Job controller labels every Pod of a Job (a JobSet's too: it runs Jobs), the LWS
controller every Pod of a LeaderWorkerSet: only those Pods are listed."""


def list_workloads(api: KubeApi) -> list[Object]:
    """Every gang workload, every Pod carrying a gang label and every Pod of a namespace that
    has PodGroups (a Pod names its PodGroup in its spec, which no selector reaches); raises
    FactsUnavailable."""
    try:
        workloads = list(_workloads(api))
        groups = {_namespace(w) for w in workloads if w["kind"] == "PodGroup"}
        return [*workloads, *_pods(api, sorted(groups))]
    except (ApiError, Unreachable) as err:
        raise FactsUnavailable(f"gang workloads unavailable: {err}") from err


def get_workload(api: KubeApi, namespace: str, kind: str, name: str) -> Object | None:
    """One workload, PodGroup or Workload; None when absent or its kind is not served."""
    if kind not in ONE_PATHS:
        return None
    api_version, path = ONE_PATHS[kind]
    group_path, _, plural = path.rpartition("/")
    try:
        found = api.request("GET", f"{group_path}/namespaces/{namespace}/{plural}/{name}")
    except ApiError as err:
        if err.status == 404:
            return None
        raise FactsUnavailable(f"{kind} {namespace}/{name} unavailable: {err}") from err
    except Unreachable as err:
        raise FactsUnavailable(f"{kind} {namespace}/{name} unavailable: {err}") from err
    return {**found, "apiVersion": api_version, "kind": kind}


def _namespace(obj: Object) -> str:
    return str((obj.get("metadata") or {}).get("namespace", ""))


def _workloads(api: KubeApi) -> Iterator[Object]:
    for api_version, kind, path in WORKLOAD_PATHS:
        try:
            items = list(list_pages(api, path))
        except ApiError as err:
            if err.status == 404:  # the CRD is not installed
                continue
            raise
        yield from ({**item, "apiVersion": api_version, "kind": kind} for item in items)


def _pods(api: KubeApi, group_namespaces: list[str]) -> Iterator[Object]:
    seen: set[str] = set()
    pages = [("/api/v1/pods", {"labelSelector": label}) for label in GANG_POD_LABELS]
    pages += [(f"/api/v1/namespaces/{ns}/pods", {}) for ns in group_namespaces]
    for path, query in pages:
        for pod in list_pages(api, path, query):
            uid = str((pod.get("metadata") or {}).get("uid", ""))
            if uid not in seen:
                seen.add(uid)
                yield {**pod, "apiVersion": "v1", "kind": "Pod"}
