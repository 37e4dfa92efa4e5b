"""The pipeline: facts gathered once, ledger reservations, mutate-then-validate."""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any

import pytest
from builders import claim, exact, first_available, namespace, pod, request, template

from webhook.admission.review import short_warning
from webhook.engine.inventory import Inventory
from webhook.kube.snapshot import SnapshotState
from webhook.ledger.memory import MemoryLedger
from webhook.pipeline import Context, admit, request_from_object, review
from webhook.policy.loading import parse_policies
from webhook.rewrite import rewrite_pod
from webhook.types import FactsUnavailable, Operation

POLICIES = parse_policies(
    """
apiVersion: dragate.io/v1alpha1
kind: Tenant
metadata: {name: team-a}
spec:
  namespaces: [team-a]
  quota:
  - {deviceClassName: gpu.nvidia.com, maxDevices: 4}
---
apiVersion: dragate.io/v1alpha1
kind: Tenant
metadata: {name: labelled}
spec:
  namespaceSelector: {matchLabels: {tenant: labelled}}
  quota:
  - {deviceClassName: gpu.nvidia.com, maxDevices: 1}
---
apiVersion: dragate.io/v1alpha1
kind: Settings
metadata: {name: s}
spec:
  exemptNamespaces: [kube-system]
""",
    "inline.yaml",
)


def context(*objects: dict[str, Any]) -> tuple[Context, SnapshotState, MemoryLedger]:
    state = SnapshotState(objects)
    ledger = MemoryLedger()
    added: list[Any] = []
    ctx = Context(
        policies=lambda: POLICIES,
        state=state,
        ledger=ledger,
        templates=lambda ns, templates, dry, seconds: added.extend(templates) if not dry else None,
    )
    return ctx, state, ledger


def test_admitted_claims_are_reserved_and_the_next_one_is_refused() -> None:
    ctx, _, ledger = context()
    first = review(request_from_object(claim(request(exact(count=3)), name="a")), ctx)
    second = review(request_from_object(claim(request(exact(count=2)), name="b")), ctx)
    assert first.allowed and not second.allowed
    assert (
        "used 3 + requested 2 > limit 4; held by claim:team-a/a (3)"
        in second.decision.reasons[0].message
    )
    assert ledger.usage("team-a")["gpu.nvidia.com"].used == 3


def test_dry_run_never_writes_the_ledger() -> None:
    ctx, _, ledger = context()
    dry = replace(request_from_object(claim(request(exact(count=3)))), dry_run=True)
    assert review(dry, ctx).allowed
    assert ledger.usage("team-a") == {}


def test_tenant_is_found_by_namespace_labels_from_state() -> None:
    ctx, _, _ = context(namespace("lab", tenant="labelled"))
    verdict = review(request_from_object(claim(request(exact(count=2)), namespace="lab")), ctx)
    assert verdict.decision.tenant == "labelled" and not verdict.allowed


def test_pod_reservation_is_consumed_by_its_generated_claim() -> None:
    ctx, _, ledger = context(template(request(exact(count=2)), name="two"))
    the_pod = pod(claims={"gpu": "two"}, uid="pod-uid")
    assert review(request_from_object(the_pod), ctx).allowed
    generated = claim(request(exact(count=2)), name="pod-gpu-x1")
    generated["metadata"]["annotations"] = {"resource.kubernetes.io/pod-claim-name": "gpu"}
    generated["metadata"]["ownerReferences"] = [{"kind": "Pod", "uid": "pod-uid", "name": "pod"}]
    assert review(request_from_object(generated), ctx).allowed
    assert ledger.usage("team-a")["gpu.nvidia.com"].used == 2


def test_parallel_admissions_never_overcommit() -> None:
    ctx, _, ledger = context()
    results: list[bool] = []

    def admit_one(i: int) -> None:
        verdict = review(request_from_object(claim(request(exact(count=1)), name=f"c{i}")), ctx)
        results.append(verdict.allowed)

    threads = [threading.Thread(target=admit_one, args=(i,)) for i in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results.count(True) == 4
    assert ledger.usage("team-a")["gpu.nvidia.com"].used == 4


def test_exempt_namespaces_are_neither_checked_nor_rewritten() -> None:
    ctx, _, _ = context()
    big = claim(request(exact(count=99)), namespace="kube-system")
    assert review(request_from_object(big), ctx).allowed


def legacy_pod(gpus: int = 2) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "old", "namespace": "team-a"},
        "spec": {
            "containers": [
                {"name": "cuda", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": gpus}}}
            ]
        },
    }


