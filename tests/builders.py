"""Builders for the objects tests keep making: claims in each API version, pods, templates."""

from __future__ import annotations

from typing import Any

V1 = "resource.k8s.io/v1"
V1BETA2 = "resource.k8s.io/v1beta2"
V1BETA1 = "resource.k8s.io/v1beta1"


def exact(
    name: str = "gpu",
    device_class: str = "gpu.nvidia.com",
    count: int | None = 1,
    *,
    mode: str | None = None,
    admin: bool | None = None,
    selectors: tuple[str, ...] = (),
) -> dict[str, Any]:
    """A request's fields, without the version-specific wrapping."""
    fields: dict[str, Any] = {"deviceClassName": device_class}
    if count is not None:
        fields["count"] = count
    if mode is not None:
        fields["allocationMode"] = mode
    if admin is not None:
        fields["adminAccess"] = admin
    if selectors:
        fields["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    return {"name": name, **fields}


def request(fields: dict[str, Any], version: str = V1) -> dict[str, Any]:
    """A request in the shape of `version`: flat for v1beta1, under `exactly:` otherwise."""
    if version == V1BETA1:
        return dict(fields)
    name = fields["name"]
    return {"name": name, "exactly": {k: v for k, v in fields.items() if k != "name"}}


def first_available(name: str, *subs: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "firstAvailable": list(subs)}


def claim(
    *requests: dict[str, Any],
    name: str = "claim",
    namespace: str = "team-a",
    version: str = V1,
) -> dict[str, Any]:
    return {
        "apiVersion": version,
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"devices": {"requests": list(requests)}},
    }


def template(
    *requests: dict[str, Any],
    name: str = "tmpl",
    namespace: str = "team-a",
    version: str = V1,
) -> dict[str, Any]:
    return {
        "apiVersion": version,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"spec": {"devices": {"requests": list(requests)}}},
    }


def pod(
    name: str = "pod",
    namespace: str = "team-a",
    *,
    claims: dict[str, str] | None = None,
    containers: dict[str, list[str]] | None = None,
    uid: str | None = None,
) -> dict[str, Any]:
    """A Pod whose `claims` maps pod-claim name -> template name, `containers` name -> claims."""
    containers = containers if containers is not None else {"main": list(claims or {})}
    spec: dict[str, Any] = {
        "containers": [
            {"name": c, "image": "busybox", "resources": {"claims": [{"name": n} for n in refs]}}
            for c, refs in containers.items()
        ]
    }
    if claims:
        spec["resourceClaims"] = [
            {"name": n, "resourceClaimTemplateName": t} for n, t in claims.items()
        ]
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    if uid:
        meta["uid"] = uid
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def namespace(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}
