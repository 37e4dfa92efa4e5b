"""The claim kube-scheduler makes for a Pod's DRA-backed extended resources (KEP-5004).

The request tables are kube-scheduler's own (`Test_createRequestsAndMappings_requests` in
pkg/scheduler/framework/plugins/dynamicresources, Kubernetes 1.37), with every name the
Pod asks for mapped as the test's class resolver maps it."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.engine.counting import holder_key
from webhook.engine.extended import (
    EXTENDED_CLAIM_ANNOTATION,
    class_by_resource,
    pod_special_claim,
    special_claim,
)

EXT = "example.com/gpu"


def container(requests: dict[str, Any], *, sidecar: bool = False, limits: bool = False) -> Any:
    made: dict[str, Any] = {
        "name": "c",
        "resources": {"limits" if limits else "requests": requests},
    }
    if sidecar:
        made["restartPolicy"] = "Always"
    return made


def pod(containers: list[Any], init: list[Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": containers}
    if init:
        spec["initContainers"] = init
    return {"apiVersion": "v1", "kind": "Pod", "spec": spec}


POD1 = pod([container({EXT: "1", EXT + "1": "2"})])
POD2 = pod([container({EXT: "1"}), container({EXT + "1": "2"})])
POD_INIT = pod([container({EXT: "1"})], init=[container({EXT + "init": "2"})])
POD_INIT2 = pod(
    [container({EXT: "1"})], init=[container({EXT + "init": "1"}), container({EXT + "init": "2"})]
)
POD_INIT3 = pod(
    [container({EXT: "1"})],
    init=[
        container({EXT + "init": "1"}),
        container({EXT + "init": "1"}, sidecar=True),
        container({EXT + "init": "2"}),
    ],
)
MAP = {EXT: "class"}
MAP2 = {EXT: "class", EXT + "1": "class1"}
MAP_INIT = {EXT: "class", EXT + "init": "classInit"}

UPSTREAM = [
    pytest.param(POD1, {}, [], id="nil"),
    pytest.param(POD1, MAP, [("container-0-request-0", "class", 1)], id="one-resource-match"),
    pytest.param(
        POD1,
        MAP2,
        [("container-0-request-0", "class", 1), ("container-0-request-1", "class1", 2)],
        id="two-resources-match",
    ),
    pytest.param(
        POD2,
        MAP2,
        [("container-0-request-0", "class", 1), ("container-1-request-0", "class1", 2)],
        id="two-containers-match",
    ),
    pytest.param(
        POD_INIT,
        MAP_INIT,
        [("container-0-request-0", "classInit", 2), ("container-1-request-0", "class", 1)],
        id="one-init-one-regular",
    ),
    pytest.param(
        POD_INIT2,
        MAP_INIT,
        [("container-1-request-0", "classInit", 2), ("container-2-request-0", "class", 1)],
        id="two-init-one-regular",
    ),
    pytest.param(
        POD_INIT3,
        MAP_INIT,
        [
            ("container-1-request-0", "classInit", 1),
            ("container-2-request-0", "classInit", 2),
            ("container-3-request-0", "class", 1),
        ],
        id="three-init-one-sidecar-one-regular",
    ),
    pytest.param(
        pod([container({EXT: "3"}), container({EXT: "1"})], init=[container({EXT: "4"})]),
        MAP,
        [("container-1-request-0", "class", 3), ("container-2-request-0", "class", 1)],
        id="init-reuses-the-regular-containers-devices",
    ),
    pytest.param(
        pod([container({EXT: "3"}), container({EXT: "1"})], init=[container({EXT: "5"})]),
        MAP,
        [
            ("container-0-request-0", "class", 1),
            ("container-1-request-0", "class", 3),
            ("container-2-request-0", "class", 1),
        ],
        id="init-asks-only-what-the-regular-containers-lack",
    ),
    pytest.param(
        pod([container({EXT: 2, "cpu": "1"}, limits=True)]),
        MAP,
        [("container-0-request-1", "class", 2)],
        id="limits-default-the-request-index-among-sorted-names",
    ),
    pytest.param(pod([container({EXT: "0"})]), MAP, [], id="zero-asks-nothing"),
    pytest.param(pod([container({EXT: "500m"})]), MAP, [], id="a-fraction-asks-nothing"),
    pytest.param(
        pod([container({EXT: "2000m"})]),
        MAP,
        [("container-0-request-0", "class", 2)],
        id="whole-millis-count",
    ),
]


@pytest.mark.parametrize(("the_pod", "mapping", "expected"), UPSTREAM)
def test_the_special_claim_asks_what_kube_scheduler_asks(
    the_pod: dict[str, Any], mapping: dict[str, str], expected: list[tuple[str, str, int]]
) -> None:
    spec = special_claim(the_pod, mapping)
    got = [(r.name, r.device_class, r.count) for r in spec.requests] if spec else []
    assert got == expected


def device_class(name: str, extended: str | None = None, created: str = "") -> dict[str, Any]:
    spec = {"extendedResourceName": extended} if extended else {}
    return {"metadata": {"name": name, "creationTimestamp": created}, "spec": spec}


CLASSES = [
    pytest.param(
        [device_class("gpu")], {"deviceclass.resource.kubernetes.io/gpu": "gpu"}, id="implicit-name"
    ),
    pytest.param(
        [
            device_class("old", EXT, "2026-01-01T00:00:00Z"),
            device_class("new", EXT, "2026-02-01T00:00:00Z"),
        ],
        {EXT: "new"},
        id="the-newer-class-wins",
    ),
    pytest.param(
        [
            device_class("b", EXT, "2026-01-01T00:00:00Z"),
            device_class("a", EXT, "2026-01-01T00:00:00Z"),
        ],
        {EXT: "a"},
        id="equal-age-the-lower-name-wins",
    ),
]


@pytest.mark.parametrize(("classes", "expected"), CLASSES)
def test_classes_map_names_as_kube_scheduler_resolves_them(
    classes: list[dict[str, Any]], expected: dict[str, str]
) -> None:
    mapping = class_by_resource({c["metadata"]["name"]: c for c in classes})
    assert expected.items() <= mapping.items()


def test_a_pod_without_a_domain_name_builds_no_mapping() -> None:
    classes = {"gpu": device_class("gpu", "nvidia.com/gpu")}
    assert pod_special_claim(pod([container({"cpu": "2", "memory": "1Gi"})]), classes) is None
    spec = pod_special_claim(
        pod([container({"deviceclass.resource.kubernetes.io/gpu": "1"})]), classes
    )
    assert spec is not None and spec.requests[0].device_class == "gpu"


def special(owner: dict[str, Any], annotated: bool = True) -> dict[str, Any]:
    annotations = {EXTENDED_CLAIM_ANNOTATION: "true"} if annotated else {}
    meta = {"name": "p-extended-resources-x", "namespace": "ns", "annotations": annotations}
    return {"metadata": {**meta, "ownerReferences": [owner]}}


POD_OWNER = {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u1", "controller": True}
HOLDERS = [
    pytest.param(special(POD_OWNER), "pod:u1/<extended-resources>", id="the-scheduler-s-claim"),
    pytest.param(
        special(POD_OWNER, annotated=False), "claim:ns/p-extended-resources-x", id="not-annotated"
    ),
    pytest.param(
        special({**POD_OWNER, "controller": False}),
        "claim:ns/p-extended-resources-x",
        id="not-the-controller",
    ),
]


@pytest.mark.parametrize(("claim", "expected"), HOLDERS)
def test_the_special_claim_is_held_where_its_pod_reserved(
    claim: dict[str, Any], expected: str
) -> None:
    assert holder_key(claim) == expected
