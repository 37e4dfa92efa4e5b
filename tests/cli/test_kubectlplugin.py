"""`kubectl dragate usage` and `kubectl dragate why POD|resourceclaim/NAME` against canned API
answers: a fake at our own adapter boundary (`KubeApi.request`), one cluster, one case per
cause."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from builders import claim, exact, namespace, pod, request, template
from click.testing import CliRunner, Result

from webhook.cli.kubectlplugin import main
from webhook.kube.api import ApiError

V1 = "/apis/resource.k8s.io/v1"
TENANT: dict[str, Any] = {
    "apiVersion": "dragate.io/v1alpha1", "kind": "Tenant",
    "metadata": {"name": "team-a", "uid": "t1", "generation": 1,
                 "creationTimestamp": "2026-01-01T00:00:00Z"},
    "spec": {"namespaces": ["team-a"], "quota": [{"deviceClassName": "gpu.nvidia.com",
                                                  "maxDevices": 4}]},
}  # fmt: skip
RECORDS = (
    "claim:team-a/big gpu.nvidia.com=3\n"
    "pod:uid-1/gpu @team-a/trainer=0,gpu.nvidia.com=1 1700000000.0\n"
)
GPU = "device.driver == 'gpu.nvidia.com'"
SLICE = {
    "metadata": {"name": "node-1-gpu", "resourceVersion": "1"},
    "spec": {"driver": "gpu.nvidia.com", "nodeName": "node-1",
             "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1},
             "devices": [{"name": f"gpu-{i}", "attributes": {"model": {"string": "A100"}}}
                         for i in range(2)]},
}  # fmt: skip
RESULT = {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "node-1", "device": "gpu-0"}
ALLOCATED = {"devices": {"results": [RESULT]}}
NODE = {"metadata": {"name": "node-1", "labels": {"kubernetes.io/hostname": "node-1"}}}
SCHEDULER_SAYS = "0/1 nodes are available: 1 Insufficient cpu. preemption: not helpful."


def claim_pod(name: str, uid: str, **claims: str) -> dict[str, Any]:
    """A Pod whose pod claims name existing ResourceClaims (`claims`: pod claim -> claim)."""
    found = pod(name, uid=uid, containers={"main": list(claims)})
    found["spec"]["resourceClaims"] = [{"name": n, "resourceClaimName": c}
                                       for n, c in claims.items()]  # fmt: skip
    return found


PODS = {
    "bound": {**pod("bound", uid="uid-9"), "spec": {"nodeName": "node-1", "containers": []}},
    "newcomer": pod("newcomer", claims={"gpu": "one-gpu"}, uid="uid-2"),
    "trainer": pod("trainer", claims={"gpu": "h100"}, uid="uid-1"),
    "orphan": claim_pod("orphan", "uid-3", gpu="nope"),
    "waiting": {**claim_pod("waiting", "uid-4", gpu="big"), "status": {"conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
         "message": SCHEDULER_SAYS}]}},
    "fresh": claim_pod("fresh", "uid-5", gpu="big"),
}  # fmt: skip
EVENTS = {
    "waiting": [
        {"metadata": {"name": "waiting.1"}, "reason": "FailedScheduling",
         "message": "0/1 nodes are available: older.", "lastTimestamp": "2026-01-01T00:00:00Z"},
        {"metadata": {"name": "waiting.2"}, "reason": "FailedScheduling",
         "message": SCHEDULER_SAYS, "lastTimestamp": "2026-01-01T00:05:00Z"},
        {"metadata": {"name": "waiting.3"}, "reason": "Scheduled", "message": "not quoted"},
    ],
}  # fmt: skip


class Api:
    """The cluster above, as the API server answers GETs; anything else is 404."""

    def __init__(self, objects: dict[str, Any] | None = None) -> None:
        big = claim(request(exact()), name="big")
        big["status"] = {"allocation": ALLOCATED}
        self.objects: dict[str, Any] = {
            "/apis/dragate.io/v1alpha1/tenants": {"items": [TENANT]},
            "/apis/dragate.io/v1alpha1/tenantusages/team-a": {
                "metadata": {"name": "team-a"}, "spec": {"tenant": "team-a", "records": RECORDS}},
            "/api/v1/namespaces/team-a": namespace("team-a"),
            f"{V1}/deviceclasses": {"items": [
                {"metadata": {"name": "gpu.nvidia.com"},
                 "spec": {"selectors": [{"cel": {"expression": GPU}}]}}]},
            f"{V1}/resourceslices": {"items": [SLICE]},
            f"{V1}/namespaces/team-a/resourceclaims/big": big,
            f"{V1}/resourceclaims": {"items": [big]},
            "/api/v1/nodes": {"items": [NODE]},
            f"{V1}/namespaces/team-a/resourceclaimtemplates/one-gpu":
                template(request(exact()), name="one-gpu"),
            f"{V1}/namespaces/team-a/resourceclaimtemplates/h100": template(request(exact(
                selectors=("device.attributes['gpu.nvidia.com'].model == 'H100'",))), name="h100"),
            **{f"/api/v1/namespaces/team-a/pods/{n}": p for n, p in PODS.items()},
            **(objects or {}),
        }  # fmt: skip
        self.gets: list[str] = []

    def request(self, method: str, path: str, *, query: Any = None, **_: Any) -> dict[str, Any]:
        assert method == "GET", "kubectl dragate only reads"
        self.gets.append(path)
        if path.endswith("/events"):
            selector = dict(query)["fieldSelector"]
            name = selector.split(",")[0].removeprefix("involvedObject.name=")
            return {"items": EVENTS.get(name, [])}
        if path not in self.objects:
            raise ApiError(404, f"{path} not found")
        return dict(self.objects[path])


def run(*args: str, api: Api | None = None) -> Result:
    return CliRunner().invoke(main, list(args), obj=api or Api(), catch_exceptions=False)


def why(name: str, *args: str) -> list[dict[str, Any]]:
    result = run("why", name, "-n", "team-a", "-o", "json", *args)
    assert result.exit_code == 0, result.output
    found: list[dict[str, Any]] = json.loads(result.stdout)
    return found


WHY_CASES = {
    "bound": ("scheduled", "Pod team-a/bound", "scheduled on node-1", False),
    "newcomer": ("quota", "Tenant team-a",
                 "gpu.nvidia.com: 4/4 used (1 pending), this Pod needs 1, holds 0; held by "
                 "claim:team-a/big=3,team-a/trainer=1", True),
    "trainer": ("feasibility", "ResourceClaimTemplate team-a/h100",
                "request 'gpu' needs 1 gpu.nvidia.com device, 0 in the cluster match; selector "
                "\"device.attributes['gpu.nvidia.com'].model == 'H100'\" rules out the most "
                "(without it: node-1/gpu-0)", True),
    "orphan": ("claim", "ResourceClaim team-a/nope", "does not exist", True),
    "waiting": ("scheduler", "Event team-a/waiting.2", f"FailedScheduling: {SCHEDULER_SAYS}",
                True),
    "fresh": ("schedulable", "Pod team-a/fresh", "waiting for the scheduler", False),
}  # fmt: skip


@pytest.mark.parametrize("name", WHY_CASES, ids=list(WHY_CASES))
def test_why_puts_the_decisive_cause_first_and_cites_its_object(name: str) -> None:
    cause, source, message, blocking = WHY_CASES[name]
    first = why(name)[0]
    assert (first["cause"], first["source"], first["message"]) == (cause, source, message)
    assert first["blocking"] is blocking


def other_pod(name: str, count: int, **spec: Any) -> dict[str, Any]:
    """A Pod of a namespace no Tenant covers, its claim made from a template of `count` GPUs."""
    found = pod(name, namespace="other", claims={"gpu": name}, uid=f"uid-{name}")
    found["spec"].update(spec)
    made = template(request(exact(count=count)), name=name, namespace="other")
    return {f"/api/v1/namespaces/other/pods/{name}": found,
            f"{V1}/namespaces/other/resourceclaimtemplates/{name}": made}  # fmt: skip


HELD_CASES: dict[str, tuple[dict[str, Any], str, str]] = {
    "node": (other_pod("pinned", 1, nodeSelector={"kubernetes.io/hostname": "node-2"}),
             "Pod other/pinned", "request 'gpu': every node with a matching device is excluded "
             "(node-1): nodeSelector kubernetes.io/hostname=node-2; "
             "ResourceClaimTemplate other/pinned"),
    "allocated": (other_pod("crowded", 2), "ResourceClaim team-a/big",
                  "request 'gpu' needs 2, 2 match, 1 allocated: node-1/gpu-0 to "
                  "ResourceClaim team-a/big"),
}  # fmt: skip


@pytest.mark.parametrize("cause", HELD_CASES, ids=list(HELD_CASES))
def test_why_says_what_holds_devices_that_match(cause: str) -> None:
    objects, source, message = HELD_CASES[cause]
    name = next(iter(objects)).rsplit("/", 1)[1]
    result = run("why", name, "-n", "other", "-o", "json", api=Api(objects))
    assert result.exit_code == 0, result.output
    first = json.loads(result.stdout)[0]
    assert first == {"cause": cause, "source": source, "message": message, "blocking": True}


def test_why_quotes_the_scheduler_and_says_what_is_allocated() -> None:
    found = why("waiting")
    assert [f["message"] for f in found if f["cause"] == "scheduler"] == [
        f"FailedScheduling: {SCHEDULER_SAYS}", f"Unschedulable: {SCHEDULER_SAYS}"]  # fmt: skip
    assert {"cause": "claim", "source": "ResourceClaim team-a/big", "blocking": False,
            "message": "allocated: gpu.nvidia.com/node-1/gpu-0"} in found  # fmt: skip


def test_why_counts_what_the_pod_already_holds_as_its_own() -> None:
    """The trainer's device is in the ledger under its uid: the quota does not block it."""
    quota = [f for f in why("trainer") if f["cause"] == "quota"]
    assert quota == [{"cause": "quota", "source": "Tenant team-a", "blocking": False,
                      "message": "gpu.nvidia.com: 4/4 used (1 pending), this Pod holds 1; "
                                 "held by claim:team-a/big=3,team-a/trainer=1"}]  # fmt: skip


