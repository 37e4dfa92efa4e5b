"""Objects at and just past the limits Kubernetes enforces: shared by the unit tests of
webhook/pipeline/limits.py and by the e2e test where the real kube-apiserver is the oracle.
Every limit is read from the one table, webhook/types/kubelimits.py."""

from __future__ import annotations

from typing import Any

import orjson

from webhook.types.kubelimits import (
    DEVICE_REQUESTS_MAX,
    DEVICE_SELECTORS_MAX,
    FIRST_AVAILABLE_MAX,
    OBJECT_BYTES_MAX,
)


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


def pod(names: list[str], init: list[str] = (), gpus: int = 0) -> dict[str, Any]:  # type: ignore[assignment]
    def containers(ns: list[str]) -> list[dict[str, Any]]:
        limits = {"resources": {"limits": {"nvidia.com/gpu": gpus}}} if gpus else {}
        return [{"name": n, "image": "busybox", **limits} for n in ns]

    spec: dict[str, Any] = {"containers": containers(names)}
    if init:
        spec["initContainers"] = containers(list(init))
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
            "spec": spec}  # fmt: skip


def legacy_pod(containers: int) -> dict[str, Any]:
    """A Pod of `containers` uniquely named containers asking for one GPU each."""
    obj = pod([f"gpu-worker-{i}" for i in range(containers)], gpus=1)
    obj["metadata"]["name"] = f"legacy-{containers}"
    return obj


def sized_pod(name: str, size: int, fill: str = "x") -> dict[str, Any]:
    """A one-container Pod whose argument, made of `fill`, brings its compact JSON to `size`
    bytes, with each escaped `fill` character counted once."""
    obj = pod(["c"])
    obj["metadata"]["name"] = name
    base = len(orjson.dumps(obj)) + len(',"args":[""]')
    obj["spec"]["containers"][0]["args"] = [fill * (size - base)]
    return obj


def deployment(names: list[str]) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"a": "b"}},
                     "template": {"metadata": {"labels": {"a": "b"}},
                                  "spec": pod(names)["spec"]}}}  # fmt: skip


REQUESTS, SELECTORS, ALTERNATIVES = DEVICE_REQUESTS_MAX, DEVICE_SELECTORS_MAX, FIRST_AVAILABLE_MAX
CASES = {
    # id: (object, the problem's words or None when within every limit)
    "claim-32-requests": (claim(REQUESTS), None),
    "claim-33-requests": (
        claim(REQUESTS + 1),
        f"spec.devices.requests has {REQUESTS + 1} items, at most {REQUESTS}",
    ),
    "claim-32-selectors": (claim(1, selectors=SELECTORS), None),
    "claim-33-selectors": (
        claim(1, selectors=SELECTORS + 1),
        f"requests[0].exactly.selectors has {SELECTORS + 1} items",
    ),
    "claim-8-alternatives": (claim(1, alternatives=ALTERNATIVES), None),
    "claim-9-alternatives": (
        claim(1, alternatives=ALTERNATIVES + 1),
        f"requests[1].firstAvailable has {ALTERNATIVES + 1}",
    ),
    "template-33-requests": (
        template(REQUESTS + 1),
        f"spec.spec.devices.requests has {REQUESTS + 1} items",
    ),
    "pod-distinct-names": (pod([f"c{i}" for i in range(500)]), None),
    "pod-4000-same-names": (pod(["c"] * 4000), "container name 'c' is used twice"),
    "pod-init-and-app-same-name": (pod(["c"], init=["c"]), "container name 'c' is used twice"),
    "deployment-same-names": (deployment(["a", "a"]), "container name 'a' is used twice"),
    "malformed-left-to-the-engine": ({"kind": "Pod", "spec": {"containers": {"x": 1}}}, None),
}

TOO_BIG = f"more than the {OBJECT_BYTES_MAX:,} bytes (1.5 MiB) etcd stores in one write"
SIZE_CASES = {
    # id: (object, the problem's words or None), judged by storing the object for real (a
    # dry run never reaches etcd, whose request limit this is)
    "pod-just-under-the-size-limit": (sized_pod("under", OBJECT_BYTES_MAX - 16384), None),
    "pod-just-over-the-size-limit": (sized_pod("over", OBJECT_BYTES_MAX + 1024), TOO_BIG),
    "pod-of-escaped-quotes-stored-unescaped": (
        sized_pod("quotes", 2**20, fill='"'),  # 2 MiB of JSON, 1 MiB of data
        None,
    ),
}
LEGACY_CONTAINERS = 34_000
"""A legacy Pod this many GPU containers large is 2.9 MiB of JSON: under the API server's
3 MiB body limit, nearly twice what etcd stores."""
