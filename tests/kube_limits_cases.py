"""Objects at and just past the limits Kubernetes validates: shared by the unit tests of
webhook/admission/bounds.py and by the e2e test where the real kube-apiserver is the oracle."""

from __future__ import annotations

from typing import Any


def exact(name: str, selectors: int = 0) -> dict[str, Any]:
    cel = [{"cel": {"expression": "true"}}] * selectors
    body: dict[str, Any] = {"deviceClassName": "gpu.example.com", "count": 1}
    if selectors:
        body["selectors"] = cel
    return {"name": name, "exactly": body}


def claim(requests: int = 1, selectors: int = 0, alternatives: int = 0) -> dict[str, Any]:
    items = [exact(f"r{i}", selectors) for i in range(requests)]
    if alternatives:
        subs = [
            {"name": f"s{i}", "deviceClassName": "gpu.example.com"} for i in range(alternatives)
        ]
        items.append({"name": "alt", "firstAvailable": subs})
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "c", "namespace": "default"},
            "spec": {"devices": {"requests": items}}}  # fmt: skip


def template(requests: int) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "t", "namespace": "default"},
            "spec": {"spec": claim(requests)["spec"]}}  # fmt: skip


def pod(names: list[str], init: list[str] = ()) -> dict[str, Any]:  # type: ignore[assignment]
    def containers(ns: list[str]) -> list[dict[str, str]]:
        return [{"name": n, "image": "busybox"} for n in ns]

    spec: dict[str, Any] = {"containers": containers(names)}
    if init:
        spec["initContainers"] = containers(list(init))
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
            "spec": spec}  # fmt: skip


def deployment(names: list[str]) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"a": "b"}},
                     "template": {"metadata": {"labels": {"a": "b"}},
                                  "spec": pod(names)["spec"]}}}  # fmt: skip


CASES = {
    # id: (object, the problem's words or None when within every limit)
    "claim-32-requests": (claim(32), None),
    "claim-33-requests": (claim(33), "spec.devices.requests has 33 items, at most 32"),
    "claim-32-selectors": (claim(1, selectors=32), None),
    "claim-33-selectors": (claim(1, selectors=33), "requests[0].selectors has 33 items"),
    "claim-8-alternatives": (claim(1, alternatives=8), None),
    "claim-9-alternatives": (claim(1, alternatives=9), "requests[1].firstAvailable has 9"),
    "template-33-requests": (template(33), "spec.spec.devices.requests has 33 items"),
    "pod-distinct-names": (pod([f"c{i}" for i in range(500)]), None),
    "pod-4000-same-names": (pod(["c"] * 4000), "container name 'c' is used twice"),
    "pod-init-and-app-same-name": (pod(["c"], init=["c"]), "container name 'c' is used twice"),
    "deployment-same-names": (deployment(["a", "a"]), "container name 'a' is used twice"),
    "malformed-left-to-the-engine": ({"kind": "Pod", "spec": {"containers": {"x": 1}}}, None),
}
