"""The registry and `lint_object`: totality, ordering, rule metadata."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from lint.dra_objects import claim, exactly

from webhook.lint import INTERNAL, RULES, Finding, Known, lint_object

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 40),
    st.text(max_size=12),
    st.sampled_from(["exactly", "All", "gpu.nvidia.com", "device.capacity['m'] > 1"]),
)
KEYS = [
    "apiVersion",
    "kind",
    "spec",
    "devices",
    "requests",
    "exactly",
    "firstAvailable",
    "name",
    "count",
    "allocationMode",
    "selectors",
    "cel",
    "expression",
    "resourceClaims",
    "containers",
    "resources",
    "claims",
    "source",
    "metadata",
    "labels",
    "constraints",
    "matchAttribute",
    "template",
    "adminAccess",
    "deviceClassName",
    "validations",
    "allowedDeviceClasses",
    "quota",
    "deviceClassNames",
]
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(KEYS), inner, max_size=5)
    ),
    max_leaves=30,
)
HEADERS = [
    ("resource.k8s.io/v1", "ResourceClaim"),
    ("resource.k8s.io/v1beta1", "ResourceClaim"),
    ("resource.k8s.io/v1", "ResourceClaimTemplate"),
    ("resource.k8s.io/v1", "DeviceClass"),
    ("v1", "Pod"),
    ("apps/v1", "Deployment"),
    ("v1", "Namespace"),
    ("dragate.io/v1alpha1", "DeviceClassPolicy"),
    ("dragate.io/v1alpha1", "LegacyResourceMapping"),
    ("dragate.io/v1alpha1", "Tenant"),
]
KNOWN = Known(frozenset({"gpu.nvidia.com", "mig.nvidia.com"}))


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(HEADERS), st.dictionaries(st.sampled_from(KEYS), values, max_size=5))
def test_lint_is_total_on_any_shape(header: tuple[str, str], body: dict[str, Any]) -> None:
    obj = {**body, "apiVersion": header[0], "kind": header[1]}
    for known in (None, KNOWN):
        findings = lint_object(obj, known)
        assert all(isinstance(f, Finding) for f in findings)
        assert [f for f in findings if f.rule == INTERNAL] == []


def test_non_mapping_input_is_ignored() -> None:
    assert lint_object([1, 2]) == []  # type: ignore[arg-type]


def test_findings_come_in_path_order_and_are_unique() -> None:
    obj = claim(exactly(name="B", count=0), exactly(name="a", count=-1), exactly(name="a"))
    findings = lint_object(obj)
    assert len(findings) == len(set(findings))
    indexes = [f.path[3] for f in findings]
    assert indexes == sorted(indexes)


def test_every_rule_has_a_severity_and_summary() -> None:
    assert {
        "request-shape",
        "cel-domain",
        "cel-version-compare",
        "stale-attribute",
        "admin-access-label",
        "pod-claim-ref",
        "policy",
        "parse",
    } <= set(RULES)
    for info in RULES.values():
        assert info.severity in ("error", "warning") and info.summary


def test_dotted_path() -> None:
    finding = Finding("r", "error", ("spec", "devices", "requests", 0, "exactly", "count"), "m")
    assert finding.dotted_path() == "spec.devices.requests[0].exactly.count"
    assert finding.at(("items", 2)).path[:2] == ("items", 2)