def test_mutation_rewrites_a_legacy_pod_and_validation_judges_the_result() -> None:
    ctx, state, ledger = context()
    created: list[Any] = []
    ctx = replace(
        ctx,
        templates=lambda ns, templates, dry, seconds: (
            [state.add({**t, "metadata": {**t["metadata"], "namespace": ns}}) for t in templates]
            and None
        ),
    )
    applied = admit(request_from_object(legacy_pod()), ctx)
    assert applied.mutation.patch, "a legacy pod must be patched"
    assert "nvidia.com/gpu" not in str(
        applied.final["spec"]["containers"][0]["resources"].get("limits", {})
    )
    assert applied.decision.allowed, applied.decision.reasons
    assert ledger.usage("team-a")["gpu.nvidia.com"].used == 2
    assert any("nvidia.com/gpu=2" in w for w in applied.warnings)
    assert not created


def test_a_rewrite_that_breaks_policy_is_denied_on_both_sides_with_one_message() -> None:
    """The mutating side judges the rewrite before creating any template, and the validating
    side judges a legacy Pod that reached it unchanged the same way: no path lets it through
    on the device plugin, and `check` (admit) says exactly what the cluster says."""
    ctx, _, ledger = context()
    made: list[Any] = []
    ctx = replace(ctx, templates=lambda ns, templates, dry, seconds: made.extend(templates))
    over = request_from_object(legacy_pod(gpus=5))
    mutation = review(over, ctx, mutate=True)
    unchanged = review(over, ctx)
    checked = admit(over, ctx)
    messages = [r.message for r in mutation.decision.reasons]
    assert not mutation.allowed and not unchanged.allowed and not checked.decision.allowed
    assert messages == [r.message for r in unchanged.decision.reasons]
    assert messages == [r.message for r in checked.decision.reasons]
    assert "requested 5 > limit 4" in messages[0]
    assert not made, "no managed template may be created for a denied rewrite"
    assert ledger.usage("team-a") == {}


def test_a_denied_rewrite_names_the_tenants_usage_as_validation_does() -> None:
    """Judged without the usage first (as validation judges before the ledger's reserve), a
    denial is judged again with it: the mutating side's numbers and holders are the ledger's,
    and a legacy Pod reaching validation unchanged gets the very same message."""
    ctx, _, _ = context()
    assert review(request_from_object(claim(request(exact(count=3)), name="a")), ctx).allowed
    over = request_from_object(legacy_pod(gpus=5))
    mutation, unchanged = review(over, ctx, mutate=True), review(over, ctx)
    [reason] = mutation.decision.reasons
    assert "used 3 + requested 5 > limit 4; held by claim:team-a/a (3)" in reason.message
    assert [r.message for r in unchanged.decision.reasons] == [reason.message]


class UnreadableLedger(MemoryLedger):
    def usage(self, tenant: str, deadline: Any = None) -> Any:
        raise FactsUnavailable("the ledger did not answer")


def test_a_denied_rewrite_stays_denied_when_the_usage_cannot_be_read() -> None:
    """Reading the usage only adds numbers to a denial: a ledger that cannot answer leaves
    the denial as it was judged, on both sides, even where Settings admit on an outage."""
    ctx, _, _ = context()
    ctx = replace(ctx, ledger=UnreadableLedger())
    over = request_from_object(legacy_pod(gpus=5))
    for verdict in (review(over, ctx, mutate=True), review(over, ctx)):
        assert not verdict.allowed
        assert "requested 5 > limit 4" in verdict.decision.reasons[0].message