def test_why_without_a_tenant_says_no_quota_applies() -> None:
    lonely = pod("lonely", namespace="other", uid="uid-7")
    api = Api({"/api/v1/namespaces/other/pods/lonely": lonely})
    result = run("why", "lonely", "-n", "other", api=api)
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        "schedulable: waiting for the scheduler\n    (Pod other/lonely)\n"
        "tenant: no Tenant covers it: no quota applies\n    (Namespace other)\n"
    )


def test_why_an_unknown_pod_is_an_error_not_a_traceback() -> None:
    result = run("why", "ghost", "-n", "team-a")
    assert result.exit_code == 1
    assert "Pod team-a/ghost not found" in result.output


def test_why_reads_quotas_from_policy_files(tmp_path: Path) -> None:
    smaller = {**TENANT, "spec": {**TENANT["spec"], "quota": [
        {"deviceClassName": "gpu.nvidia.com", "maxDevices": 8}]}}  # fmt: skip
    (tmp_path / "tenant.yaml").write_text(yaml.safe_dump(smaller))
    found = why("newcomer", "--policies", str(tmp_path))
    assert found[0]["cause"] == "schedulable"
    assert "4/8 used" in next(f["message"] for f in found if f["cause"] == "quota")


def test_usage_is_a_table_like_kubectl_get() -> None:
    result = run("usage")
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        "TENANT   CLASS            LIMIT   USED   PENDING   FREE   TOP HOLDERS\n"
        "team-a   gpu.nvidia.com   4       4      1         0      "
        "claim:team-a/big=3,team-a/trainer=1\n"
    )


