"""Gangs through the pipeline: a workload charged whole at creation, its Pods drawing from it."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from builders import claim, exact, pod, request, template

from webhook.kube.snapshot import SnapshotState
from webhook.ledger.memory import MemoryLedger
from webhook.ledger.reconciler import claims_truth
from webhook.ledger.sqlite import SqliteLedger
from webhook.pipeline import Context, request_from_object, review
from webhook.policy.loading import parse_policies
from webhook.types import FactsUnavailable, Ledger, Operation, PolicySet, Verdict

GPU = "gpu.nvidia.com"
TENANT = """
apiVersion: dragate.io/v1alpha1
kind: Tenant
metadata: {name: ml}
spec:
  namespaces: [team-a]
  enforcement: %s
  quota:
  - {deviceClassName: gpu.nvidia.com, maxDevices: 8}
"""
POLICIES = parse_policies(TENANT % "Deny", "inline.yaml")
TWO = template(request(exact(count=2)), name="two")
ONE = template(request(exact(count=1)), name="one")


class Clock:
    now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


LEDGERS: dict[str, Callable[[Path, Clock], Ledger]] = {
    "memory": lambda _, clock: MemoryLedger(clock=clock),
    "sqlite": lambda tmp, clock: SqliteLedger(str(tmp / "ledger.sqlite"), clock=clock),
}


@pytest.fixture(params=sorted(LEDGERS))
def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Ledger]:
    yield LEDGERS[request.param](tmp_path, Clock())


def job(name: str, parallelism: int = 4, **spec: Any) -> dict[str, Any]:
    pod_spec = pod(claims={"gpu": "two"})["spec"]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "team-a", "uid": f"{name}-uid"},
        "spec": {"parallelism": parallelism, "template": {"spec": pod_spec}, **spec},
    }


def job_pod(job_name: str, index: int) -> dict[str, Any]:
    the_pod = pod(f"{job_name}-{index}", claims={"gpu": "two"}, uid=f"{job_name}-{index}-uid")
    owner = {"kind": "Job", "name": job_name, "uid": f"{job_name}-uid", "controller": True}
    the_pod["metadata"]["ownerReferences"] = [owner]
    return the_pod


def generated_claim(the_pod: dict[str, Any]) -> dict[str, Any]:
    """The claim the resourceclaim controller makes for the Pod's template."""
    meta = the_pod["metadata"]
    made = claim(request(exact(count=2)), name=f"{meta['name']}-gpu")
    made["metadata"]["annotations"] = {"resource.kubernetes.io/pod-claim-name": "gpu"}
    made["metadata"]["ownerReferences"] = [
        {"kind": "Pod", "uid": meta["uid"], "name": meta["name"]}
    ]
    return made


def context(ledger: Ledger, policies: PolicySet = POLICIES) -> Context:
    return Context(policies=lambda: policies, state=SnapshotState([TWO, ONE]), ledger=ledger)


def create(ctx: Context, obj: dict[str, Any]) -> Verdict:
    return review(request_from_object(obj), ctx)


def update(ctx: Context, old: dict[str, Any], new: dict[str, Any]) -> Verdict:
    return review(
        replace(request_from_object(new, operation=Operation.UPDATE), old_object=old), ctx
    )


def holders(ledger: Ledger) -> dict[str, int]:
    usage = ledger.usage("ml").get(GPU)
    return {h.key: h.devices for h in usage.holders} if usage else {}


def used(ledger: Ledger) -> int:
    return sum(holders(ledger).values())


def reconcile(ledger: Ledger, *objects: dict[str, Any]) -> None:
    """The reconciler's pass over a cluster holding `objects`."""
    truth = claims_truth(lambda: POLICIES, SnapshotState([TWO, ONE, *objects]))()
    ledger.reconcile(truth)  # type: ignore[attr-defined]