def test_once_its_templates_exist_a_rewrite_is_judged_by_validation_alone() -> None:
    """Nothing is created for a Pod whose templates exist, so the mutating side patches it and
    the validating side judges the patched Pod: the verdict and message the mutating side gave
    while they did not exist (and `check` the same), the judgement made once, not twice."""
    ctx, state, _ = context()
    handed: list[Any] = []
    ctx = replace(ctx, templates=lambda ns, templates, dry, seconds: handed.extend(templates))
    over = request_from_object(legacy_pod(gpus=5))
    before = review(over, ctx, mutate=True)
    for t in rewrite_pod(legacy_pod(gpus=5), POLICIES.mappings, namespace="team-a").templates:
        state.add({**t, "metadata": {**t["metadata"], "namespace": "team-a"}})
    mutation = review(over, ctx, mutate=True)
    rewrite = getattr(mutation.rewritten, "__self__", None)
    assert rewrite is not None and "result" not in vars(rewrite), "the webhook needs the patch only"
    assert mutation.allowed and mutation.patch and mutation.patched is not None
    validation = review(over.with_object(mutation.patched), ctx)
    checked = admit(over, ctx)
    messages = [r.message for r in before.decision.reasons]
    assert not before.allowed and "requested 5 > limit 4" in messages[0]
    assert [r.message for r in validation.decision.reasons] == messages
    assert [r.message for r in checked.decision.reasons] == messages
    assert checked.warnings[: len(mutation.decision.warnings)] == mutation.decision.warnings
    assert not handed, "templates that exist are not handed to the sink again"


def test_a_legacy_pod_within_policy_is_admitted_unchanged_by_validation_alone() -> None:
    ctx, _, ledger = context()
    verdict = review(request_from_object(legacy_pod(gpus=2)), ctx)
    assert verdict.allowed and ledger.usage("team-a") == {}


def test_mutation_is_idempotent() -> None:
    ctx, _, _ = context()
    once = review(request_from_object(legacy_pod()), ctx, mutate=True)
    assert once.patched is not None
    again = review(request_from_object(once.patched), ctx, mutate=True)
    assert not again.patch


@pytest.mark.parametrize(
    "operation", [Operation.UPDATE, Operation.DELETE], ids=["update", "delete"]
)
def test_mutation_touches_only_pod_creates(operation: Operation) -> None:
    ctx, _, _ = context()
    req = request_from_object(legacy_pod(), operation=operation)
    assert not review(req, ctx, mutate=True).patch


class UnreachableState(SnapshotState):
    """Our own ClusterState adapter, standing in for a cluster that does not answer."""

    def namespace(self, name: str) -> dict[str, Any] | None:
        raise FactsUnavailable("API server did not answer within 1.0s")


@pytest.mark.parametrize(
    ("setting", "allowed", "fragment"),
    [
        ("Deny", False, "cluster state unavailable, quota cannot be checked"),
        ("Warn", True, "admitted without a quota check"),
    ],
    ids=["fail-closed-by-default", "warn"],
)
def test_unavailable_state_is_an_explicit_outcome(
    setting: str, allowed: bool, fragment: str
) -> None:
    policies = parse_policies(
        "apiVersion: dragate.io/v1alpha1\nkind: Settings\nmetadata: {name: s}\n"
        f"spec: {{whenStateUnavailable: {setting}}}\n"
    )
    ctx = Context(policies=lambda: policies, state=UnreachableState(), ledger=MemoryLedger())
    verdict = review(request_from_object(claim(request(exact()))), ctx)
    assert verdict.allowed is allowed
    text = " ".join([*(str(r) for r in verdict.decision.reasons), *verdict.decision.warnings])
    assert fragment in text and "did not answer" in text


def test_unavailable_state_leaves_legacy_pods_unchanged_with_a_warning() -> None:
    ctx = Context(policies=lambda: POLICIES, state=UnreachableState(), ledger=MemoryLedger())
    verdict = review(request_from_object(legacy_pod()), ctx, mutate=True)
    assert verdict.allowed and not verdict.patch
    assert "not rewritten, cluster state unavailable" in verdict.decision.warnings[0]


def deployment(replicas: int, api_version: str = "apps/v1") -> dict[str, Any]:
    template = {"metadata": {}, "spec": legacy_pod()["spec"]}
    return {
        "apiVersion": api_version,
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "team-a"},
        "spec": {"replicas": replicas, "template": template},
    }