def test_usage_as_json_names_the_pods_behind_holders() -> None:
    result = run("usage", "team-a", "-o", "json")
    assert json.loads(result.stdout) == [{
        "tenant": "team-a", "deviceClassName": "gpu.nvidia.com", "limit": 4, "used": 4,
        "pending": 1, "free": 0, "holders": [
            {"holder": "claim:team-a/big", "pod": None, "devices": 3},
            {"holder": "pod:team-a/trainer/gpu", "pod": "team-a/trainer", "devices": 1},
        ]}]  # fmt: skip


@pytest.mark.parametrize(
    ("args", "tenants"),
    [(("-n", "team-a"), ["team-a"]), (("-n", "other"), []), (("-A",), ["team-a"])],
    ids=["namespace-of-a-tenant", "namespace-of-none", "all"],
)
def test_usage_picks_tenants_by_namespace(args: tuple[str, ...], tenants: list[str]) -> None:
    api = Api({"/api/v1/namespaces/other": namespace("other")})
    result = run("usage", "-o", "yaml", *args, api=api)
    assert [r["tenant"] for r in yaml.safe_load(result.stdout) or []] == tenants


def test_usage_of_an_unknown_tenant_names_the_known_ones() -> None:
    result = run("usage", "team-z")
    assert result.exit_code == 1
    assert "no Tenant 'team-z' (known: team-a)" in result.output