def test_two_gangs_never_split_the_quota_two_and_two(ledger: Ledger) -> None:
    ctx = context(ledger)
    first, second = job("train"), job("train-b")
    assert create(ctx, first).allowed
    assert holders(ledger) == {"gang:team-a/Job/train": 8}

    refused = create(ctx, second)
    assert not refused.allowed
    assert refused.decision.reasons[0].message == (
        "gang team-a/train-b needs 8 gpu.nvidia.com; tenant ml has 0 free "
        "(held by gang:team-a/Job/train (8))"
    )
    lone = create(ctx, pod("lone", claims={"gpu": "one"}, uid="lone-uid"))
    assert not lone.allowed and "held by gang:team-a/Job/train (8)" in str(lone.decision.reasons)

    pods = [job_pod("train", i) for i in range(4)]
    for the_pod in pods:
        assert create(ctx, the_pod).allowed
        assert used(ledger) == 8
    assert "gang:team-a/Job/train" not in holders(ledger)
    assert create(ctx, pods[0]).allowed and used(ledger) == 8  # a retried Pod draws nothing
    assert not create(ctx, job_pod("train", 4)).allowed  # past the gang: charged as usual

    claims = [generated_claim(p) for p in pods]
    reconcile(ledger, first, *pods, *claims)
    assert used(ledger) == 8 and "gang:team-a/Job/train" not in holders(ledger)
    reconcile(ledger)  # the Job is deleted with its Pods and their claims
    assert used(ledger) == 0
    assert create(ctx, second).allowed and holders(ledger) == {"gang:team-a/Job/train-b": 8}


def test_the_truth_keeps_what_the_members_have_not_claimed_yet(ledger: Ledger) -> None:
    ctx = context(ledger)
    train = job("train")
    assert create(ctx, train).allowed
    pods = [job_pod("train", i) for i in range(4)]
    for the_pod in pods[:1]:
        assert create(ctx, the_pod).allowed
    reconcile(ledger, train, pods[0], generated_claim(pods[0]))
    assert holders(ledger) == {"gang:team-a/Job/train": 6, "pod:train-0-uid/gpu": 2}
    finished = {**train, "status": {"conditions": [{"type": "Complete", "status": "True"}]}}
    reconcile(ledger, finished, pods[0], generated_claim(pods[0]))
    assert holders(ledger) == {"pod:train-0-uid/gpu": 2}


def test_a_suspended_job_is_charged_when_unsuspended(ledger: Ledger) -> None:
    ctx = context(ledger)
    suspended = job("train", suspend=True)
    assert create(ctx, suspended).allowed and used(ledger) == 0
    other = job("other", parallelism=3)
    assert create(ctx, other).allowed and used(ledger) == 6
    reconcile(ledger, suspended, other)
    assert holders(ledger) == {"gang:team-a/Job/other": 6}  # confirmed; `train` holds nothing
    running = job("train", suspend=False)
    refused = update(ctx, suspended, running)
    assert not refused.allowed
    assert "gang team-a/train needs 8 gpu.nvidia.com; tenant ml has 2 free" in (
        refused.decision.reasons[0].message
    )
    reconcile(ledger)  # `other` is deleted
    assert update(ctx, suspended, running).allowed
    assert holders(ledger) == {"gang:team-a/Job/train": 8}
    assert update(ctx, running, copy.deepcopy(running)).allowed  # nothing changed: no charge
    assert holders(ledger) == {"gang:team-a/Job/train": 8}


@pytest.mark.parametrize(
    ("parallelism", "allowed", "held"),
    [(3, True, 4), (5, False, 2), (1, True, 0)],
    ids=["grows", "grows-past-the-quota", "shrinks-to-one-pod"],
)
def test_a_scale_change_replaces_the_holder(
    ledger: Ledger, parallelism: int, allowed: bool, held: int
) -> None:
    ctx = context(ledger)
    train = job("train", parallelism=2)
    assert create(ctx, train).allowed
    assert create(ctx, job_pod("train", 0)).allowed  # drew 2 of the gang's 4
    assert create(ctx, pod("lone", claims={"gpu": "one"}, uid="lone-uid")).allowed
    verdict = update(ctx, train, job("train", parallelism=parallelism))
    assert verdict.allowed is allowed
    assert holders(ledger).get("gang:team-a/Job/train", 0) == held


@pytest.mark.parametrize("mode", ["Warn", "Audit"])
def test_a_gang_over_quota_is_admitted_and_told_under_warn_or_audit(
    ledger: Ledger, mode: str
) -> None:
    ctx = context(ledger, parse_policies(TENANT % mode, "inline.yaml"))
    assert create(ctx, job("train")).allowed
    drawing = create(ctx, job_pod("train", 0))  # within the gang: nothing to tell
    assert drawing.allowed and not drawing.decision.warnings and not drawing.decision.audit
    verdict = create(ctx, job("train-b"))
    assert verdict.allowed and used(ledger) == 16
    told = [*verdict.decision.warnings, *verdict.decision.audit.values()]
    assert any(
        "gang team-a/train-b needs 8 gpu.nvidia.com; tenant ml has 0 free" in t for t in told
    )
    assert create(ctx, job_pod("train", 1)).allowed and used(ledger) == 16  # drawn, not added


