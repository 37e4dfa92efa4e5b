"""Claim and template rules: shape per version, counts, limits, names, removed APIs."""

from __future__ import annotations

from typing import Any

import pytest
from lint.dra_objects import GPU, claim, exactly, found, rules, template

from webhook.lint import ERROR, lint_object

FLAT_GPU = {"name": "gpu", "deviceClassName": GPU, "count": 1}

# (object, rule, expected path of the finding or None for "no finding of this rule")
SHAPE_CASES: list[tuple[str, dict[str, Any], tuple[str | int, ...] | None]] = [
    # the example most articles show: a v1beta1 request pasted under v1
    ("v1-flat-request", claim(FLAT_GPU), ("spec", "devices", "requests", 0, "deviceClassName")),
    (
        "v1beta2-flat-request",
        claim(FLAT_GPU, version="v1beta2"),
        ("spec", "devices", "requests", 0, "deviceClassName"),
    ),
    (
        "v1-flat-template",
        template({"name": "gpu", "count": 2}, version="v1"),
        ("spec", "spec", "devices", "requests", 0, "count"),
    ),
    (
        "v1-flat-beside-exactly",
        claim({**exactly(), "count": 2}),
        ("spec", "devices", "requests", 0, "count"),
    ),
    ("v1-neither", claim({"name": "gpu"}), ("spec", "devices", "requests", 0)),
    (
        "v1-both",
        claim({**exactly(), "firstAvailable": [{"name": "a", "deviceClassName": GPU}]}),
        ("spec", "devices", "requests", 0, "firstAvailable"),
    ),
    (
        "v1beta1-exactly",
        claim(exactly(), version="v1beta1"),
        ("spec", "devices", "requests", 0, "exactly"),
    ),
    ("good-v1-exactly", claim(exactly(count=2)), None),
    (
        "good-v1-firstAvailable",
        claim({"name": "gpu", "firstAvailable": [{"name": "big", "deviceClassName": GPU}]}),
        None,
    ),
    ("good-v1beta2-exactly", claim(exactly(), version="v1beta2"), None),
    ("good-v1beta1-flat", claim(FLAT_GPU, version="v1beta1"), None),
    (
        "good-v1beta1-firstAvailable",
        claim(
            {"name": "g", "firstAvailable": [{"name": "a", "deviceClassName": GPU}]},
            version="v1beta1",
        ),
        None,
    ),
]


@pytest.mark.parametrize(
    ("obj", "path"), [c[1:] for c in SHAPE_CASES], ids=[c[0] for c in SHAPE_CASES]
)
def test_request_shape(obj: dict[str, Any], path: tuple[str | int, ...] | None) -> None:
    hits = found(obj, "request-shape")
    if path is None:
        assert hits == []
    else:
        assert [h.path for h in hits] == [path]
        assert hits[0].severity == ERROR and hits[0].fix


def test_flat_request_fix_wraps_in_exactly() -> None:
    (hit,) = found(claim(FLAT_GPU), "request-shape")
    assert "under resource.k8s.io/v1" in hit.message
    assert hit.fix.startswith("wrap them: `exactly: {deviceClassName: gpu.nvidia.com, count: 1}`")


def test_exactly_under_v1beta1_says_move_up() -> None:
    (hit,) = found(claim(exactly(count=2), version="v1beta1"), "request-shape")
    assert "deviceClassName: gpu.nvidia.com, count: 2" in hit.fix


COUNT_CASES: list[tuple[str, dict[str, Any], tuple[str | int, ...] | None]] = [
    (
        "count-with-All",
        claim(exactly(allocationMode="All", count=2)),
        ("spec", "devices", "requests", 0, "exactly", "count"),
    ),
    ("count-zero", claim(exactly(count=0)), ("spec", "devices", "requests", 0, "exactly", "count")),
    (
        "count-negative",
        claim(exactly(count=-1)),
        ("spec", "devices", "requests", 0, "exactly", "count"),
    ),
    (
        "count-string",
        claim(exactly(count="2")),
        ("spec", "devices", "requests", 0, "exactly", "count"),
    ),
    (
        "count-over-32",
        claim(exactly(count=33)),
        ("spec", "devices", "requests", 0, "exactly", "count"),
    ),
    (
        "bad-mode",
        claim(exactly(allocationMode="Some")),
        ("spec", "devices", "requests", 0, "exactly", "allocationMode"),
    ),
    (
        "flat-v1beta1-count-with-All",
        claim(
            {"name": "g", "deviceClassName": GPU, "allocationMode": "All", "count": 1},
            version="v1beta1",
        ),
        ("spec", "devices", "requests", 0, "count"),
    ),
    (
        "subrequest-count-zero",
        claim({"name": "g", "firstAvailable": [{"name": "a", "deviceClassName": GPU, "count": 0}]}),
        ("spec", "devices", "requests", 0, "firstAvailable", 0, "count"),
    ),
    ("good-All-without-count", claim(exactly(allocationMode="All")), None),
    ("good-count-32", claim(exactly(count=32)), None),
    ("good-default-count", claim(exactly()), None),
]


