"""The gang workloads of a cluster and their Pods, read by listing when the reconciler asks.

The truth of a gang's holder (`ledger.gangtruth`) needs each running gang's demand and the
Pods that draw from it. Those are listed at each reconcile pass rather than watched: a
cluster-wide watch of every Pod would cost the serving caches far more than a paged list of
the gangs' Pods every pass does, and only the reconciler reads them. JobSet and
LeaderWorkerSet are custom resources: where their CRD is not installed the API answers 404
and the kind is simply absent. Any other failure makes the whole list unavailable, so the
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
)  # fmt: skip
GANG_POD_LABELS = ("batch.kubernetes.io/job-name", "leaderworkerset.sigs.k8s.io/name")
"""The Job controller labels every Pod of a Job (a JobSet's too: it runs Jobs), the LWS
controller every Pod of a LeaderWorkerSet: only those Pods are listed."""


def list_workloads(api: KubeApi) -> list[Object]:
    """Every gang workload and every Pod carrying a gang label; raises FactsUnavailable."""
    try:
        return [*_workloads(api), *_pods(api)]
    except (ApiError, Unreachable) as err:
        raise FactsUnavailable(f"gang workloads unavailable: {err}") from err


def _workloads(api: KubeApi) -> Iterator[Object]:
    for api_version, kind, path in WORKLOAD_PATHS:
        try:
            items = list(list_pages(api, path))
        except ApiError as err:
            if err.status == 404:  # the CRD is not installed
                continue
            raise
        yield from ({**item, "apiVersion": api_version, "kind": kind} for item in items)


def _pods(api: KubeApi) -> Iterator[Object]:
    seen: set[str] = set()
    for label in GANG_POD_LABELS:
        for pod in list_pages(api, "/api/v1/pods", {"labelSelector": label}):
            uid = str((pod.get("metadata") or {}).get("uid", ""))
            if uid not in seen:
                seen.add(uid)
                yield {**pod, "apiVersion": "v1", "kind": "Pod"}