def podgroup(name: str, min_count: int, *claims: dict[str, Any], owner: str) -> dict[str, Any]:
    """A PodGroup as the Job controller makes it (Kubernetes 1.37): owned by its Job."""
    ref = {"apiVersion": "batch/v1", "kind": "Job", "name": owner, "uid": f"{owner}-uid",
           "controller": True}  # fmt: skip
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "team-a", "uid": f"{name}-uid",
                     "ownerReferences": [ref]},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}},
                 "resourceClaims": list(claims)},
    }  # fmt: skip


SHARED = {"name": "shared", "resourceClaimTemplateName": "two"}


def group_job(name: str, group: str) -> dict[str, Any]:
    """A Job whose Pods name a PodGroup: each with its own 1 GPU, and the group's claim."""
    made = job(name)
    pod_spec = pod(claims={"gpu": "one", "shared": "two"})["spec"]
    made["spec"]["template"]["spec"] = {**pod_spec, "schedulingGroup": {"podGroupName": group}}
    return made


def group_pod(job_name: str, index: int, group: str) -> dict[str, Any]:
    the_pod = job_pod(job_name, index)
    the_pod["spec"] = {**group_job(job_name, group)["spec"]["template"]["spec"]}
    return the_pod


def group_context(ledger: Ledger, *objects: dict[str, Any]) -> Context:
    state = SnapshotState([TWO, ONE, *objects])
    return Context(policies=lambda: POLICIES, state=state, ledger=ledger)


def test_a_podgroup_carries_the_gang_and_its_shared_claim_counts_once(ledger: Ledger) -> None:
    """4 Pods x 1 GPU and one 2-GPU claim shared by the group: 6, charged at the PodGroup's
    creation; its Pods and the group's claim draw from it; a second such group is refused."""
    first, second = group_job("train", "pg"), group_job("train-b", "pg-b")
    ctx = group_context(ledger, first, second)
    assert create(ctx, first).allowed and used(ledger) == 0  # its PodGroup carries the gang
    assert create(ctx, podgroup("pg", 4, SHARED, owner="train")).allowed
    assert holders(ledger) == {"gang:team-a/PodGroup/pg": 6}
    refused = create(ctx, podgroup("pg-b", 4, SHARED, owner="train-b"))
    assert not refused.allowed
    assert "gang team-a/pg-b needs 6 gpu.nvidia.com; tenant ml has 2 free" in str(refused)
    ctx.state.add(podgroup("pg", 4, SHARED, owner="train"))  # type: ignore[attr-defined]
    for i in range(4):
        assert create(ctx, group_pod("train", i, "pg")).allowed
        assert used(ledger) == 6
    shared = claim(request(exact(count=2)), name="pg-shared")
    shared["metadata"]["ownerReferences"] = [{"kind": "PodGroup", "name": "pg", "uid": "pg-uid"}]
    assert create(ctx, shared).allowed and used(ledger) == 6
    assert "gang:team-a/PodGroup/pg" not in holders(ledger)


def test_a_podgroup_its_job_controller_makes_takes_the_job_s_gang_over(ledger: Ledger) -> None:
    """With Kubernetes 1.37's WorkloadWithJob the Job controller makes a PodGroup for a Job
    already charged: the PodGroup carries the gang from then on, never both."""
    train, group = job("train"), podgroup("pg", 4, owner="train")
    ctx = group_context(ledger, train, group)
    assert create(ctx, train).allowed and holders(ledger) == {"gang:team-a/Job/train": 8}
    assert create(ctx, group).allowed
    assert holders(ledger) == {"gang:team-a/PodGroup/pg": 8}
    for i in range(4):
        the_pod = job_pod("train", i)
        the_pod["spec"]["schedulingGroup"] = {"podGroupName": "pg"}
        assert create(ctx, the_pod).allowed
        assert used(ledger) == 8
    assert "gang:team-a/PodGroup/pg" not in holders(ledger)


def one_gpu_claim(the_pod: dict[str, Any]) -> dict[str, Any]:
    made = generated_claim(the_pod)
    made["spec"] = claim(request(exact(count=1)))["spec"]
    return made


