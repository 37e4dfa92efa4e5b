"""Validations are type-checked against the pinned Kubernetes 1.34 schemas, once per kind."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from webhook.engine.ruletypes import RULE_KINDS
from webhook.policy.celspec import VALIDATION_VARIABLES, compile_cel
from webhook.policy.kubetypes import SCHEMAS, validation_types

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


def test_the_pinned_schemas_are_kubernetes_1_34_for_the_rule_kinds() -> None:
    pinned = json.loads(resources.files("webhook").joinpath(*SCHEMAS).read_text())
    assert set(pinned["roots"]) == {*RULE_KINDS, "Namespace"}
    assert pinned["roots"]["ResourceClaim"] == "io.k8s.api.resource.v1.ResourceClaim"