@pytest.mark.parametrize(("replicas", "warned"), [(2, False), (3, True)], ids=["fits", "too-many"])
def test_workload_prediction_warns_when_pods_will_not_fit(replicas: int, warned: bool) -> None:
    ctx, _, _ = context()
    verdict = review(request_from_object(deployment(replicas)), ctx)
    assert verdict.allowed
    expected = "Deployment team-a/web: its pods need 6 gpu.nvidia.com devices"
    assert any(expected in w for w in verdict.decision.warnings) is warned


def test_workload_prediction_matches_group_and_kind() -> None:
    ctx, _, _ = context()
    verdict = review(request_from_object(deployment(3, "example.com/v1")), ctx)
    assert not any("its pods need" in w for w in verdict.decision.warnings)


def test_namespace_admin_label_guard_runs_through_the_pipeline() -> None:
    ctx, _, _ = context()
    ns = namespace("team-a", **{"resource.kubernetes.io/admin-access": "true"})
    verdict = review(request_from_object(ns), ctx)
    assert not verdict.allowed
    assert "may not set or change the resource.kubernetes.io/admin-access label" in str(
        verdict.decision.reasons[0]
    )


GPU_CLASS = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceClass",
    "metadata": {"name": "gpu.nvidia.com"},
    "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}]},
}


def gpu_slice(node: str, memory: str, count: int) -> dict[str, Any]:
    devices = [
        {
            "name": f"gpu-{i}",
            "attributes": {
                "productName": {"string": f"GPU {memory}"},
                "uuid": {"string": f"{node}-{i}"},
            },
            "capacity": {"memory": {"value": memory}},
        }
        for i in range(count)
    ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-gpu", "resourceVersion": "1"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


FEASIBILITY = """
apiVersion: dragate.io/v1alpha1
kind: Settings
metadata: {name: s}
spec: {feasibility: Deny}
---
apiVersion: dragate.io/v1alpha1
kind: Tenant
metadata: {name: team-a}
spec:
  namespaces: [team-a]
  quota: [{deviceClassName: gpu.nvidia.com, maxDevices: 10}]
"""


def inventory_context() -> Context:
    from webhook.assembly import offline_context

    state = SnapshotState(
        [GPU_CLASS, gpu_slice("node-a", "40Gi", 4), gpu_slice("node-b", "80Gi", 4)]
    )
    policies = parse_policies(FEASIBILITY)
    return offline_context(lambda: policies, state)


BIG_MEMORY = "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('100Gi')) >= 0"
SOME_MEMORY = "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('60Gi')) >= 0"


@pytest.mark.parametrize(
    ("fields", "allowed", "fragment"),
    [
        (exact(count=4, selectors=(SOME_MEMORY,)), True, ""),
        (exact(count=1, selectors=(BIG_MEMORY,)), False, "rules out the most"),
        (exact(count=5, selectors=(SOME_MEMORY,)), False, "needs 5"),
    ],
    ids=["feasible", "no-device-matches", "not-enough-on-one-node"],
)
def test_feasibility_against_the_published_devices(
    fields: dict[str, Any], allowed: bool, fragment: str
) -> None:
    verdict = review(request_from_object(claim(request(fields))), inventory_context())
    assert verdict.allowed is allowed, verdict.decision.reasons
    assert fragment in " ".join(str(r) for r in verdict.decision.reasons)


def test_all_mode_is_charged_32_as_resourcequota_and_the_inventory_only_warns() -> None:
    verdict = review(
        request_from_object(claim(request(exact(count=None, mode="All")))), inventory_context()
    )
    assert "requested 32" in " ".join(r.message for r in verdict.decision.reasons)
    assert list(verdict.decision.holds.values()) == [{"gpu.nvidia.com": 32}]
    assert any("8 published devices match" in w for w in verdict.decision.warnings)


GPU = "gpu.nvidia.com"
GPU_CLASS = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": GPU}}
MIG_CLASS = {**GPU_CLASS, "metadata": {"name": "mig.nvidia.com"}}
TYPO = "gpu.nvdia.com"
TYPO_WARNING = (
    f"dragate: request 'gpu': DeviceClass '{TYPO}' does not exist "
    f"(did you mean '{GPU}'?) (device-class)"
)


@pytest.mark.parametrize(
    ("obj", "classes", "warnings"),
    [
        (claim(request(exact(device_class=TYPO))), [GPU_CLASS, MIG_CLASS], [TYPO_WARNING]),
        (
            claim(request(exact(device_class=TYPO)), namespace="no-tenant"),
            [GPU_CLASS],
            [TYPO_WARNING],
        ),
        (
            template(request(exact(device_class=TYPO)), namespace="no-tenant"),
            [GPU_CLASS],
            [TYPO_WARNING],
        ),
        (
            claim(first_available("gpu", exact("big"), exact("small", device_class=TYPO))),
            [GPU_CLASS],
            [TYPO_WARNING.replace("'gpu'", "'gpu/small'")],
        ),
        (
            claim(request(exact(device_class="tpu.example.com")), namespace="no-tenant"),
            [GPU_CLASS],
            ["dragate: request 'gpu': DeviceClass 'tpu.example.com' does not exist (device-class)"],
        ),
        (claim(request(exact(device_class=TYPO)), namespace="no-tenant"), [], []),
        (claim(request(exact()), namespace="no-tenant"), [GPU_CLASS], []),
    ],
    ids=[
        "claim-in-tenant",
        "claim-outside-tenants",
        "template",
        "first-available-subrequest",
        "nothing-close",
        "no-class-known",
        "known-class",
    ],
)
def test_an_unknown_device_class_is_warned_and_admitted(
    obj: dict[str, Any], classes: list[dict[str, Any]], warnings: list[str]
) -> None:
    ctx, _, _ = context(*classes)
    verdict = review(request_from_object(obj), ctx)
    assert verdict.allowed
    assert [w for w in verdict.decision.warnings if "DeviceClass" in w] == warnings


SLICE = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceSlice",
    "metadata": {"name": "node-a-gpu"},
    "spec": {
        "driver": GPU,
        "nodeName": "node-a",
        "pool": {"name": "node-a", "generation": 1, "resourceSliceCount": 1},
        "devices": [{"name": "gpu-0"}],
    },
}