def test_the_truth_of_a_podgroup_keeps_what_its_pods_and_claim_have_not(ledger: Ledger) -> None:
    """The reconciler's truth: the group's 6 less its first Pod's claim (1) and the group's
    shared claim (2); its Job holds nothing; deleting the PodGroup frees the rest."""
    train = group_job("train", "pg")
    group = podgroup("pg", 4, SHARED, owner="train")
    ctx = group_context(ledger, train, group)
    assert create(ctx, train).allowed and create(ctx, group).allowed
    first = group_pod("train", 0, "pg")
    assert create(ctx, first).allowed
    shared = claim(request(exact(count=2)), name="pg-shared")
    shared["metadata"]["ownerReferences"] = [{"kind": "PodGroup", "name": "pg", "uid": "pg-uid"}]
    assert create(ctx, shared).allowed
    made = one_gpu_claim(first)
    reconcile(ledger, train, group, first, made, shared)
    assert holders(ledger) == {
        "gang:team-a/PodGroup/pg": 3,
        "pod:train-0-uid/gpu": 1,
        "claim:team-a/pg-shared": 2,
    }
    reconcile(ledger, train, first, made, shared)
    assert holders(ledger) == {"pod:train-0-uid/gpu": 1, "claim:team-a/pg-shared": 2}


def test_a_job_whose_podgroup_carries_its_gang_holds_nothing_in_the_truth(
    ledger: Ledger,
) -> None:
    train = job("train")
    ctx = group_context(ledger, train)
    assert create(ctx, train).allowed
    group = podgroup("pg", 4, owner="train")
    assert create(ctx, group).allowed
    reconcile(ledger, train, group)
    assert holders(ledger) == {"gang:team-a/PodGroup/pg": 8}


@pytest.mark.parametrize("made", [True, False], ids=["basic-podgroup", "podgroup-not-found"])
def test_pods_in_a_podgroup_without_a_gang_policy_draw_from_their_job(
    ledger: Ledger, made: bool
) -> None:
    """The Job controller's PodGroups (WorkloadWithJob) have `schedulingPolicy: {basic: {}}`:
    the Job stays the gang, in admission and in the reconciler's truth."""
    train = job("train")
    basic = podgroup("pg", 4, owner="train")
    basic["spec"]["schedulingPolicy"] = {"basic": {}}
    ctx = group_context(ledger, train, *([basic] if made else []))
    assert create(ctx, train).allowed
    assert create(ctx, basic).allowed and holders(ledger) == {"gang:team-a/Job/train": 8}
    pods = []
    for i in range(4):
        the_pod = job_pod("train", i)
        the_pod["spec"]["schedulingGroup"] = {"podGroupName": "pg"}
        pods.append(the_pod)
        assert create(ctx, the_pod).allowed
        assert used(ledger) == 8
    assert "gang:team-a/Job/train" not in holders(ledger)
    reconcile(ledger, train, *([basic] if made else []), pods[0], generated_claim(pods[0]))
    assert holders(ledger)["gang:team-a/Job/train"] == 6


def test_gangs_off_charge_pods_one_by_one(ledger: Ledger) -> None:
    off = parse_policies(
        TENANT
        % "Deny"
        + "---\napiVersion: dragate.io/v1alpha1\nkind: Settings\nmetadata: {name: s}\n"
        "spec: {gangKinds: []}\n",
        "inline.yaml",
    )
    ctx = context(ledger, off)
    assert create(ctx, job("train")).allowed and used(ledger) == 0
    assert create(ctx, job_pod("train", 0)).allowed and used(ledger) == 2


def test_a_dry_run_judges_the_gang_and_reserves_nothing(ledger: Ledger) -> None:
    ctx = context(ledger)
    dry = replace(request_from_object(job("train", parallelism=5)), dry_run=True)
    verdict = review(dry, ctx)
    assert not verdict.allowed and used(ledger) == 0


NATIVE_CLASS = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceClass",
    "metadata": {"name": GPU},
    "spec": {"extendedResourceName": "nvidia.com/gpu"},
}


def native_job(name: str) -> dict[str, Any]:
    limits = {"nvidia.com/gpu": "2"}
    pod_spec = {"containers": [{"name": "c", "image": "x", "resources": {"limits": limits}}]}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "team-a", "uid": f"{name}-uid"},
        "spec": {"parallelism": 4, "template": {"spec": pod_spec}},
    }


