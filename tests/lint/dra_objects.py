"""Small builders for the DRA objects the lint tests judge."""

from __future__ import annotations

from typing import Any

from webhook.lint import Finding, lint_object

GPU = "gpu.nvidia.com"


def claim(*requests: dict[str, Any], version: str = "v1", **devices: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"resource.k8s.io/{version}",
        "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "team-a"},
        "spec": {"devices": {"requests": list(requests), **devices}},
    }


def template(*requests: dict[str, Any], version: str = "v1") -> dict[str, Any]:
    return {
        "apiVersion": f"resource.k8s.io/{version}",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "t"},
        "spec": {"spec": {"devices": {"requests": list(requests)}}},
    }


def exactly(name: str = "gpu", device_class: str = GPU, **fields: Any) -> dict[str, Any]:
    return {"name": name, "exactly": {"deviceClassName": device_class, **fields}}


def selector(expression: str, device_class: str = GPU) -> dict[str, Any]:
    """A v1 claim with one request whose only selector is `expression`."""
    return claim(
        exactly(device_class=device_class, selectors=[{"cel": {"expression": expression}}])
    )


def pod(claims: list[dict[str, Any]], refs: list[str], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {
            "resourceClaims": claims,
            "containers": [
                {"name": "main", "image": "x", "resources": {"claims": [{"name": r} for r in refs]}}
            ],
            **spec,
        },
    }


def found(obj: dict[str, Any], rule: str) -> list[Finding]:
    return [f for f in lint_object(obj) if f.rule == rule]


def rules(obj: dict[str, Any]) -> list[str]:
    return [f.rule for f in lint_object(obj)]
