"""Reviews answered with every memo warm are the reviews answered with every memo cold.

One Context is shared by a corpus of requests (Pods of one workload, claims alike, missing
and malformed templates and claims, infeasible claims, legacy Pods that are rewritten, a
policy reload, a template and a DeviceClass changed in place of the old ones); each verdict
is compared with the one a fresh Context gives after the policy set's memos (template and
claim specs, rule results, Pod and claim shapes) are emptied. The ledger is fresh for each
request on both sides: what it holds is its own tests' concern.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable, Iterator
from dataclasses import replace

import pytest
from builders import V1BETA1, claim, exact, first_available, namespace, pod, request, template

from webhook.engine import claimshapes, podshapes
from webhook.kube.inventorysource import InventorySource
from webhook.kube.snapshot import SnapshotState
from webhook.ledger.memory import MemoryLedger
from webhook.pipeline import Applied, Context, admit, request_from_object
from webhook.policy.loading import parse_policies
from webhook.types import AdmissionRequest, Object, PolicySet

SOME_MEMORY = "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('60Gi')) >= 0"
POLICY_TEXT = """
apiVersion: dragate.io/v1alpha1
kind: Settings
metadata: {{name: s}}
spec: {{feasibility: {feasibility}}}
---
apiVersion: dragate.io/v1alpha1
kind: Tenant
metadata: {{name: team-a}}
spec:
  namespaces: [team-a]
  quota: [{{deviceClassName: gpu.nvidia.com, maxDevices: {quota}, maxDevicesPerClaim: 4}}]
---
apiVersion: dragate.io/v1alpha1
kind: DeviceClassPolicy
metadata: {{name: rules}}
spec:
  deviceClassNames: [gpu.nvidia.com]
  validations:
  - {{expression: "request.count <= {count}", message: "at most {count}", action: Deny}}
  - {{expression: "tenant == 'team-a'", message: "tenant", action: Warn}}
{object_rule}
---
apiVersion: dragate.io/v1alpha1
kind: LegacyResourceMapping
metadata: {{name: legacy}}
spec:
  resources: [{{resourceName: nvidia.com/gpu, deviceClassName: gpu.nvidia.com}}]
