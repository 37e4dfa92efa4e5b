"""Kubernetes is the judge of how DeviceClassPolicy rules type `object`.

The pinned schemas of the API server's minor (webhook/defaults/kube/schemas-<minor>.json, the
minor read from its /version) must be what this kube-apiserver serves at /openapi/v3. Then,
for each kind a rule sees, one ValidatingAdmissionPolicy holds every expression of the table
that applies to that kind; kube-controller-manager type-checks it against the kind's schema
and writes `status.typeChecking.expressionWarnings`. An expression must get a warning there
exactly when dragate refuses it for that kind, with the same message class. The classes
follow upstream's typechecking_test.go
(k8s.io/apiserver/pkg/admission/plugin/policy/validating): "undefined field", "field type
mismatch", several expressions in one policy of which only some are wrong.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

import pytest
from kube_schema_pin import DOCUMENTS, compact, dumps, pinned_path

from webhook.engine.ruletypes import RULE_KINDS
from webhook.policy.celspec import VALIDATION_VARIABLES, compile_cel
from webhook.policy.kubetypes import schemas_file, validation_types
from webhook.types.kubeversions import supported_minor

from .cluster import Cluster

pytestmark = pytest.mark.e2e

ALL = "*"
CASES: dict[str, tuple[str, str, bool]] = {
    # id: (kind or ALL, expression, refused)
    "kind-and-api-version": (ALL, "object.kind != '' && object.apiVersion != ''", False),
    "uid": (ALL, "object.metadata.uid != ''", False),
    "uid-misspelt": (ALL, "object.metadata.uuid != ''", True),
    "generation-is-int": (ALL, "object.metadata.generation + 1 > 0", False),
    "generation-vs-string": (ALL, "object.metadata.generation == '1'", True),
    "name-vs-int": (ALL, "object.metadata.name == 1", True),
    "name-vs-null": (ALL, "object.metadata.name != null", True),
    "labels-index": (ALL, "object.metadata.labels['app'] == 'x'", False),
    "labels-dot": (ALL, "object.metadata.labels.app == 'x'", False),
    "annotations-in": (ALL, "'a' in object.metadata.annotations", False),
    "namespace-reserved-word": (ALL, "object.metadata.namespace == 'a'", False),
    "namespace-escaped": (ALL, "object.metadata.__namespace__ == 'a'", False),
    "creation-timestamp": (
        ALL,
        "object.metadata.creationTimestamp < timestamp('2030-01-01T00:00:00Z')",
        False,
    ),
    "creation-timestamp-as-string": (
        ALL,
        "object.metadata.creationTimestamp.startsWith('2')",
        True,
    ),
    "owner-references": (ALL, "object.metadata.ownerReferences.exists(o, o.controller)", False),
    "owner-reference-bool-vs-string": (
        ALL,
        "object.metadata.ownerReferences.exists(o, o.controller == 'true')",
        True,
    ),
    "managed-fields-element": (ALL, "object.metadata.managedFields.all(f, f.manager != '')", False),
    "managed-fields-opaque": (
        ALL,
        "object.metadata.managedFields.all(f, f.fieldsV1.x == 1)",
        True,
    ),
    "pod-container-image": ("Pod", "object.spec.containers.all(c, c.image != '')", False),
    "pod-container-misspelt": ("Pod", "object.spec.containers.all(c, c.imgae != '')", True),
    "pod-spec-misspelt": ("Pod", "object.spec.contianers.size() > 0", True),
    "pod-int-field": ("Pod", "object.spec.terminationGracePeriodSeconds > 30", False),
    "pod-int-vs-string": ("Pod", "object.spec.terminationGracePeriodSeconds == '30'", True),
    "pod-int-vs-double": ("Pod", "object.spec.activeDeadlineSeconds > 1.5", False),
    "pod-has": ("Pod", "has(object.spec.nodeSelector)", False),
    "pod-has-misspelt": ("Pod", "has(object.spec.nodeSelectr)", True),
    "pod-optional": ("Pod", "object.spec.?hostNetwork.orValue(false) == false", False),
    "pod-optional-misspelt": ("Pod", "object.spec.?hostNetwrk.orValue(false) == false", True),
    "pod-struct-vs-null": ("Pod", "object.spec.securityContext != null", False),
    "pod-resource-claims": (
        "Pod",
        "object.spec.containers.all(c, !has(c.resources) || "
        "c.resources.claims.all(r, r.name != ''))",
        False,
    ),
    "pod-resource-limits-quantity": (
        "Pod",
        "object.spec.containers.all(c, !has(c.resources.limits))",
        True,
    ),
    "pod-int-or-string": (
        "Pod",
        "object.spec.containers.all(c, c.livenessProbe.httpGet.port == 80 || "
        "c.livenessProbe.httpGet.port == 'http')",
        False,
    ),
    "pod-list-of-strings": (
        "Pod",
        "object.spec.containers.all(c, c.args.all(a, a.size() < 100))",
        False,
    ),
    "pod-nested-misspelt": (
        "Pod",
        "object.spec.volumes.all(v, v.configMap.nmae != '')",
        True,
    ),
    "pod-index-then-field": ("Pod", "object.spec.containers[0].name != ''", False),
    "claim-exactly-count": (
        "ResourceClaim",
        "object.spec.devices.requests.all(r, !has(r.exactly) || r.exactly.count <= 4)",
        False,
    ),
    "claim-count-misspelt": (
        "ResourceClaim",
        "object.spec.devices.requests.all(r, r.exactly.cnt <= 4)",
        True,
    ),
    "claim-count-vs-string": (
        "ResourceClaim",
        "object.spec.devices.requests.all(r, r.exactly.count == '4')",
        True,
    ),
    "claim-selector-cel": (
        "ResourceClaim",
        "object.spec.devices.requests.all(r, "
        "r.exactly.selectors.all(s, s.cel.expression.size() < 1000))",
        False,
    ),
    "claim-first-available": (
        "ResourceClaim",
        "object.spec.devices.requests.exists(r, r.firstAvailable.size() > 1)",
        False,
    ),
    "claim-opaque-parameters": (
        "ResourceClaim",
        "object.spec.devices.config.all(c, c.opaque.parameters.size() > 0)",
        True,
    ),
    "claim-status-results": (
        "ResourceClaim",
        "object.status.allocation.devices.results.size() < 9",
        False,
    ),
    "template-inner-spec": (
        "ResourceClaimTemplate",
        "object.spec.spec.devices.requests.size() <= 4",
        False,
    ),
    "template-without-inner-spec": (
        "ResourceClaimTemplate",
        "object.spec.devices.requests.size() <= 4",
        True,
    ),
    "template-optional-labels": (
        "ResourceClaimTemplate",
        "object.spec.?metadata.?labels.orValue({}).size() < 10",
        False,
    ),
}
RESOURCES = {
    "Pod": ("", "pods"),
    "ResourceClaim": ("resource.k8s.io", "resourceclaims"),
    "ResourceClaimTemplate": ("resource.k8s.io", "resourceclaimtemplates"),
}


def _cases(kind: str) -> list[str]:
    return [case for case, (on, _, _) in CASES.items() if on in (ALL, kind)]


def _policy(kind: str) -> dict[str, Any]:
    group, resource = RESOURCES[kind]
    rule = {"apiGroups": [group], "apiVersions": ["v1"], "operations": ["CREATE"],
            "resources": [resource]}  # fmt: skip
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": f"dragate-types-{resource}"},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [rule]},
            "validations": [{"expression": CASES[case][1]} for case in _cases(kind)],
        },
    }


def _type_checked(cluster: Cluster, name: str) -> dict[str, Any]:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        policy = cluster.get_json("validatingadmissionpolicies", name)
        status = policy.get("status", {})
        if status.get("observedGeneration") == policy["metadata"]["generation"]:
            return status.get("typeChecking", {})  # type: ignore[no-any-return]
        time.sleep(0.5)
    raise AssertionError(f"{name} was not type-checked\n{cluster.diagnostics()}")


def _warned(cluster: Cluster, kind: str) -> dict[str, str]:
    policy = _policy(kind)
    cluster.apply(json.dumps(policy))
    try:
        checked = _type_checked(cluster, policy["metadata"]["name"])
    finally:
        cluster.kubectl("delete", "validatingadmissionpolicy", policy["metadata"]["name"])
    cases = _cases(kind)
    warned = {}
    for warning in checked.get("expressionWarnings", []):
        index = int(warning["fieldRef"].split("[")[1].split("]")[0])
        warned[cases[index]] = warning["warning"]
    return warned


_CLASSES = re.compile(r"undefined field '[^']+'|found no matching overload for '[^']+'")


def _same_class(warning: str | None, refused: str | None) -> bool:
    """Both silent, or both refuse, the API server naming the field or function dragate names."""
    if warning is None or refused is None:
        return warning is None and refused is None
    named = _CLASSES.search(refused)
    return named is None or named.group(0) in warning


def _server_minor(cluster: Cluster) -> str:
    """The minor of the API server under test, as its /version says."""
    version = json.loads(cluster.kubectl("get", "--raw", "/version").stdout)
    return supported_minor(f"{version['major']}.{version['minor'].rstrip('+')}")


def _dragate_refuses(minor: str, kind: str, expression: str) -> str | None:
    (environment,) = [e for e in validation_types(minor) if e.name == kind]
    return compile_cel(expression, VALIDATION_VARIABLES, (environment,))[1]


def test_the_table_has_both_answers_for_every_kind() -> None:
    for kind in RULE_KINDS:
        refused = {CASES[case][2] for case in _cases(kind)}
        assert refused == {True, False}, kind
    assert len(CASES) >= 20


@pytest.mark.kube_matrix
@pytest.mark.parametrize("kind", RULE_KINDS)
def test_dragate_refuses_what_the_api_server_warns_about(kube_cluster: Cluster, kind: str) -> None:
    warned, minor = _warned(kube_cluster, kind), _server_minor(kube_cluster)
    disagreements = []
    for case in _cases(kind):
        expression, expected = CASES[case][1], CASES[case][2]
        refused = _dragate_refuses(minor, kind, expression)
        if not _same_class(warned.get(case), refused) or (case in warned) != expected:
            disagreements.append(
                f"{case}: {expression!r}\n  api server: {warned.get(case)}\n  dragate: {refused}"
            )
    assert not disagreements, "\n".join(disagreements)


@pytest.mark.kube_matrix
def test_the_pinned_schemas_are_what_the_api_server_serves(kube_cluster: Cluster) -> None:
    """Each supported minor's pinned schemas, byte for byte, as its own API server serves them
    (regenerate with `python3 -m tests.kube_schema_pin DIR MINOR`)."""
    served = [
        json.loads(kube_cluster.kubectl("get", "--raw", path).stdout) for path in DOCUMENTS.values()
    ]
    minor = _server_minor(kube_cluster)
    assert dumps(compact(served)) == pinned_path(minor).read_text(encoding="utf-8")
    assert pinned_path(minor).parts[-3:] == schemas_file(minor)
