"""Workload prediction: will the Pods of a Deployment, StatefulSet, Job, JobSet or LWS fit?

Quota is charged per Pod, when each Pod is created, so a Deployment whose replicas cannot all
fit is admitted and then leaves Pods failing one by one. A warning at the workload's own
`kubectl apply` tells the user before that happens; it never denies, because replicas are
scaled, rolled and retried in ways a single admission cannot see.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from webhook.types import ClassUsage, Tenant

PREDICTED_KINDS = frozenset(
    {
        ("apps", "Deployment"),
        ("apps", "StatefulSet"),
        ("batch", "Job"),
        ("jobset.x-k8s.io", "JobSet"),
        ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"),
    }
)
"""(API group, kind) of the workloads predicted: a Volcano `batch.volcano.sh` Job is not one."""


ChargesOf = Callable[[Mapping[str, Any]], Mapping[str, int]]
"""Devices per class one Pod with the given pod spec would be charged."""


def demand(obj: Mapping[str, Any], charges_of: ChargesOf) -> dict[str, int]:
    """Devices per class all the workload's Pods take when running at once."""
    total: dict[str, int] = {}
    for pods, pod_spec in pod_groups(obj):
        for device_class, devices in charges_of(pod_spec).items():
            total[device_class] = total.get(device_class, 0) + pods * devices
    return total


def pod_groups(obj: Mapping[str, Any]) -> Iterator[tuple[int, Mapping[str, Any]]]:
    """(number of Pods running at once, their pod spec) for each pod template of the workload."""
    spec = obj.get("spec") or {}
    kind = obj.get("kind")
    if kind == "JobSet":
        for job in spec.get("replicatedJobs") or []:
            job_spec = ((job.get("template") or {}).get("spec")) or {}
            pods = _int(job.get("replicas"), 1) * job_pods(job_spec)
            yield pods, _pod_spec(job_spec.get("template"))
        return
    if kind == "LeaderWorkerSet":
        yield from _lws_groups(spec)
        return
    pods = job_pods(spec) if kind == "Job" else _int(spec.get("replicas"), 1)
    yield pods, _pod_spec(spec.get("template"))


def job_pods(job_spec: Mapping[str, Any]) -> int:
    """A Job's Pods at once: `parallelism`, and no more than `completions` when Indexed (each
    index runs once at a time)."""
    pods = _int(job_spec.get("parallelism"), 1)
    completions = job_spec.get("completions")
    if job_spec.get("completionMode") == "Indexed" and isinstance(completions, int):
        return min(pods, _int(completions, pods))
    return pods


def _lws_groups(spec: Mapping[str, Any]) -> Iterator[tuple[int, Mapping[str, Any]]]:
    """Per group (`replicas` of them): the leader once, `size - 1` workers; the leader's pod
    template is the worker's unless it has its own."""
    groups = _int(spec.get("replicas"), 1)
    template = spec.get("leaderWorkerTemplate") or {}
    worker = _pod_spec(template.get("workerTemplate"))
    leader = _pod_spec(template.get("leaderTemplate")) if template.get("leaderTemplate") else worker
    yield groups, leader
    yield groups * max(_int(template.get("size"), 1) - 1, 0), worker


def _pod_spec(template: Any) -> Mapping[str, Any]:
    return ((template or {}).get("spec") or {}) if isinstance(template, Mapping) else {}


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def fit_warnings(
    name: str, needed: Mapping[str, int], tenant: Tenant, usage: Mapping[str, ClassUsage]
) -> Iterator[str]:
    """A warning per class whose remaining quota is less than the Pods would take."""
    for device_class, devices in sorted(needed.items()):
        limit = tenant.limit_for(device_class)
        if limit is None or limit.max_devices is None:
            continue
        left = limit.max_devices - usage.get(device_class, ClassUsage()).used
        if devices > left:
            yield (
                f"{name}: its pods need {devices} {device_class} devices, but tenant "
                f"{tenant.name!r} has {max(left, 0)} of {limit.max_devices} left; "
                "some pods will be denied"
            )
