"""Validations are type-checked against the target minor's pinned schemas, once per kind."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from webhook.engine.ruletypes import RULE_KINDS
from webhook.policy.celspec import VALIDATION_VARIABLES, compile_cel
from webhook.policy.kubetypes import missing_field, needs_newer, schemas_file, validation_types
from webhook.policy.loading import PolicyError, parse_policies
from webhook.policy.target import kube_version, use_kube_version
from webhook.types.kubeversions import NEWEST, SUPPORTED

CASES = {
    "request-count": ("request.count <= 4", None),
    "request-misspelt": ("request.cnt <= 4", "undefined field 'cnt'"),
    "request-selectors": ("request.selectors.all(s, !s.contains('uuid'))", None),
    "request-count-is-int": (
        "request.count == '4'",
        "found no matching overload for '_==_' applied to '(int, string)'",
    ),
    "request-admin-access-is-bool": ("!request.adminAccess", None),
    "request-allocation-mode": ("request.allocationMode == 'ExactCount'", None),
    "user-info": ("'admins' in userInfo.groups && userInfo.username != ''", None),
    "user-info-extra": ("userInfo.extra['scopes'].size() > 0", None),
    "user-info-misspelt": ("userInfo.user == 'a'", "undefined field 'user'"),
    "operation-is-string": ("operation == 'CREATE'", None),
    "operation-not-int": ("operation == 1", "found no matching overload"),
    "tenant-is-string": ("tenant.startsWith('ml-')", None),
    "namespace-nullable": ("namespace == null || namespace.metadata.name != ''", None),
    "namespace-labels": ("namespace.metadata.labels['team'] == 'a'", None),
    "namespace-misspelt": ("namespace.metadata.lables['team'] == 'a'", "undefined field 'lables'"),
    "old-object-nullable": ("oldObject == null", None),
    "pod-field-unguarded": (
        "object.spec.containers.all(c, c.image != '')",
        "ResourceClaim, ResourceClaimTemplate: undefined field 'containers'",
    ),
    "pod-field-guarded-by-and": (
        "object.kind == 'Pod' && object.spec.containers.all(c, c.image != '')",
        None,
    ),
    "pod-field-guarded-by-or": (
        "object.kind != 'Pod' || object.spec.containers.all(c, c.image != '')",
        None,
    ),
    "every-kind-by-conditional": (
        "object.kind == 'Pod' ? object.spec.containers.size() < 3 : "
        "object.kind == 'ResourceClaim' ? object.spec.devices.requests.size() < 3 : "
        "object.spec.spec.devices.requests.size() < 3",
        None,
    ),
    "guarded-but-misspelt": (
        "object.kind == 'Pod' && object.spec.containerz.size() < 3",
        "Pod: undefined field 'containerz'",
    ),
    "guarded-by-the-wrong-kind": (
        "object.kind == 'ResourceClaim' && object.spec.containers.size() < 3",
        "ResourceClaim: undefined field 'containers'",
    ),
    "misspelt-on-every-kind": ("object.spec.devicez.size() < 3", "undefined field 'devicez'"),
    "different-errors-name-each-kind": (
        "object.spec.containers[0].nmae == ''",
        "Pod: undefined field 'nmae' (column 1); ResourceClaim, ResourceClaimTemplate: "
        "undefined field 'containers'",
    ),
    "metadata-namespace-escaped": ("object.metadata.__namespace__ == 'a'", None),
    "metadata-namespace-reserved-word": ("object.metadata.namespace == 'a'", None),
}


@pytest.mark.parametrize(("expression", "error"), CASES.values(), ids=CASES)
def test_rule_variables_are_typed(expression: str, error: str | None) -> None:
    _, found = compile_cel(expression, VALIDATION_VARIABLES, validation_types())
    if error is None:
        assert found is None
    else:
        assert found is not None and error in found


def test_one_environment_per_kind_a_rule_sees() -> None:
    assert [e.name for e in validation_types()] == list(RULE_KINDS)


@pytest.mark.parametrize("minor", SUPPORTED)
def test_every_supported_minor_has_pinned_schemas_for_the_rule_kinds(minor: str) -> None:
    pinned = json.loads(resources.files("webhook").joinpath(*schemas_file(minor)).read_text())
    assert set(pinned["roots"]) == {*RULE_KINDS, "Namespace"}
    assert pinned["roots"]["ResourceClaim"] == "io.k8s.api.resource.v1.ResourceClaim"


def test_the_target_is_the_newest_minor_unless_chosen() -> None:
    assert kube_version() == NEWEST
    use_kube_version("1.35")
    try:
        assert kube_version() == "1.35"
    finally:
        use_kube_version(NEWEST)


DERIVED = (
    "object.kind != 'ResourceClaim' || "
    "object.spec.devices.requests.all(r, r.exactly.derivedAttributes.size() < 2)"
)
GROUP = "object.kind != 'Pod' || has(object.spec.schedulingGroup)"
WORKLOAD = "object.kind != 'Pod' || has(object.spec.workloadRef)"
BY_MINOR = {
    # id: (target, expression, error or None)
    "added-in-1-37-on-1-37": ("1.37", DERIVED, None),
    "added-in-1-37-on-1-36": (
        "1.36",
        DERIVED,
        "field spec.devices.requests[].exactly.derivedAttributes needs Kubernetes 1.37 "
        "(target 1.36)",
    ),
    "added-in-1-36-on-1-35": (
        "1.35",
        GROUP,
        "field spec.schedulingGroup needs Kubernetes 1.36 (target 1.35)",
    ),
    "added-in-1-36-on-1-36": ("1.36", GROUP, None),
    "gone-after-1-35-on-1-35": ("1.35", WORKLOAD, None),
    "gone-after-1-35-on-1-37": ("1.37", WORKLOAD, "undefined field 'workloadRef'"),
    "misspelt-on-1-35": ("1.35", "object.spec.devicez.size() < 3", "undefined field 'devicez'"),
}


@pytest.mark.parametrize(("target", "expression", "error"), BY_MINOR.values(), ids=BY_MINOR)
def test_a_field_the_target_lacks_names_the_minor_that_added_it(
    target: str, expression: str, error: str | None
) -> None:
    _, found = compile_cel(expression, VALIDATION_VARIABLES, validation_types(target))
    if found is not None:
        found = needs_newer(expression, VALIDATION_VARIABLES, target) or found
    if error is None:
        assert found is None
    else:
        assert found is not None and error in found


def test_a_policy_file_reports_the_minor_that_added_a_field() -> None:
    use_kube_version("1.35")
    try:
        _, problems = _load_validation(GROUP)
    finally:
        use_kube_version(NEWEST)
    assert "field spec.schedulingGroup needs Kubernetes 1.36 (target 1.35)" in problems


def _load_validation(expression: str) -> tuple[None, str]:
    text = (
        "apiVersion: dragate.io/v1alpha1\nkind: DeviceClassPolicy\n"
        "metadata: {name: p}\nspec:\n  deviceClassNames: [gpu.example.com]\n"
        f"  validations:\n  - expression: {json.dumps(expression)}\n"
    )
    with pytest.raises(PolicyError) as raised:
        parse_policies(text, "p.yaml")
    return None, str(raised.value)


@pytest.mark.parametrize(
    ("kind", "steps", "why"),
    [
        (
            "Pod",
            ("spec", "containers", 0, "resourcess", "claims"),
            "Pod.spec.containers[0] has no field resourcess in Kubernetes 1.35 "
            '(did you mean "resources"?)',
        ),
        ("Pod", ("spec", "containers", 0, "resources", "limits", "nvidia.com/gpu"), None),
        ("Pod", ("metadata", "labels", "anything"), None),
        ("ResourceClaim", ("spec", "devices", "requests", 0, "exactly", "count"), None),
        ("Deployment", ("spec", "anything"), None),
    ],
    ids=["typo", "map-key", "labels", "claim", "unpinned-kind"],
)
def test_missing_field(kind: str, steps: tuple[str | int, ...], why: str | None) -> None:
    assert missing_field(kind, steps, "1.35") == why
