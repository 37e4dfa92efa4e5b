"""Gangs: a workload's Pods charged whole at its creation, and the Pods that draw from it."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.engine.gangs import (
    DEFAULT_GANG_KINDS,
    gang_demand,
    gang_key,
    gang_reasons,
    is_finished,
    is_gang,
    is_suspended,
    pod_charges,
    pod_gang,
)
from webhook.types import Action, ClassUsage, Holder, QuotaLimit, Tenant

GPU = "gpu.nvidia.com"


def pod_template(claim: str = "two") -> dict[str, Any]:
    return {"spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": claim}]}}


CHARGES = {"two": {GPU: 2}, "one": {GPU: 1}}


def charges_of(pod_spec: dict[str, Any]) -> dict[str, int]:
    total: dict[str, int] = {}
    for claim in pod_spec.get("resourceClaims") or []:
        for device_class, n in CHARGES[claim["resourceClaimTemplateName"]].items():
            total[device_class] = total.get(device_class, 0) + n
    return total


def job(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "team-a"},
        "spec": {"template": pod_template(), **spec},
    }


def jobset(*replicated: tuple[int, int]) -> dict[str, Any]:
    jobs = [
        {
            "name": f"j{i}",
            "replicas": r,
            "template": {"spec": {"parallelism": p, "template": pod_template()}},
        }
        for i, (r, p) in enumerate(replicated)
    ]
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "js", "namespace": "team-a"},
        "spec": {"replicatedJobs": jobs},
    }


def lws(replicas: int, size: int, leader: str | None) -> dict[str, Any]:
    template: dict[str, Any] = {"size": size, "workerTemplate": pod_template("two")}
    if leader is not None:
        template["leaderTemplate"] = pod_template(leader)
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "serve", "namespace": "team-a"},
        "spec": {"replicas": replicas, "leaderWorkerTemplate": template},
    }


@pytest.mark.parametrize(
    ("obj", "devices"),
    [
        (job(parallelism=4), 8),
        (job(parallelism=4, completions=2, completionMode="Indexed"), 4),
        (job(parallelism=4, completions=9, completionMode="Indexed"), 8),
        (job(parallelism=4, completions=2), 8),
        (jobset((2, 3), (1, 1)), 14),
        (lws(2, 4, None), 16),
        (lws(2, 4, "one"), 14),
        (lws(1, 1, "one"), 1),
    ],
    ids=[
        "job-parallelism",
        "indexed-fewer-completions",
        "indexed-more-completions",
        "nonindexed-completions-ignored",
        "jobset-replicas-times-parallelism",
        "lws-leader-defaults-to-worker",
        "lws-own-leader",
        "lws-leader-only",
    ],
)
def test_gang_demand(obj: dict[str, Any], devices: int) -> None:
    assert gang_demand(obj, charges_of) == {GPU: devices}


CHILD_JOB = {**job(parallelism=4), "metadata": {
    "name": "js-j0-0", "namespace": "team-a",
    "labels": {"jobset.sigs.k8s.io/jobset-name": "js"},
}}  # fmt: skip


@pytest.mark.parametrize(
    ("obj", "kinds", "gang"),
    [
        (job(parallelism=4), DEFAULT_GANG_KINDS, True),
        (job(parallelism=1), DEFAULT_GANG_KINDS, False),
        (job(), DEFAULT_GANG_KINDS, False),
        (job(parallelism=4, completions=1, completionMode="Indexed"), DEFAULT_GANG_KINDS, False),
        (CHILD_JOB, DEFAULT_GANG_KINDS, False),
        (jobset((1, 1)), DEFAULT_GANG_KINDS, True),
        (lws(1, 2, None), DEFAULT_GANG_KINDS, True),
        (job(parallelism=4), frozenset({"JobSet"}), False),
        (
            {**job(parallelism=4), "apiVersion": "batch.volcano.sh/v1alpha1"},
            DEFAULT_GANG_KINDS,
            False,
        ),
        ({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {}}, DEFAULT_GANG_KINDS, False),
    ],
    ids=[
        "parallel-job",
        "job-of-one",
        "job-default-parallelism",
        "indexed-one-completion",
        "jobset-child-job",
        "jobset",
        "lws",
        "kind-not-listed",
        "other-group",
        "deployment",
    ],
)
def test_is_gang(obj: dict[str, Any], kinds: frozenset[str], gang: bool) -> None:
    assert is_gang(obj, kinds) is gang


def pod(
    labels: dict[str, str] | None = None, owners: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "p",
            "namespace": "team-a",
            "labels": labels or {},
            "ownerReferences": owners or [],
        }
    }


@pytest.mark.parametrize(
    ("the_pod", "key"),
    [
        (pod(owners=[{"kind": "Job", "name": "train", "uid": "u1"}]), "gang:team-a/Job/train"),
        (
            pod(
                {"jobset.sigs.k8s.io/jobset-name": "js"},
                [{"kind": "Job", "name": "js-j0-0", "uid": "u"}],
            ),
            "gang:team-a/JobSet/js",
        ),
        (pod({"leaderworkerset.sigs.k8s.io/name": "serve"}), "gang:team-a/LeaderWorkerSet/serve"),
        (pod(owners=[{"kind": "ReplicaSet", "name": "web", "uid": "u"}]), None),
        (pod(), None),
        (
            {
                **pod(owners=[{"kind": "Job", "name": "train", "uid": "u1"}]),
                "spec": {"schedulingGroup": {"podGroupName": "train-5d8c-train-pgt-0-7c4c"}},
            },
            "gang:team-a/PodGroup/train-5d8c-train-pgt-0-7c4c",
        ),
        ({**pod(), "spec": {"schedulingGroup": {"podGroupName": "pg"}}}, "gang:team-a/PodGroup/pg"),
        (pod(owners=[{"kind": "PodGroup", "name": "pg", "uid": "u"}]), "gang:team-a/PodGroup/pg"),
    ],
    ids=[
        "job-owner",
        "jobset-label-over-child-job",
        "lws-label",
        "replicaset",
        "bare",
        "job-pod-in-a-podgroup-draws-from-the-podgroup",
        "podgroup-alone",
        "claim-owned-by-a-podgroup",
    ],
)
def test_pod_gang(the_pod: dict[str, Any], key: str | None) -> None:
    assert pod_gang(the_pod, "team-a", DEFAULT_GANG_KINDS) == key


@pytest.mark.parametrize(
    ("the_pod", "key"),
    [
        (pod({"leaderworkerset.sigs.k8s.io/name": "serve"}), None),
        (
            {
                **pod(owners=[{"kind": "Job", "name": "train", "uid": "u1"}]),
                "spec": {"schedulingGroup": {"podGroupName": "pg"}},
            },
            "gang:team-a/Job/train",
        ),
    ],
    ids=["lws-not-listed", "podgroups-not-listed-its-job-carries"],
)
def test_pod_gang_of_a_kind_not_listed(the_pod: dict[str, Any], key: str | None) -> None:
    assert pod_gang(the_pod, "team-a", frozenset({"Job"})) == key


def test_gang_key() -> None:
    assert gang_key(job(parallelism=4)) == "gang:team-a/Job/train"


@pytest.mark.parametrize(
    ("obj", "suspended", "finished"),
    [
        (job(parallelism=4), False, False),
        (job(parallelism=4, suspend=True), True, False),
        (
            {**job(), "status": {"conditions": [{"type": "Complete", "status": "True"}]}},
            False,
            True,
        ),
        ({**job(), "status": {"conditions": [{"type": "Failed", "status": "True"}]}}, False, True),
        (
            {**job(), "status": {"conditions": [{"type": "Failed", "status": "False"}]}},
            False,
            False,
        ),
        (
            {**jobset(), "status": {"conditions": [{"type": "Completed", "status": "True"}]}},
            False,
            True,
        ),
    ],
    ids=["running", "suspended", "complete", "failed", "not-failed", "jobset-completed"],
)
def test_suspended_and_finished(obj: dict[str, Any], suspended: bool, finished: bool) -> None:
    assert (is_suspended(obj), is_finished(obj)) == (suspended, finished)


TENANT = Tenant("ml", quota=(QuotaLimit(GPU, max_devices=8),), enforcement=Action.DENY)


@pytest.mark.parametrize(
    ("used", "held", "messages"),
    [
        (0, 0, []),
        (
            5,
            0,
            [
                "gang team-a/train needs 8 gpu.nvidia.com; tenant ml has 3 free "
                "(held by claim:team-a/x (5))"
            ],
        ),
        (8, 8, []),
        (
            12,
            8,
            [
                "gang team-a/train needs 8 gpu.nvidia.com; tenant ml has 4 free "
                "(held by gang:team-a/Job/train (8), claim:team-a/x (4))"
            ],
        ),
    ],
    ids=["fits", "over", "already-held-by-itself", "over-with-own-share"],
)
def test_gang_reasons(used: int, held: int, messages: list[str]) -> None:
    holders = [Holder("claim:team-a/x", used - held)] if used - held else []
    if held:
        holders.insert(0, Holder("gang:team-a/Job/train", held))
    usage = {GPU: ClassUsage(used, tuple(holders))}
    reasons = gang_reasons(TENANT, "team-a/train", {GPU: 8}, usage, {GPU: held})
    assert [r.message for r in reasons] == messages
    assert all(r.policy == "Tenant/ml" and r.tenant == "ml" for r in reasons)


NATIVE = {"kind": "DeviceClass", "metadata": {"name": GPU},
          "spec": {"extendedResourceName": "nvidia.com/gpu"}}  # fmt: skip
LEGACY_SPEC = {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}
TWO_TEMPLATE = {"spec": {"spec": {"devices": {"requests": [
    {"name": "g", "exactly": {"deviceClassName": GPU, "count": 2}}]}}}}  # fmt: skip


@pytest.mark.parametrize(
    ("pod_spec", "classes", "charges"),
    [
        (pod_template()["spec"], {}, {GPU: 2}),
        (pod_template("missing")["spec"], {}, {}),
        ({"resourceClaims": [{"name": "g", "resourceClaimName": "shared"}]}, {}, {}),
        (LEGACY_SPEC, {GPU: NATIVE}, {GPU: 2}),
        (LEGACY_SPEC, {}, {}),
    ],
    ids=["template", "template-not-found", "existing-claim", "kep-5004-mapped", "unmapped"],
)
def test_pod_charges(
    pod_spec: dict[str, Any], classes: dict[str, Any], charges: dict[str, int]
) -> None:
    templates = {"two": TWO_TEMPLATE}
    assert pod_charges(pod_spec, templates.get, classes) == charges
