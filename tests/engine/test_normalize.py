"""Every API version's request shape normalizes to the same DeviceRequest."""

from __future__ import annotations

import copy
from dataclasses import fields, replace
from typing import Any

import pytest
from builders import V1, V1BETA1, V1BETA2, claim, exact, first_available, pod, request, template

from webhook.engine.normalize import ObjectError, claim_spec, pod_claims, template_claim_spec
from webhook.types import AllocationMode, DeviceRequest, Taint, Toleration, tolerated

VERSIONS = [V1, V1BETA2, V1BETA1]


@pytest.mark.parametrize("version", VERSIONS, ids=["v1", "v1beta2", "v1beta1"])
@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        (exact(count=2), DeviceRequest("gpu", "gpu.nvidia.com", 2)),
        (exact(count=None), DeviceRequest("gpu", "gpu.nvidia.com", 1)),
        (
            exact(count=None, mode="All"),
            DeviceRequest("gpu", "gpu.nvidia.com", 0, AllocationMode.ALL),
        ),
        (exact(admin=True), DeviceRequest("gpu", "gpu.nvidia.com", 1, admin_access=True)),
        (
            exact(selectors=("device.driver == 'x'",)),
            DeviceRequest("gpu", "gpu.nvidia.com", 1, selectors=("device.driver == 'x'",)),
        ),
    ],
    ids=["count", "default-count", "all", "admin", "selectors"],
)
def test_exact_requests_are_the_same_in_every_version(
    version: str, fields: dict[str, Any], expected: DeviceRequest
) -> None:
    spec = claim_spec(claim(request(fields, version), version=version), "c")
    assert spec.requests == (expected,)


@pytest.mark.parametrize("version", VERSIONS, ids=["v1", "v1beta2", "v1beta1"])
def test_first_available_keeps_alternatives_named_request_slash_sub(version: str) -> None:
    obj = claim(
        first_available("gpu", exact("big", count=2), exact("small", "mig.nvidia.com", 1)),
        version=version,
    )
    (req,) = claim_spec(obj, "c").requests
    assert req.device_class == ""
    assert [(a.name, a.device_class, a.count) for a in req.leaves()] == [
        ("gpu/big", "gpu.nvidia.com", 2),
        ("gpu/small", "mig.nvidia.com", 1),
    ]


TAINTED = {"key": "gpu.nvidia.com/ecc", "value": "bad", "effect": "NoSchedule"}


@pytest.mark.parametrize("version", VERSIONS, ids=["v1", "v1beta2", "v1beta1"])
@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ([], ()),
        ([TAINTED], (Toleration("gpu.nvidia.com/ecc", "Equal", "bad", "NoSchedule"),)),
        (
            [{"key": "k", "operator": "Exists"}, {"operator": "Exists", "effect": "NoExecute"}],
            (Toleration("k", "Exists"), Toleration("", "Exists", "", "NoExecute")),
        ),
    ],
    ids=["none", "equal-by-default", "exists"],
)
def test_tolerations_are_read_in_every_version_and_subrequest(
    version: str, raw: list[dict[str, Any]], expected: tuple[Toleration, ...]
) -> None:
    fields = {**exact(), "tolerations": raw}
    obj = claim(request(fields, version), first_available("g", fields), version=version)
    plain, alternatives = claim_spec(obj, "c").requests
    assert plain.tolerations == expected == alternatives.alternatives[0].tolerations
    if expected:
        assert hash(plain) != hash(replace(plain, tolerations=()))