"""
OBJECT_RULE = (
    """  - {expression: "object.metadata.name != 'forbidden'", message: "name", action: Deny}"""
)
POLICIES = {
    "loaded": parse_policies(
        POLICY_TEXT.format(feasibility="Deny", quota=10, count=3, object_rule=OBJECT_RULE)
    ),
    "reloaded": parse_policies(
        POLICY_TEXT.format(feasibility="Warn", quota=2, count=1, object_rule=OBJECT_RULE)
    ),
    # every rule reads only the request: Pod shapes are remembered (engine/podshapes.py)
    "request-only": parse_policies(
        POLICY_TEXT.format(feasibility="Deny", quota=3, count=3, object_rule="")
    ),
}


def _gpu_class(expression: str) -> Object:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "gpu.nvidia.com"},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }


def _slice(node: str, memory: str, count: int, version: str = "1") -> Object:
    devices = [
        {
            "name": f"gpu-{i}",
            "attributes": {"uuid": {"string": f"{node}-{i}"}},
            "capacity": {"memory": {"value": memory}},
        }
        for i in range(count)
    ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-gpu", "resourceVersion": version},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


TEMPLATES = [
    template(request(exact(count=1, selectors=(SOME_MEMORY,))), name="one"),
    template(request(exact(count=2)), name="two"),
    template(request(exact(count=5)), name="five"),
    template(request(exact(count=3), V1BETA1), name="flat", version=V1BETA1),
    template(request(exact(count="two")), name="broken"),  # type: ignore[arg-type]
    template(request(exact(admin=True)), name="admin"),
    template(first_available("g", exact("x", count=9), exact("y")), name="either"),
    {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
     "metadata": {"name": "shapeless", "namespace": "team-a"}, "spec": []},
]  # fmt: skip
STATE = [
    namespace("team-a"),
    _gpu_class("device.driver == 'gpu.nvidia.com'"),
    _slice("node-a", "40Gi", 4),
    _slice("node-b", "80Gi", 4),
    *TEMPLATES,
]
CHANGES = [  # each replaces objects of STATE by kind and name, as a change in the cluster would
    [{**TEMPLATES[1], "spec": template(request(exact(count=4)))["spec"]}],
    [_gpu_class("device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('60Gi')) >= 0")],
    [_slice("node-a", "80Gi", 8, version="2")],  # a changed slice has a new resourceVersion
]


CHANGES_AGAIN = [  # back and forth, so a Pod shape remembered before each change is stale
    [TEMPLATES[1]],
    [_gpu_class("device.driver == 'gpu.nvidia.com'")],
    [{**TEMPLATES[0], "spec": template(request(exact(count=3)))["spec"]}],
    [_slice("node-a", "40Gi", 4, version="3")],
]


def _pod(name: str, uid: str, claims: dict[str, str]) -> Object:
    return pod(name, claims=claims, uid=uid)


def _legacy(name: str, gpus: int) -> Object:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "team-a"},
        "spec": {
            "containers": [
                {"name": "cuda", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": gpus}}}
            ]
        },
    }


OBJECTS: list[Object] = [
    *(_pod(f"web-{i}", f"uid-{i}", {"gpu": "one", "more": "two"}) for i in range(3)),
    _pod("forbidden", "uid-f", {"gpu": "one"}),
    _pod("forbidden", "uid-fw", {"gpu": "one", "more": "two"}),  # claims as web-*'s
    _pod("big", "uid-b", {"gpu": "five"}),
    _pod("flat", "uid-fl", {"gpu": "flat"}),
    _pod("broken", "uid-x", {"gpu": "broken"}),
    _pod("admin", "uid-a", {"gpu": "admin"}),
    _pod("either", "uid-e", {"gpu": "either"}),
    _pod("shapeless", "uid-s", {"gpu": "shapeless"}),
    _pod("missing", "uid-m", {"gpu": "nowhere", "also": "five"}),
    _pod("no-uid", "", {"a": "two", "b": "two"}),
    {**pod("malformed"), "spec": {"resourceClaims": {"gpu": "one"}}},
    claim(request(exact(count=2, selectors=(SOME_MEMORY,)))),
    claim(request(exact(count=5)), name="too-many"),
    *(claim(request(exact(count=1)), name=f"alike-{i}") for i in range(3)),
    claim(request(exact(count=1)), name="forbidden"),
    claim(request(exact(count=1), V1BETA1), name="flat-claim", version=V1BETA1),
    claim(request(exact(admin=True)), name="admin-claim"),
    claim(request(exact(count="two")), name="malformed-claim"),  # type: ignore[arg-type]
    claim(request(exact(device_class="tpu.example.com")), name="unknown-class"),
    template(request(exact(count=2)), name="made-here"),
    _legacy("legacy-1", 1),
    _legacy("legacy-4", 4),
    _legacy("legacy-9", 9),
]
REQUESTS = [request_from_object(obj) for obj in OBJECTS]


@pytest.fixture(autouse=True)
def _cold_memos() -> Iterator[None]:
    _forget()
    yield
    _forget()


def _forget() -> None:
    for policies in POLICIES.values():
        policies.memos.forget()


def _context(policies: Callable[[], PolicySet], objects: list[Object]) -> Context:
    """`assembly.offline_context`, but the inventory is looked at again on every review (the
    webhook's every 5 s would make a changed slice a legitimately stale answer here)."""
    state = SnapshotState(copy.deepcopy(objects))
    inventory = InventorySource(state.slices, recheck_seconds=0).current
    return Context(policies=policies, state=state, ledger=MemoryLedger(), inventory=inventory)


def _cold(request: AdmissionRequest, policies: PolicySet, objects: list[Object]) -> Applied:
    _forget()
    return admit(request, _context(lambda: policies, objects))


def _warm(request: AdmissionRequest, shared: Context) -> Applied:
    return admit(request, replace(shared, ledger=MemoryLedger()))


def _replaced(objects: list[Object], changes: list[Object]) -> list[Object]:
    def key(obj: Object) -> tuple[str, str]:
        return (str(obj["kind"]), str(obj["metadata"]["name"]))

    changed = {key(c): c for c in changes}
    return [changed.get(key(obj), obj) for obj in objects]


PHASES = [
    ("loaded", []),
    ("reloaded", []),
    *(("reloaded", c) for c in CHANGES),
    ("request-only", []),
    *(("request-only", c) for c in CHANGES_AGAIN),
]


def test_warm_reviews_answer_as_cold_ones_through_a_reload_and_changed_objects() -> None:
    """Cold answers first (each empties the memos), then the warm ones in one sequence."""
    expected, objects = [], STATE
    for phase, changes in PHASES:
        objects = _replaced(objects, changes)
        expected.append([_cold(r, POLICIES[phase], objects) for r in REQUESTS])
    _forget()
    current = {"policies": POLICIES["loaded"]}
    shared = _context(lambda: current["policies"], STATE)
    state: SnapshotState = shared.state  # type: ignore[assignment]
    remembered: dict[tuple[str, str], int] = {}
    for (phase, changes), answers in zip(PHASES, expected, strict=True):
        current["policies"] = POLICIES[phase]
        for changed in changes:
            state.add(copy.deepcopy(changed))
        pairs = zip(REQUESTS, answers, strict=True)
        for _, (review, answer) in itertools.product(range(2), list(pairs)):
            assert _warm(review, shared) == answer, (phase, changes, review.name)
        for table in (podshapes, claimshapes):
            key = (phase, table.__name__)
            remembered[key] = max(remembered.get(key, 0), table.remembered(POLICIES[phase].memos))
    assert remembered["request-only", podshapes.__name__] > 0  # Pod shapes answered from memory
    assert remembered["request-only", claimshapes.__name__] > 0  # and claims' findings


def test_the_corpus_is_judged_in_more_than_one_way() -> None:
    """The comparison above means something only if the corpus provokes different answers."""
    answers = {_cold(r, POLICIES["loaded"], STATE).decision.allowed for r in REQUESTS}
    reasons = {
        reason.policy
        for r in REQUESTS
        for reason in _cold(r, POLICIES["loaded"], STATE).decision.reasons
    }
    assert answers == {True, False}
    assert {"feasibility", "object", "DeviceClassPolicy/rules", "Tenant/team-a"} <= reasons
