"""Pod and workload rules: pod claims and the containers that name them."""

from __future__ import annotations

from typing import Any

import pytest
from lint.dra_objects import found, pod

from webhook.lint import lint_object

TEMPLATE = {"name": "gpu", "resourceClaimTemplateName": "single-gpu"}

SOURCE_CASES: list[tuple[str, dict[str, Any], tuple[str | int, ...] | None]] = [
    (
        "tombstoned-source",
        pod([{"name": "gpu", "source": {"resourceClaimTemplateName": "single-gpu"}}], ["gpu"]),
        ("spec", "resourceClaims", 0, "source"),
    ),
    (
        "both",
        pod([{**TEMPLATE, "resourceClaimName": "shared"}], ["gpu"]),
        ("spec", "resourceClaims", 0, "resourceClaimTemplateName"),
    ),
    ("neither", pod([{"name": "gpu"}], ["gpu"]), ("spec", "resourceClaims", 0)),
    (
        "bad-name",
        pod([{**TEMPLATE, "name": "GPU_0"}], ["GPU_0"]),
        ("spec", "resourceClaims", 0, "name"),
    ),
    ("good-template", pod([TEMPLATE], ["gpu"]), None),
    ("good-claim", pod([{"name": "gpu", "resourceClaimName": "shared"}], ["gpu"]), None),
]


@pytest.mark.parametrize(
    ("obj", "path"), [c[1:] for c in SOURCE_CASES], ids=[c[0] for c in SOURCE_CASES]
)
def test_pod_claim_source(obj: dict[str, Any], path: tuple[str | int, ...] | None) -> None:
    assert [h.path for h in found(obj, "pod-claim-source")] == ([] if path is None else [path])


def test_source_fix_moves_field_up() -> None:
    obj = pod([{"name": "gpu", "source": {"resourceClaimTemplateName": "single-gpu"}}], ["gpu"])
    (hit,) = found(obj, "pod-claim-source")
    assert (
        hit.fix
        == "move its field up one level: `{name: gpu, resourceClaimTemplateName: single-gpu}`"
    )


def _workload(kind: str, api_version: str, spec_path: tuple[str, ...]) -> dict[str, Any]:
    inner = pod([TEMPLATE], ["gpu", "gpus"])["spec"]
    body: dict[str, Any] = inner
    for step in reversed(spec_path):
        body = {step: body}
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": "w"}, **body}


REF_CASES: list[tuple[str, dict[str, Any], tuple[str | int, ...] | None]] = [
    (
        "pod-unknown-claim",
        pod([TEMPLATE], ["gpus"]),
        ("spec", "containers", 0, "resources", "claims", 0, "name"),
    ),
    (
        "pod-no-resourceClaims",
        pod([], ["gpu"]),
        ("spec", "containers", 0, "resources", "claims", 0, "name"),
    ),
    (
        "init-container",
        pod(
            [TEMPLATE], [], initContainers=[{"name": "i", "resources": {"claims": [{"name": "x"}]}}]
        ),
        ("spec", "initContainers", 0, "resources", "claims", 0, "name"),
    ),
    (
        "deployment",
        _workload("Deployment", "apps/v1", ("spec", "template", "spec")),
        ("spec", "template", "spec", "containers", 0, "resources", "claims", 1, "name"),
    ),
    (
        "job",
        _workload("Job", "batch/v1", ("spec", "template", "spec")),
        ("spec", "template", "spec", "containers", 0, "resources", "claims", 1, "name"),
    ),
    (
        "cronjob",
        _workload("CronJob", "batch/v1", ("spec", "jobTemplate", "spec", "template", "spec")),
        (
            "spec",
            "jobTemplate",
            "spec",
            "template",
            "spec",
            "containers",
            0,
            "resources",
            "claims",
            1,
            "name",
        ),
    ),
    ("good", pod([TEMPLATE], ["gpu"]), None),
    ("good-no-claims", pod([], []), None),
    (
        "not-a-workload",
        {**_workload("Deployment", "example.com/v1", ("spec", "template", "spec"))},
        None,
    ),
]


@pytest.mark.parametrize(("obj", "path"), [c[1:] for c in REF_CASES], ids=[c[0] for c in REF_CASES])
def test_pod_claim_ref(obj: dict[str, Any], path: tuple[str | int, ...] | None) -> None:
    assert [h.path for h in found(obj, "pod-claim-ref")] == ([] if path is None else [path])


def test_ref_message_lists_known_claims() -> None:
    (hit,) = found(pod([TEMPLATE], ["gpus"]), "pod-claim-ref")
    assert "`gpus`" in hit.message and "known: gpu" in hit.message


def test_nvidia_quickstart_pod_is_clean() -> None:
    obj = pod([TEMPLATE], ["gpu"], tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists"}])
    assert lint_object(obj) == []