@pytest.mark.parametrize(
    ("feasibility", "allowed", "warning"),
    [
        ("Warn", True, TYPO_WARNING.replace("(device-class)", "(feasibility)")),
        ("Deny", False, None),
    ],
    ids=["warn", "deny"],
)
def test_with_feasibility_on_the_missing_class_is_said_once_by_it(
    feasibility: str, allowed: bool, warning: str | None
) -> None:
    """The feasibility check knows missing classes too: its Settings action decides."""
    policies = parse_policies(
        f"apiVersion: dragate.io/v1alpha1\nkind: Settings\nmetadata: {{name: s}}\n"
        f"spec: {{feasibility: {feasibility}}}\n",
        "settings.yaml",
    )
    ctx = Context(
        policies=lambda: policies,
        state=SnapshotState([GPU_CLASS]),
        ledger=MemoryLedger(),
        inventory=lambda: Inventory.from_slices([SLICE]),
    )
    verdict = review(request_from_object(claim(request(exact(device_class=TYPO)))), ctx)
    assert verdict.allowed == allowed
    found = [w for w in verdict.decision.warnings if "DeviceClass" in w]
    assert found == ([warning] if warning else [])
    if not allowed:
        assert f"(did you mean '{GPU}'?)" in verdict.decision.reasons[0].message


NATIVE_CLASS = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceClass",
    "metadata": {"name": "gpu.nvidia.com"},
    "spec": {"extendedResourceName": "nvidia.com/gpu"},
}


def native_pod(name: str, gpus: int) -> dict[str, Any]:
    limits = {"nvidia.com/gpu": str(gpus)}
    the_pod = pod(name=name, uid=f"uid-{name}")
    the_pod["spec"]["containers"] = [{"name": "c", "image": "x", "resources": {"limits": limits}}]
    return the_pod


def scheduler_claim(for_pod: str, gpus: int) -> dict[str, Any]:
    """The claim kube-scheduler creates for a Pod's extended resources (KEP-5004)."""
    made = claim(request(exact(count=gpus)), name=f"{for_pod}-extended-resources-abcde")
    made["spec"]["devices"]["requests"][0]["name"] = "container-0-request-0"
    made["metadata"]["annotations"] = {"resource.kubernetes.io/extended-resource-claim": "true"}
    owner = {"apiVersion": "v1", "kind": "Pod", "name": for_pod, "uid": f"uid-{for_pod}"}
    made["metadata"]["ownerReferences"] = [{**owner, "controller": True}]
    return made


