"""Which resources and namespaces the rewriting MutatingAdmissionPolicy takes, and that all it
names comes from the Python rewrite. Its CEL is judged by a real API server against the
Python rewrite in tests/e2e/test_admission_policy.py."""

from __future__ import annotations

from dataclasses import replace

import pytest

from webhook.policy.loading import default_mappings, parse_policies
from webhook.rewrite import rewrite_pod_spec
from webhook.rewrite.admissionpolicy import (
    V1,
    V1BETA1,
    api_version_for,
    eligible_resources,
    in_version,
    restricted,
    rewrite_policy,
)
from webhook.types import (
    LegacyResourceMapping,
    MappingAction,
    PolicySet,
    ResourceMapping,
    Settings,
    Tenant,
)

GPU = ResourceMapping("gpu.nvidia.com", resource_name="nvidia.com/gpu")
AMD = ResourceMapping("gpu.amd.com", resource_name="amd.com/gpu")
TPU = ResourceMapping("tpu.example.com", resource_name="example.com/tpu")
SELECTED = ResourceMapping("gpu.nvidia.com", resource_name="nvidia.com/a100", selector="true")
DASHED = ResourceMapping("big-gpu.example.com", resource_name="example.com/big")


def mappings(
    *entries: ResourceMapping, action: MappingAction = MappingAction.REWRITE
) -> tuple[LegacyResourceMapping, ...]:
    return (LegacyResourceMapping(name="m", action=action, resources=entries),)


@pytest.mark.parametrize(
    ("found", "expected"),
    [
        (default_mappings(), ["nvidia.com/gpu"]),  # the MIG prefix needs a selector per slice
        (mappings(GPU, TPU), ["example.com/tpu", "nvidia.com/gpu"]),
        (mappings(GPU, AMD), []),  # both would name a container's claim `gpu-<name>`
        (mappings(GPU, SELECTED), ["nvidia.com/gpu"]),
        (mappings(DASHED), []),
        (mappings(GPU, action=MappingAction.WARN), []),
        (mappings(GPU, action=MappingAction.DENY), []),
        ((), []),
    ],
    ids=[
        "default",
        "two-classes",
        "same-claim-prefix",
        "selector",
        "dashed-prefix",
        "warn",
        "deny",
        "none",
    ],
)
def test_eligible_resources(found: tuple[LegacyResourceMapping, ...], expected: list[str]) -> None:
    assert [e.resource for e in eligible_resources(found, frozenset(), 8)] == expected


def test_a_native_resource_stays_with_the_webhook() -> None:
    assert eligible_resources(default_mappings(), frozenset({"nvidia.com/gpu"}), 8) == ()


def test_an_explicit_rewrite_rewrites_a_native_resource_too() -> None:
    (mapping,) = default_mappings()
    rewriting = (replace(mapping, action=MappingAction.REWRITE),)
    (entry,) = eligible_resources(rewriting, frozenset({"nvidia.com/gpu"}), 2)
    assert entry.resource == "nvidia.com/gpu"


def test_names_come_from_the_python_rewrite() -> None:
    (entry,) = eligible_resources(default_mappings(), frozenset(), 3)
    assert entry.claim_prefix == "gpu-"
    for count, name in enumerate(entry.template_names, 1):
        container = {"name": "x", "resources": {"limits": {"nvidia.com/gpu": str(count)}}}
        result = rewrite_pod_spec({"containers": [container]}, default_mappings())
        assert result.object["resourceClaims"] == [
            {"name": "gpu-x", "resourceClaimTemplateName": name}
        ]


TENANTS = """
apiVersion: dragate.io/v1alpha1
kind: Tenant
metadata: {name: ml}
spec: {namespaces: [b, a], allowedDeviceClasses: [gpu.nvidia.com]}
---
apiVersion: dragate.io/v1alpha1
kind: Tenant
metadata: {name: warned}
spec: {namespaces: [w], legacyMappingAction: Warn}
---
apiVersion: dragate.io/v1alpha1
kind: Tenant
metadata: {name: mig-only}
spec: {namespaces: [m], allowedDeviceClasses: [mig.nvidia.com]}
---
apiVersion: dragate.io/v1alpha1
kind: Tenant
metadata: {name: selected}
spec: {namespaceSelector: {matchLabels: {team: x}}}
---
apiVersion: dragate.io/v1alpha1
kind: Tenant
metadata: {name: rewriting}
spec: {namespaces: [r, exempt], legacyMappingAction: Rewrite}
"""


@pytest.fixture
def policies() -> PolicySet:
    loaded = parse_policies(TENANTS)
    return replace(loaded, mappings=default_mappings())


def _bound(policies: PolicySet) -> list[str]:
    made = rewrite_policy(policies)
    assert made is not None
    binding = made.objects[1]
    (expression,) = binding["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"]
    assert expression["values"] == list(made.namespaces)
    return list(made.namespaces)