def test_usage_of_a_tenant_with_no_ledger_yet_is_all_free() -> None:
    api = Api()
    del api.objects["/apis/dragate.io/v1alpha1/tenantusages/team-a"]
    assert "team-a   gpu.nvidia.com   4       0      0         4      -" in run(
        "usage", api=api).stdout  # fmt: skip


def test_a_cluster_without_the_tenant_crd_has_no_quota() -> None:
    api = Api()
    del api.objects["/apis/dragate.io/v1alpha1/tenants"]
    assert [f["cause"] for f in why_in(api, "fresh")] == ["schedulable", "claim", "tenant"]
    assert (
        run("usage", api=api).stdout
        == "TENANT   CLASS   LIMIT   USED   PENDING   FREE   TOP HOLDERS\n"
    )


def why_in(api: Api, *args: str) -> list[dict[str, Any]]:
    result = run("why", *args, "-n", "team-a", "-o", "json", api=api)
    assert result.exit_code == 0, result.output
    found: list[dict[str, Any]] = json.loads(result.stdout)
    return found


H100 = "device.attributes['gpu.nvidia.com'].model == 'H100'"
RESERVED = [{"resource": "pods", "name": "trainer", "uid": "uid-1"}]
CLAIMS = {
    "reserved": {**claim(request(exact()), name="reserved"),
                 "status": {"allocation": ALLOCATED, "reservedFor": RESERVED}},
    "h100-claim": claim(request(exact(selectors=(H100,))), name="h100-claim"),
    "ready": claim(request(exact()), name="ready"),
}  # fmt: skip


def claim_api() -> Api:
    return Api({f"{V1}/namespaces/team-a/resourceclaims/{n}": c for n, c in CLAIMS.items()})


WHY_CLAIM_CASES = {
    "allocated": (("resourceclaim/reserved",), "claim", "ResourceClaim team-a/reserved",
                  "allocated: gpu.nvidia.com/node-1/gpu-0; reserved for Pod team-a/trainer",
                  False),
    "allocated-unreserved": (("--claim", "big"), "claim", "ResourceClaim team-a/big",
                             "allocated: gpu.nvidia.com/node-1/gpu-0; reserved for nothing yet",
                             False),
    "infeasible": (("resourceclaims/h100-claim",), "feasibility",
                   "ResourceClaim team-a/h100-claim",
                   "request 'gpu' needs 1 gpu.nvidia.com device, 0 in the cluster match; "
                   f'selector "{H100}" rules out the most (without it: node-1/gpu-0)', True),
    "feasible": (("resourceclaim.resource.k8s.io/ready",), "claim", "ResourceClaim team-a/ready",
                 "not allocated: the scheduler allocates it for the first Pod that uses it",
                 False),
}  # fmt: skip


@pytest.mark.parametrize("case", WHY_CLAIM_CASES, ids=list(WHY_CLAIM_CASES))
def test_why_a_claim_says_what_it_is_allocated_to_or_why_it_cannot_be(case: str) -> None:
    args, cause, source, message, blocking = WHY_CLAIM_CASES[case]
    first = why_in(claim_api(), *args)[0]
    assert (first["cause"], first["source"], first["message"]) == (cause, source, message)
    assert first["blocking"] is blocking


