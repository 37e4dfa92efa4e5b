"""Fields and API versions judged against the target Kubernetes minor's pinned schemas."""

from __future__ import annotations

from typing import Any

import pytest
from lint.dra_objects import GPU, claim, exactly, pod, template

from webhook.lint import ERROR, WARNING, Known, lint_object
from webhook.policy.kubetypes import pinned_schemas
from webhook.types.kubeversions import SUPPORTED

SCHEMAS = {minor: pinned_schemas(minor) for minor in SUPPORTED}
FIELD_RULES = ("field-needs-newer-kubernetes", "field-gone-in-kubernetes")
VERSION_RULES = (*FIELD_RULES, "deprecated-api")
DERIVED = [{"name": "x", "expression": "1"}]


def known(target: str) -> Known:
    return Known(kube_version=target, schemas=SCHEMAS)


def deployment(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d"},
        "spec": {"template": {"spec": {"containers": [{"name": "m"}], **spec}}},
    }


def findings(
    obj: dict[str, Any], target: str, rules: tuple[str, ...] = VERSION_RULES
) -> list[tuple[str, str, str, str]]:
    return [
        (f.rule, f.severity, f.dotted_path(), f.message)
        for f in lint_object(obj, known(target))
        if f.rule in rules
    ]


def needs(path: str, later: str, target: str) -> tuple[str, str, str, str]:
    message = f"{path} needs Kubernetes {later} (target {target})"
    return ("field-needs-newer-kubernetes", ERROR, path, message)


FIELD_CASES: list[tuple[str, dict[str, Any], str, list[tuple[str, str, str, str]]]] = [
    (
        "exactly-field-of-1.37-on-1.36",
        claim(exactly(derivedAttributes=DERIVED)),
        "1.36",
        [needs("spec.devices.requests[0].exactly.derivedAttributes", "1.37", "1.36")],
    ),
    (
        "exactly-field-of-1.37-on-1.35",
        claim(exactly(derivedAttributes=DERIVED)),
        "1.35",
        [needs("spec.devices.requests[0].exactly.derivedAttributes", "1.37", "1.35")],
    ),
    ("exactly-field-of-1.37-on-1.37", claim(exactly(derivedAttributes=DERIVED)), "1.37", []),
    (
        "template-subrequest-field-of-1.37",
        template(
            {
                "name": "gpu",
                "firstAvailable": [
                    {"name": "a", "deviceClassName": GPU, "derivedAttributes": DERIVED}
                ],
            }
        ),
        "1.36",
        [
            needs(
                "spec.spec.devices.requests[0].firstAvailable[0].derivedAttributes",
                "1.37",
                "1.36",
            )
        ],
    ),
    (
        "pod-field-of-1.36-on-1.35",
        pod([], [], schedulingGroup={"podGroupName": "g"}),
        "1.35",
        [needs("spec.schedulingGroup", "1.36", "1.35")],
    ),
    ("pod-field-of-1.36-on-1.36", pod([], [], schedulingGroup={"podGroupName": "g"}), "1.36", []),
    (
        "workload-pod-template-field-of-1.36",
        deployment(schedulingGroup={"podGroupName": "g"}),
        "1.35",
        [needs("spec.template.spec.schedulingGroup", "1.36", "1.35")],
    ),
    (
        "pod-field-gone-after-1.35",
        pod([], [], workloadRef={"name": "w"}),
        "1.36",
        [
            (
                "field-gone-in-kubernetes",
                ERROR,
                "spec.workloadRef",
                "spec.workloadRef is not in Kubernetes 1.36 (target); 1.35 is the last minor "
                "with it",
            )
        ],
    ),
    ("pod-field-of-1.35-on-1.35", pod([], [], workloadRef={"name": "w"}), "1.35", []),
    # a field no supported minor has is no version's business
    ("field-of-no-minor", claim(exactly(bogus=1)), "1.35", []),
    ("pod-field-of-no-minor", pod([], [], bogus=1), "1.35", []),
    # the pinned schemas are resource.k8s.io/v1: other versions are judged by shape rules
    (
        "v1beta2-not-walked",
        claim(exactly(derivedAttributes=DERIVED), version="v1beta2"),
        "1.36",
        [],
    ),
    # free-form maps (labels) hold any key
    (
        "free-form-map",
        pod([], [], nodeSelector={"schedulingGroup": "x"}),
        "1.35",
        [],
    ),
]


@pytest.mark.parametrize(
    ("obj", "target", "expected"),
    [c[1:] for c in FIELD_CASES],
    ids=[c[0] for c in FIELD_CASES],
)
def test_fields_are_judged_against_the_target_minor(
    obj: dict[str, Any], target: str, expected: list[tuple[str, str, str, str]]
) -> None:
    assert findings(obj, target, FIELD_RULES) == expected


def test_no_target_no_field_findings() -> None:
    obj = claim(exactly(derivedAttributes=DERIVED))
    assert [f for f in lint_object(obj) if f.rule in VERSION_RULES] == []


def deprecated(version: str, target: str) -> tuple[str, str, str, str]:
    return (
        "deprecated-api",
        WARNING,
        "apiVersion",
        f"resource.k8s.io/{version} is deprecated since resource.k8s.io/v1 (Kubernetes 1.34); "
        f"Kubernetes {target} serves it only when enabled "
        f"(`--runtime-config=resource.k8s.io/{version}=true`)",
    )


DEVICE_CLASS = {
    "apiVersion": "resource.k8s.io/v1beta2",
    "kind": "DeviceClass",
    "metadata": {"name": GPU},
    "spec": {},
}

API_CASES: list[tuple[str, dict[str, Any], str, list[tuple[str, str, str, str]]]] = [
    (
        "v1beta1-claim-on-1.35",
        claim({"name": "gpu", "deviceClassName": GPU}, version="v1beta1"),
        "1.35",
        [deprecated("v1beta1", "1.35")],
    ),
    (
        "v1beta2-template-on-1.37",
        template(exactly(), version="v1beta2"),
        "1.37",
        [deprecated("v1beta2", "1.37")],
    ),
    ("v1beta2-class-on-1.36", DEVICE_CLASS, "1.36", [deprecated("v1beta2", "1.36")]),
    ("v1-claim", claim(exactly()), "1.35", []),
    # alpha versions are `removed-api`'s
    ("v1alpha3-claim", claim(exactly(), version="v1alpha3"), "1.35", []),
]


@pytest.mark.parametrize(
    ("obj", "target", "expected"),
    [c[1:] for c in API_CASES],
    ids=[c[0] for c in API_CASES],
)
def test_beta_resource_versions_are_deprecated_for_the_target(
    obj: dict[str, Any], target: str, expected: list[tuple[str, str, str, str]]
) -> None:
    assert findings(obj, target) == expected