def test_natively_mapped_pods_are_charged_as_the_scheduler_s_claim(ledger: Ledger) -> None:
    """A DeviceClass maps nvidia.com/gpu (KEP-5004): each Pod is charged its special claim,
    and the Job's Pods draw it from the gang."""
    state = SnapshotState([NATIVE_CLASS])
    ctx = Context(policies=lambda: POLICIES, state=state, ledger=ledger)
    assert create(ctx, native_job("train")).allowed
    assert holders(ledger) == {"gang:team-a/Job/train": 8}
    refused = create(ctx, native_job("train-b"))
    assert not refused.allowed and "needs 8 gpu.nvidia.com" in refused.decision.reasons[0].message
    the_pod = native_job("train")["spec"]["template"]
    member = {**the_pod, "apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": "train-0", "namespace": "team-a", "uid": "train-0-uid",
        "ownerReferences": [{"kind": "Job", "name": "train", "uid": "train-uid"}],
    }}  # fmt: skip
    assert create(ctx, member).allowed and used(ledger) == 8
    truth = claims_truth(lambda: POLICIES, SnapshotState([NATIVE_CLASS, native_job("train")]))()
    assert truth["ml"]["gang:team-a/Job/train"] == {GPU: 8}


class Unlisted(SnapshotState):
    """A cluster whose gang workloads cannot be listed (RBAC, an unreachable API server)."""

    def workloads(self) -> list[dict[str, Any]]:
        raise FactsUnavailable("gang workloads unavailable: HTTP 403: forbidden")


def test_workloads_that_cannot_be_read_leave_gangs_to_lapse_and_claims_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Without the workloads the gangs' holders are left out of the truth (they lapse like
    any pending holder and Pods are charged one by one); the claims still count."""
    claimed = generated_claim(job_pod("train", 0))
    truth = claims_truth(lambda: POLICIES, Unlisted([TWO, ONE, job("train"), claimed]))()
    assert truth == {"ml": {"pod:train-0-uid/gpu": {GPU: 2}}}
    assert "gangs' holders left to expire: gang workloads unavailable" in caplog.text


@pytest.mark.parametrize(
    ("min_count", "allowed", "held"),
    [(3, True, 4), (5, False, 3), (1, True, 2), (2, True, 3)],
    ids=["grows", "grows-past-the-quota", "shrinks", "unchanged"],
)
def test_a_podgroup_s_min_count_change_moves_its_holder(
    ledger: Ledger, min_count: int, allowed: bool, held: int
) -> None:
    """minCount is mutable (workload scaling): the group's holder moves by the change of its
    demand, reserved atomically or refused with the numbers; its shared claim stays once.
    2 Pods x 1 GPU + the shared 2: 4 held; a first Pod draws 1; a lone Pod holds 2 more."""
    train = group_job("train", "pg")
    group = podgroup("pg", 2, SHARED, owner="train")
    ctx = group_context(ledger, train, group)
    assert create(ctx, group).allowed and holders(ledger) == {"gang:team-a/PodGroup/pg": 4}
    assert create(ctx, group_pod("train", 0, "pg")).allowed
    assert create(ctx, pod("lone", claims={"gpu": "two"}, uid="lone-uid")).allowed
    verdict = update(ctx, group, podgroup("pg", min_count, SHARED, owner="train"))
    assert verdict.allowed is allowed
    assert holders(ledger)["gang:team-a/PodGroup/pg"] == held
    if not allowed:
        assert verdict.decision.reasons[0].message == (
            "gang team-a/pg needs 6 gpu.nvidia.com; tenant ml has 5 free "
            "(held by gang:team-a/PodGroup/pg (3), pod:team-a/lone/gpu (2), "
            "pod:team-a/train-0/gpu (1))"
        )


@pytest.mark.parametrize("mode", ["Warn", "Audit"])
def test_a_podgroup_grown_past_the_quota_is_told_under_warn_or_audit(
    ledger: Ledger, mode: str
) -> None:
    train = group_job("train", "pg")
    group = podgroup("pg", 4, SHARED, owner="train")
    state = SnapshotState([TWO, ONE, train, group])
    policies = parse_policies(TENANT % mode, "inline.yaml")
    ctx = Context(policies=lambda: policies, state=state, ledger=ledger)
    assert create(ctx, group).allowed and used(ledger) == 6
    verdict = update(ctx, group, podgroup("pg", 8, SHARED, owner="train"))
    assert verdict.allowed and used(ledger) == 10
    told = [*verdict.decision.warnings, *verdict.decision.audit.values()]
    assert any("gang team-a/pg needs 10 gpu.nvidia.com; tenant ml has 8 free" in t for t in told)