@pytest.mark.parametrize(
    ("obj", "path"), [c[1:] for c in COUNT_CASES], ids=[c[0] for c in COUNT_CASES]
)
def test_request_count(obj: dict[str, Any], path: tuple[str | int, ...] | None) -> None:
    hits = found(obj, "request-count")
    assert [h.path for h in hits] == ([] if path is None else [path])


def _many(n: int) -> list[dict[str, Any]]:
    return [exactly(name=f"r{i}") for i in range(n)]


def _selectors(n: int) -> list[dict[str, Any]]:
    return [{"cel": {"expression": "true"}} for _ in range(n)]


LIMIT_CASES: list[tuple[str, dict[str, Any], tuple[str | int, ...] | None]] = [
    ("33-requests", claim(*_many(33)), ("spec", "devices", "requests", 32)),
    (
        "9-subrequests",
        claim(
            {
                "name": "g",
                "firstAvailable": [{"name": f"s{i}", "deviceClassName": GPU} for i in range(9)],
            }
        ),
        ("spec", "devices", "requests", 0, "firstAvailable", 8),
    ),
    (
        "33-selectors",
        claim(exactly(selectors=_selectors(33))),
        ("spec", "devices", "requests", 0, "exactly", "selectors", 32),
    ),
    (
        "33-constraints",
        claim(exactly(), constraints=[{"matchAttribute": "a.b/c"}] * 33),
        ("spec", "devices", "constraints", 32),
    ),
    (
        "class-33-selectors",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": "x"},
            "spec": {"selectors": _selectors(33)},
        },
        ("spec", "selectors", 32),
    ),
    ("good-32-requests", claim(*_many(32)), None),
    (
        "good-8-subrequests",
        claim(
            {
                "name": "g",
                "firstAvailable": [{"name": f"s{i}", "deviceClassName": GPU} for i in range(8)],
            }
        ),
        None,
    ),
    ("good-32-selectors", claim(exactly(selectors=_selectors(32))), None),
]


@pytest.mark.parametrize(
    ("obj", "path"), [c[1:] for c in LIMIT_CASES], ids=[c[0] for c in LIMIT_CASES]
)
def test_request_limits(obj: dict[str, Any], path: tuple[str | int, ...] | None) -> None:
    hits = found(obj, "request-limits")
    assert [h.path for h in hits] == ([] if path is None else [path])


NAME_CASES: list[tuple[str, dict[str, Any], int]] = [
    ("uppercase", claim(exactly(name="GPU")), 1),
    ("underscore", claim(exactly(name="my_gpu")), 1),
    ("dot", claim(exactly(name="gpu.0")), 1),
    ("too-long", claim(exactly(name="a" * 64)), 1),
    ("missing", claim({"exactly": {"deviceClassName": GPU}}), 1),
    ("duplicate", claim(exactly(name="gpu"), exactly(name="gpu")), 1),
    (
        "bad-subrequest",
        claim({"name": "g", "firstAvailable": [{"name": "Big", "deviceClassName": GPU}]}),
        1,
    ),
    (
        "duplicate-subrequest",
        claim(
            {
                "name": "g",
                "firstAvailable": [
                    {"name": "a", "deviceClassName": GPU},
                    {"name": "a", "deviceClassName": "x"},
                ],
            }
        ),
        1,
    ),
    ("good", claim(exactly(name="gpu-0"), exactly(name="nic")), 0),
    ("good-63", claim(exactly(name="a" * 63)), 0),
]


@pytest.mark.parametrize(
    ("obj", "count"), [c[1:] for c in NAME_CASES], ids=[c[0] for c in NAME_CASES]
)
def test_request_name(obj: dict[str, Any], count: int) -> None:
    assert len(found(obj, "request-name")) == count


ADMIN_CASES: list[tuple[str, dict[str, Any], int]] = [
    (
        "subrequest-adminAccess",
        claim(
            {
                "name": "g",
                "firstAvailable": [{"name": "a", "deviceClassName": GPU, "adminAccess": True}],
            }
        ),
        1,
    ),
    (
        "subrequest-adminAccess-false",
        claim(
            {
                "name": "g",
                "firstAvailable": [{"name": "a", "deviceClassName": GPU, "adminAccess": False}],
            }
        ),
        1,
    ),
    ("good-exactly-adminAccess", claim(exactly(adminAccess=True, allocationMode="All")), 0),
]