@pytest.mark.parametrize(
    ("taint", "toleration", "allowed"),
    [
        (Taint("k", "v", "NoSchedule"), None, False),
        (Taint("k", "v", "NoExecute"), None, False),
        (Taint("k", "v", "None"), None, True),
        (Taint("k", "v", "PreferNoSchedule"), None, True),
        (Taint("k", "v", "NoSchedule"), Toleration("k", "Equal", "v"), True),
        (Taint("k", "v", "NoSchedule"), Toleration("k", "Equal", "w"), False),
        (Taint("k", "v", "NoSchedule"), Toleration("k", "Exists"), True),
        (Taint("k", "v", "NoSchedule"), Toleration("", "Exists"), True),
        (Taint("k", "v", "NoSchedule"), Toleration("k", "Exists", "", "NoExecute"), False),
        (Taint("k", "v", "NoExecute"), Toleration("j", "Exists"), False),
        (Taint("k", "", "NoSchedule"), Toleration("k"), True),
    ],
    ids=[
        "noschedule",
        "noexecute",
        "none-effect",
        "unknown-effect",
        "equal",
        "other-value",
        "exists",
        "wildcard",
        "other-effect",
        "other-key",
        "empty-value",
    ],
)
def test_a_taint_keeps_a_device_unless_tolerated(
    taint: Taint, toleration: Toleration | None, allowed: bool
) -> None:
    assert tolerated((taint,), () if toleration is None else (toleration,)) is allowed


def test_template_spec_is_read_from_spec_spec() -> None:
    spec = template_claim_spec(template(request(exact(count=3))), "t")
    assert spec.requests[0].count == 3


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        (
            claim({"name": "gpu", "deviceClassName": "x"}),
            "exactly one of `exactly` or `firstAvailable`",
        ),
        (claim(request(exact(count="two"))), "expected an integer"),  # type: ignore[arg-type]
        (claim(request(exact(mode="Some"))), "unknown allocation mode"),
        (claim({"exactly": {"deviceClassName": "x"}}), "name: required string"),
        (claim(request({"name": "gpu"})), "deviceClassName: required string"),
        ({"kind": "ResourceClaim", "spec": {"devices": {"requests": "nope"}}}, "expected a list"),
        ({"kind": "ResourceClaim", "spec": []}, "expected an object"),
        (claim(request({**exact(), "selectors": [{"cel": {}}]})), "expression: required string"),
    ],
    ids=[
        "v1-flat",
        "count-type",
        "mode",
        "no-name",
        "no-class",
        "requests-type",
        "spec-type",
        "selector",
    ],
)
def test_malformed_claims_raise_object_error_with_path(obj: dict[str, Any], message: str) -> None:
    with pytest.raises(ObjectError, match=message):
        claim_spec(obj, "c")


def test_pod_claims_list_containers_that_use_each_claim() -> None:
    obj = pod(
        claims={"gpu-a": "t1", "gpu-b": "t2"},
        containers={"a": ["gpu-a"], "b": ["gpu-b", "gpu-a"]},
    )
    obj["spec"]["initContainers"] = [{"name": "init", "resources": {"claims": [{"name": "gpu-b"}]}}]
    claims = {c.name: c for c in pod_claims(obj)}
    assert claims["gpu-a"].containers == ("a", "b")
    assert claims["gpu-b"].containers == ("init", "b")
    assert claims["gpu-a"].template_name == "t1"


def test_pod_claim_by_name_has_no_template() -> None:
    obj = pod()
    obj["spec"]["resourceClaims"] = [{"name": "shared", "resourceClaimName": "big-claim"}]
    (only,) = pod_claims(obj)
    assert (only.template_name, only.claim_name) == (None, "big-claim")


@pytest.mark.parametrize("version", VERSIONS, ids=["v1", "v1beta2", "v1beta1"])
def test_a_remembered_hash_is_the_fields_hash(version: str) -> None:
    """ClaimSpec and DeviceRequest compute their (frozen) hash once; it must stay the one a
    dataclass would generate, so equal specs from two normalizations are one memo key."""
    obj = claim(
        request(exact(count=2, selectors=("device.driver == 'x'",)), version),
        first_available("g", exact("a"), exact("b", "mig.nvidia.com")),
        version=version,
    )
    first, second = claim_spec(obj, "c"), claim_spec(copy.deepcopy(obj), "c")
    assert first == second and first is not second and hash(first) == hash(second)
    assert hash(first) == hash(tuple(getattr(first, f.name) for f in fields(first)))
    for req in (*first.requests, *first.requests[1].alternatives):
        assert hash(req) == hash(tuple(getattr(req, f.name) for f in fields(req)))
    assert hash(replace(first, label="d")) != hash(first)
