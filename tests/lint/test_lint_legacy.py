"""The `legacy-gpu-request` warning: device-plugin GPU requests left in manifests."""

from __future__ import annotations

from typing import Any

import pytest
from lint.dra_objects import found

from webhook.lint import lint_object

Path = tuple[str | int, ...]


def _container(resources: Any) -> dict[str, Any]:
    return {"name": "c", "image": "x", "resources": resources}


CASES: list[tuple[str, dict[str, Any], list[Path]]] = [
    (
        "pod-limit",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p"},
            "spec": {"containers": [_container({"limits": {"nvidia.com/gpu": 1}})]},
        },
        [("spec", "containers", 0, "resources", "limits", "nvidia.com/gpu")],
    ),
    (
        "mig-request",
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "spec": {
                "template": {
                    "spec": {
                        "containers": [_container({"requests": {"nvidia.com/mig-1g.10gb": 1}})]
                    }
                }
            },
        },
        [
            (
                "spec",
                "template",
                "spec",
                "containers",
                0,
                "resources",
                "requests",
                "nvidia.com/mig-1g.10gb",
            )
        ],
    ),
    (
        "unknown-crd",
        {
            "apiVersion": "example.com/v1",
            "kind": "Thing",
            "spec": {"runner": {"resources": {"limits": {"nvidia.com/gpu": 2}}}},
        },
        [("spec", "runner", "resources", "limits", "nvidia.com/gpu")],
    ),
    (
        "dra-claim",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "spec": {
                "containers": [_container({"claims": [{"name": "gpu"}]})],
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "t"}],
            },
        },
        [],
    ),
    (
        "quota",
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "spec": {"hard": {"requests.nvidia.com/gpu": 4}},
        },
        [],
    ),
    (
        "limitrange",
        {
            "apiVersion": "v1",
            "kind": "LimitRange",
            "spec": {"limits": [{"type": "Container", "max": {"nvidia.com/gpu": 1}}]},
        },
        [],
    ),
    (
        "other-vendor",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "spec": {
                "containers": [_container({"limits": {"amd.com/gpu": 1, "nvidia.com/gpus": 1}})]
            },
        },
        [],
    ),
    (
        "null-shapes",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": None,
            "spec": {"containers": [_container({"limits": None}), None]},
        },
        [],
    ),
]


@pytest.mark.parametrize(("obj", "paths"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_legacy_gpu_request(obj: dict[str, Any], paths: list[Path]) -> None:
    hits = found(obj, "legacy-gpu-request")
    assert [h.path for h in hits] == paths
    assert all(h.severity == "warning" and "dragate migrate" in h.fix for h in hits)


def test_is_a_warning_only() -> None:
    pod = CASES[0][1]
    assert {f.severity for f in lint_object(pod)} == {"warning"}