def test_a_natively_mapped_pod_is_charged_at_its_creation() -> None:
    """A DeviceClass maps nvidia.com/gpu: the Pods keep their requests, and the second Pod of
    two over a quota of 4 is refused with the numbers at its own admission."""
    ctx, _, ledger = context(NATIVE_CLASS)
    first = review(request_from_object(native_pod("a", 3)), ctx)
    second = review(request_from_object(native_pod("b", 2)), ctx)
    assert first.allowed and not second.allowed
    assert not first.patch, "Auto keeps a name a DeviceClass maps"
    assert "used 3 + requested 2 > limit 4" in second.decision.reasons[0].message
    assert "pod:team-a/a/<extended-resources> (3)" in second.decision.reasons[0].message
    assert ledger.usage("team-a")["gpu.nvidia.com"].used == 3


def test_the_scheduler_s_claim_consumes_its_pod_s_reservation() -> None:
    ctx, _, ledger = context(NATIVE_CLASS)
    assert review(request_from_object(native_pod("a", 3)), ctx).allowed
    assert review(request_from_object(scheduler_claim("a", 3)), ctx).allowed
    assert ledger.usage("team-a")["gpu.nvidia.com"].used == 3
    refused = review(request_from_object(scheduler_claim("b", 2)), ctx)
    assert not refused.allowed, "a Pod admitted without a charge still meets quota at its claim"


# ------------------------------------------------------------------ binding conditions


ATTACHED = "dra.example.com/attached"


def _waiting_slice(node: str, count: int) -> dict[str, Any]:
    """A slice whose devices bind only once the driver reports `dra.example.com/attached`."""
    found = gpu_slice(node, "80Gi", count)
    for device in found["spec"]["devices"]:
        device["bindingConditions"] = [ATTACHED]
        device["bindingFailureConditions"] = ["dra.example.com/failed"]
    return found


def binding_context(feasibility: str | None, *slices: dict[str, Any]) -> Context:
    from webhook.assembly import offline_context

    settings = f"spec: {{feasibility: {feasibility}}}" if feasibility else "spec: {}"
    policies = parse_policies(FEASIBILITY.replace("spec: {feasibility: Deny}", settings))
    state = SnapshotState([GPU_CLASS, namespace("team-a"), *slices, template(request(exact()))])
    return offline_context(lambda: policies, state)


WAITS = (
    "dragate: request 'gpu': the Pod binds only once the driver reports dra.example.com/attached"
)
BOUND_FOR = [
    ("claim", claim(request(exact()))),
    ("template", template(request(exact()), name="other")),
    ("pod", pod(claims={"gpu": "tmpl"})),
]


@pytest.mark.parametrize("feasibility", [None, "Warn", "Deny"], ids=["unset", "warn", "deny"])
@pytest.mark.parametrize("obj", [o for _, o in BOUND_FOR], ids=[i for i, _ in BOUND_FOR])
def test_only_devices_with_binding_conditions_match_is_always_a_warning(
    obj: dict[str, Any], feasibility: str | None
) -> None:
    ctx = binding_context(feasibility, _waiting_slice("node-a", 2))
    verdict = review(request_from_object(obj), ctx)
    assert verdict.allowed, verdict.decision.reasons
    (warning,) = [w for w in verdict.decision.warnings if "binding" in w]
    prefix = "dragate: pod claim 'gpu', request" if obj["kind"] == "Pod" else "dragate: request"
    assert warning.startswith(WAITS.replace("dragate: request", prefix))
    assert short_warning(warning).startswith(WAITS.replace("dragate: request", prefix))


@pytest.mark.parametrize(
    "slices",
    [
        [gpu_slice("node-a", "80Gi", 2)],
        [_waiting_slice("node-a", 2), gpu_slice("node-b", "80Gi", 2)],
    ],
    ids=["no-binding-conditions", "other-devices-match-too"],
)
def test_devices_without_binding_conditions_matching_is_not_warned(
    slices: list[dict[str, Any]],
) -> None:
    verdict = review(request_from_object(claim(request(exact()))), binding_context(None, *slices))
    assert verdict.allowed
    assert not [w for w in verdict.decision.warnings if "binding" in w]