@pytest.mark.parametrize(
    ("obj", "count"), [c[1:] for c in ADMIN_CASES], ids=[c[0] for c in ADMIN_CASES]
)
def test_admin_access_subrequest(obj: dict[str, Any], count: int) -> None:
    hits = found(obj, "admin-access-subrequest")
    assert len(hits) == count
    if hits:
        assert hits[0].path[-1] == "adminAccess"


def _obj(api_version: str, kind: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}, "spec": spec}


REMOVED_CASES: list[tuple[str, dict[str, Any], tuple[str | int, ...] | None]] = [
    ("ResourceClass", _obj("resource.k8s.io/v1alpha2", "ResourceClass", driverName="x"), ("kind",)),
    ("PodSchedulingContext", _obj("resource.k8s.io/v1alpha2", "PodSchedulingContext"), ("kind",)),
    (
        "v1alpha2-claim",
        _obj("resource.k8s.io/v1alpha2", "ResourceClaim", resourceClassName="gpu"),
        ("apiVersion",),
    ),
    ("v1alpha3-claim", claim(FLAT_GPU, version="v1alpha3"), ("apiVersion",)),
    ("v1alpha3-class", _obj("resource.k8s.io/v1alpha3", "DeviceClass"), ("apiVersion",)),
    (
        "parametersRef",
        _obj(
            "resource.k8s.io/v1",
            "ResourceClaim",
            parametersRef={"kind": "X", "name": "y"},
            devices={"requests": []},
        ),
        ("spec", "parametersRef"),
    ),
    (
        "spec-controller",
        _obj("resource.k8s.io/v1", "ResourceClaim", controller="x"),
        ("spec", "controller"),
    ),
    ("good-v1alpha3-DeviceTaintRule", _obj("resource.k8s.io/v1alpha3", "DeviceTaintRule"), None),
    ("good-v1-claim", claim(exactly()), None),
]


@pytest.mark.parametrize(
    ("obj", "path"), [c[1:] for c in REMOVED_CASES], ids=[c[0] for c in REMOVED_CASES]
)
def test_removed_api(obj: dict[str, Any], path: tuple[str | int, ...] | None) -> None:
    paths = [h.path for h in found(obj, "removed-api")]
    assert (path in paths) if path is not None else paths == []


def test_alpha2_claim_reports_both_version_and_classic_field() -> None:
    obj = _obj("resource.k8s.io/v1alpha2", "ResourceClaim", resourceClassName="gpu")
    assert len(found(obj, "removed-api")) == 2


CONSTRAINT_CASES: list[tuple[str, str, str | None]] = [
    ("no-domain", "pcieRoot", "constraint-attribute"),
    ("no-domain-nvidia", "parentUUID", "constraint-attribute"),
    ("stale-pcieBusID", "gpu.nvidia.com/pcieBusID", "stale-attribute"),
    ("good-pcieRoot", "resource.kubernetes.io/pcieRoot", None),
    ("good-parentUUID", "gpu.nvidia.com/parentUUID", None),
]


@pytest.mark.parametrize(
    ("attr", "rule"), [c[1:] for c in CONSTRAINT_CASES], ids=[c[0] for c in CONSTRAINT_CASES]
)
def test_constraint_attribute(attr: str, rule: str | None) -> None:
    obj = claim(exactly(), constraints=[{"requests": ["gpu"], "matchAttribute": attr}])
    got = [r for r in rules(obj) if r in ("constraint-attribute", "stale-attribute")]
    assert got == ([rule] if rule else [])


def test_pcie_root_fix_names_standard_domain() -> None:
    obj = claim(exactly(), constraints=[{"matchAttribute": "pcieRoot"}])
    (hit,) = found(obj, "constraint-attribute")
    assert "resource.kubernetes.io/pcieRoot" in hit.fix


def test_nvidia_quickstart_claims_are_clean() -> None:
    # shapes of NVIDIA's demo/specs/quickstart v1 examples
    single = template(exactly())
    mig = template(
        exactly(
            name="mig-1g-5gb-0",
            device_class="mig.nvidia.com",
            selectors=[
                {"cel": {"expression": "device.attributes['gpu.nvidia.com'].profile == '1g.5gb'"}}
            ],
        ),
    )
    assert lint_object(single) == []
    assert lint_object(mig) == []