@pytest.mark.parametrize(
    ("name", "quota"),
    [("big", "this claim holds 3"), ("ready", "this claim needs 1, holds 0")],
    ids=["held-in-the-ledger", "not-held-yet"],
)
def test_why_a_claim_ends_with_its_tenants_quota(name: str, quota: str) -> None:
    found = why_in(claim_api(), f"resourceclaim/{name}")
    lines = [f for f in found if f["cause"] == "quota"]
    assert len(lines) == 1
    assert lines[0]["source"] == "Tenant team-a"
    assert lines[0]["message"].startswith(f"gpu.nvidia.com: 4/4 used (1 pending), {quota}; ")


@pytest.mark.parametrize(
    ("args", "error"),
    [(("resourceclaim/ghost",), "ResourceClaim team-a/ghost not found"),
     (("pod/ghost",), "Pod team-a/ghost not found"),
     (("cronjob/web",), "'cronjob': why explains a pod, a resourceclaim or a workload"),
     (("trainer", "--claim", "big"), "name one Pod"),
     ((), "name one Pod")],
    ids=["unknown-claim", "unknown-pod", "other-kind", "both", "neither"],
)  # fmt: skip
def test_why_names_one_pod_or_one_claim(args: tuple[str, ...], error: str) -> None:
    result = run("why", *args, "-n", "team-a", api=claim_api())
    assert result.exit_code in (1, 2)
    assert error in result.output


DENIAL = ('Error creating: admission webhook "validate.dragate.io" denied the request: '
          "[Tenant/team-a] tenant 'team-a' quota for gpu.nvidia.com exceeded: used 4 + "
          "requested 1 > limit 4")  # fmt: skip
EVENTS["refused"] = [
    {"metadata": {"name": "refused.1"}, "reason": "SuccessfulCreate", "message": "Created pod"},
    {"metadata": {"name": "refused.2"}, "reason": "FailedCreate", "message": DENIAL,
     "lastTimestamp": "2026-01-01T00:05:00Z"},
]  # fmt: skip
EVENTS["odd"] = [{"metadata": {"name": "odd.1"}, "reason": "FailedCreate",
                  "message": "Error creating: pods is forbidden: exceeded quota"}]  # fmt: skip
DENIED = ("Pods denied by Tenant/team-a, rule quota: tenant 'team-a' quota for gpu.nvidia.com "
          "exceeded: used 4 + requested 1 > limit 4")  # fmt: skip


def workload(kind: str, name: str) -> dict[str, Any]:
    group = "batch/v1" if kind == "Job" else "apps/v1"
    path = f"/apis/{group}/namespaces/team-a/{kind.lower()}s/{name}"
    return {
        path: {
            "apiVersion": group,
            "kind": kind,
            "metadata": {"name": name, "namespace": "team-a", "uid": f"uid-{name}"},
        }
    }