def test_namespaces_listed_by_a_rewriting_tenant(policies: PolicySet) -> None:
    """Not a Warn tenant's, not one that may not use the class, not a selector's."""
    assert _bound(policies) == ["a", "b", "exempt", "r"]


def test_exempt_namespaces_are_left_out(policies: PolicySet) -> None:
    settings = Settings(exempt_namespaces=frozenset({"exempt"}))
    assert _bound(replace(policies, settings=settings)) == ["a", "b", "r"]


def test_every_template_in_every_namespace(policies: PolicySet) -> None:
    made = rewrite_policy(policies, max_count=2)
    assert made is not None
    assert sorted((t["metadata"]["namespace"], t["metadata"]["name"]) for t in made.templates) == [
        (ns, f"dragate-gpu-nvidia-com-{n}") for ns in ("a", "b", "exempt", "r") for n in (1, 2)
    ]
    for template in made.templates:  # each exactly what the rewrite makes in its namespace
        namespace, count = template["metadata"]["namespace"], template["metadata"]["name"][-1]
        container = {"name": "x", "resources": {"limits": {"nvidia.com/gpu": count}}}
        made_here = rewrite_pod_spec({"containers": [container]}, default_mappings(),
                                     namespace=namespace).templates  # fmt: skip
        assert [template] == list(made_here)


@pytest.mark.parametrize(
    ("keep", "expected"),
    [
        pytest.param({"b", "r", "elsewhere"}, ["b", "r"], id="some"),
        pytest.param({"a", "b", "exempt", "r"}, ["a", "b", "exempt", "r"], id="all"),
        pytest.param({"elsewhere"}, None, id="none"),
    ],
)
def test_restricted_binds_and_templates_only_the_namespaces_kept(
    policies: PolicySet, keep: set[str], expected: list[str] | None
) -> None:
    made = rewrite_policy(policies, max_count=2)
    assert made is not None
    narrowed = restricted(made, keep)
    if expected is None:
        assert narrowed is None
        return
    assert narrowed is not None and narrowed.namespaces == tuple(expected)
    assert narrowed.objects[0] == made.objects[0]  # the policy itself does not change
    (expression,) = narrowed.objects[1]["spec"]["matchResources"]["namespaceSelector"][
        "matchExpressions"
    ]
    assert expression["values"] == expected
    assert narrowed.objects[1]["metadata"] == made.objects[1]["metadata"]
    assert [t for t in made.templates if t["metadata"]["namespace"] in keep] == list(
        narrowed.templates
    )
    assert (restricted(made, made.namespaces) == made) is True


@pytest.mark.parametrize(
    "change",
    [
        lambda p: replace(p, tenants=()),
        lambda p: replace(p, mappings=()),
        lambda p: replace(
            p,
            tenants=(
                Tenant(name="t", namespaces=frozenset({"n"}), mapping_action=MappingAction.IGNORE),
            ),
        ),
    ],
    ids=["no-tenant", "no-mapping", "ignoring-tenant"],
)
def test_nothing_to_rewrite(policies: PolicySet, change: object) -> None:
    assert rewrite_policy(change(policies)) is None  # type: ignore[operator]


def test_exempt_users_are_a_condition(policies: PolicySet) -> None:
    def users(made: object) -> list[str]:
        conditions = made.objects[0]["spec"]["matchConditions"]  # type: ignore[attr-defined]
        return [c["expression"] for c in conditions if c["name"] == "not-an-exempt-user"]

    assert users(rewrite_policy(policies)) == []
    assert users(rewrite_policy(policies, exempt_users=frozenset({"u"}))) == [
        '!(request.userInfo.username in ["u"])'
    ]


@pytest.mark.parametrize(
    ("minor", "expected"),
    [("1.35", V1BETA1), ("1.36", V1), ("1.37", V1)],
    ids=["1.35-beta-behind-its-gate", "1.36-ga", "1.37-ga"],
)
def test_the_api_version_a_minor_serves(minor: str, expected: str) -> None:
    assert api_version_for(minor) == expected


@pytest.mark.parametrize("version", [V1, V1BETA1], ids=["v1", "v1beta1"])
def test_policy_and_binding_are_written_in_the_version_asked(
    policies: PolicySet, version: str
) -> None:
    made = rewrite_policy(policies, api_version=version)
    assert made is not None
    assert [o["apiVersion"] for o in made.objects] == [version, version]
    assert {t["apiVersion"] for t in made.templates} == {"resource.k8s.io/v1"}


def test_v1_is_the_default_and_in_version_changes_only_the_api_version(
    policies: PolicySet,
) -> None:
    made = rewrite_policy(policies)
    beta = rewrite_policy(policies, api_version=V1BETA1)
    assert made is not None and beta is not None
    assert made.objects[0]["apiVersion"] == V1
    assert in_version(made, V1BETA1) == beta
    assert in_version(beta, V1) == made