def deployment(name: str, revisions: dict[str, int]) -> dict[str, Any]:
    """Deployment `name` and ReplicaSets at `revisions` (0: another Deployment's)."""
    found = workload("Deployment", name)
    sets = []
    for rs, revision in revisions.items():
        uid = f"uid-{name}" if revision else "uid-someone-else"
        owner = {"kind": "Deployment", "name": name, "uid": uid, "controller": True}
        meta = {
            "name": rs,
            "namespace": "team-a",
            "ownerReferences": [owner],
            "annotations": {"deployment.kubernetes.io/revision": str(revision or 9)},
        }
        sets.append({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": meta})
    return {**found, "/apis/apps/v1/namespaces/team-a/replicasets": {"items": sets}}


WORKLOAD_CASES = {
    "denied": (("replicaset/refused",), workload("ReplicaSet", "refused"),
               [("denied", "ReplicaSet team-a/refused", DENIED, True)]),
    "denied-job": (("job/refused",), workload("Job", "refused"),
                   [("denied", "Job team-a/refused", DENIED, True)]),
    "not-quoting-a-webhook": (("rs/odd",), workload("ReplicaSet", "odd"), [
        ("denied", "ReplicaSet team-a/odd",
         "FailedCreate: Error creating: pods is forbidden: exceeded quota", True)]),
    "nothing-refused": (("statefulset/calm",), workload("StatefulSet", "calm"), [
        ("admitted", "StatefulSet team-a/calm", "no Pod creation refused (no FailedCreate "
         "event): ask why of each of its Pods", False)]),
    "deployment-through-its-current-replicaset": (
        ("deploy/web",), deployment("web", {"web-old": 1, "refused": 2, "web-other": 0}),
        [("denied", "ReplicaSet team-a/refused", DENIED, True)]),
    "deployment-without-a-replicaset": (
        ("deployment/new",), deployment("new", {}),
        [("admitted", "Deployment team-a/new",
          "no ReplicaSet yet: the deployment controller has not acted on it", False)]),
}  # fmt: skip


@pytest.mark.parametrize("case", WORKLOAD_CASES, ids=list(WORKLOAD_CASES))
def test_why_a_workload_quotes_the_denials_of_its_pods(case: str) -> None:
    args, objects, expected = WORKLOAD_CASES[case]
    found = why_in(Api(objects), *args)
    assert [(f["cause"], f["source"], f["message"], f["blocking"]) for f in found] == expected


def report(result: str, name: str, uid: str) -> dict[str, Any]:
    """The namespace's dragate PolicyReport with one result about Pod `name`."""
    entry = {
        "policy": "DeviceClassPolicy/gpu",
        "rule": "rules",
        "result": result,
        "message": "MIG is preferred",
        "resources": [{"apiVersion": "v1", "kind": "Pod", "name": name, "uid": uid}],
    }
    path = "/apis/wgpolicyk8s.io/v1alpha2/namespaces/team-a/policyreports/dragate"
    return {path: {"results": [entry]}}  # fmt: skip


OWNED = {**pod("owned", uid="uid-o"), "spec": {"nodeName": "node-1", "containers": []}}
OWNED["metadata"]["ownerReferences"] = [
    {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "refused", "controller": True}
]
ADMISSION_CASES = {
    "warned": (report("warn", "bound", "uid-9"), "bound", [
        ("warned", "PolicyReport team-a/dragate",
         "warn by DeviceClassPolicy/gpu, rule rules: MIG is preferred", False)]),
    "passed": (report("pass", "bound", "uid-9"), "bound", []),
    "another-pod-of-that-name": (report("warn", "bound", "uid-old"), "bound", []),
    "siblings-denied": ({"/api/v1/namespaces/team-a/pods/owned": OWNED}, "owned", [
        ("denied", "ReplicaSet team-a/refused", DENIED, False)]),
}  # fmt: skip


@pytest.mark.parametrize("case", ADMISSION_CASES, ids=list(ADMISSION_CASES))
def test_why_a_pod_adds_what_admission_said_about_it_and_its_siblings(case: str) -> None:
    objects, name, expected = ADMISSION_CASES[case]
    found = why_in(Api(objects), name)
    assert found[0]["cause"] == "scheduled"
    assert [(f["cause"], f["source"], f["message"], f["blocking"]) for f in found[1:]] == expected


def test_why_names_the_gang_reservations_among_the_holders() -> None:
    records = "claim:team-a/big gpu.nvidia.com=1\ngang:team-a/Job/train gpu.nvidia.com=2\n" + (
        "pod:uid-1/gpu @team-a/trainer=0,gpu.nvidia.com=1 1700000000.0\n"
    )
    usage = {"metadata": {"name": "team-a"}, "spec": {"tenant": "team-a", "records": records}}
    api = Api({"/apis/dragate.io/v1alpha1/tenantusages/team-a": usage})
    quota = next(f for f in why_in(api, "newcomer") if f["cause"] == "quota")
    assert quota["message"] == (
        "gpu.nvidia.com: 4/4 used (1 pending), this Pod needs 1, holds 0; held by "
        "gang:team-a/Job/train=2,claim:team-a/big=1,team-a/trainer=1; gang team-a/Job/train "
        "reserves 2 for Pods not created yet"
    )
    assert quota["blocking"]


ATTACHED, FAILED = "dra.example.com/attached", "dra.example.com/failed"
WAITING_DEVICES = [{"name": "gpu-0", "bindingConditions": [ATTACHED]}]
WAITING_SLICE = {**SLICE, "metadata": {"name": "node-1-wait", "resourceVersion": "1"},
                 "spec": {**SLICE["spec"], "pool": {**SLICE["spec"]["pool"], "name": "wait"},
                          "devices": WAITING_DEVICES}}  # fmt: skip
ON_WAIT = {**RESULT, "pool": "wait"}
CONDITIONS = {
    ATTACHED: {"bindingConditions": [ATTACHED]},
    FAILED: {"bindingConditions": [ATTACHED], "bindingFailureConditions": [FAILED]},
}


def attaching(result: dict[str, Any], *reported: str) -> dict[str, Any]:
    """Claim `attach`, allocated `result` and reserved for Pod attaching; the driver has
    reported `reported` True on the device."""
    status: dict[str, Any] = {
        "allocation": {"devices": {"results": [result]}},
        "reservedFor": [{"resource": "pods", "name": "attaching", "uid": "uid-6"}],
    }
    if reported:
        conditions = [{"type": c, "status": "True"} for c in reported]
        status["devices"] = [{"driver": result["driver"], "pool": result["pool"],
                              "device": result["device"], "conditions": conditions}]  # fmt: skip
    return {**claim(request(exact()), name="attach"), "status": status}


def binding_api(found: dict[str, Any]) -> Api:
    """The cluster with claim `found` charged to team-a, its quota not in the way."""
    records = "claim:team-a/attach gpu.nvidia.com=1\n"
    usage = {"metadata": {"name": "team-a"}, "spec": {"tenant": "team-a", "records": records}}
    return Api({
        "/apis/dragate.io/v1alpha1/tenantusages/team-a": usage,
        f"{V1}/namespaces/team-a/resourceclaims/attach": found,
        f"{V1}/resourceclaims": {"items": [found]},
        f"{V1}/resourceslices": {"items": [SLICE, WAITING_SLICE]},
        "/api/v1/namespaces/team-a/pods/attaching": claim_pod("attaching", "uid-6", gpu="attach"),
    })  # fmt: skip


PENDING = ("gpu.nvidia.com/wait/gpu-0: binding conditions not True yet: "
           f"{ATTACHED}; kube-scheduler holds the Pod at PreBind until the driver reports them "
           "in the claim's status.devices")  # fmt: skip
BINDING_CASES = {
    "pending-in-the-allocation": (attaching({**RESULT, **CONDITIONS[ATTACHED]}),
                                  ("binding", PENDING.replace("/wait/", "/node-1/"), True)),
    "pending-in-the-slice": (attaching(ON_WAIT), ("binding", PENDING, True)),
    "one-of-two-reported": (attaching({**ON_WAIT, "bindingConditions": [ATTACHED, "b/ready"]},
                                      ATTACHED), ("binding", PENDING.replace(ATTACHED, "b/ready"),
                                                  True)),
    "reported": (attaching(ON_WAIT, ATTACHED),
                 ("schedulable", "waiting for the scheduler", False)),
    "failed": (attaching({**ON_WAIT, **CONDITIONS[FAILED]}, FAILED),
               ("binding", f"gpu.nvidia.com/wait/gpu-0: binding failed ({FAILED} True): "
                "kube-scheduler deallocates the claim and allocates it again", True)),
    "no-conditions": (attaching(RESULT), ("schedulable", "waiting for the scheduler", False)),
}  # fmt: skip


@pytest.mark.parametrize("case", BINDING_CASES, ids=list(BINDING_CASES))
def test_why_names_the_binding_conditions_the_scheduler_waits_for(case: str) -> None:
    found, (cause, message, blocking) = BINDING_CASES[case]
    first = why_in(binding_api(found), "attaching")[0]
    assert (first["cause"], first["message"], first["blocking"]) == (cause, message, blocking)
    source = "Pod team-a/attaching" if cause == "schedulable" else "ResourceClaim team-a/attach"
    assert first["source"] == source


def test_why_a_claim_names_its_pending_binding_conditions() -> None:
    found = why_in(binding_api(attaching(ON_WAIT)), "resourceclaim/attach")
    assert [(f["cause"], f["message"], f["blocking"]) for f in found[:2]] == [
        ("claim", "allocated: gpu.nvidia.com/wait/gpu-0; reserved for Pod team-a/attaching",
         False),
        ("binding", PENDING, True),
    ]  # fmt: skip
