"""Mapping actions, native resources, names and node-label translation, table-driven."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.policy.loading import default_mappings
from webhook.rewrite import rewrite_object, rewrite_pod_spec
from webhook.rewrite.names import dns_label, template_name
from webhook.rewrite.nodes import translate_label
from webhook.types import LegacyResourceMapping, MappingAction, ResourceMapping


def pod(limits: dict[str, Any], **spec: Any) -> dict[str, Any]:
    container = {"name": "c", "image": "x", "resources": {"limits": limits}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [container], **spec},
    }


def mapping(action: MappingAction) -> tuple[LegacyResourceMapping, ...]:
    entry = ResourceMapping(device_class="gpu.nvidia.com", resource_name="nvidia.com/gpu")
    return (LegacyResourceMapping(name="m", action=action, resources=(entry,)),)


@pytest.mark.parametrize(
    ("action", "changed", "notes", "denied"),
    [
        (MappingAction.REWRITE, True, 1, 0),
        (MappingAction.WARN, False, 1, 0),
        (MappingAction.DENY, False, 0, 1),
        (MappingAction.IGNORE, False, 0, 0),
    ],
    ids=["rewrite", "warn", "deny", "ignore"],
)
def test_actions(action: MappingAction, changed: bool, notes: int, denied: int) -> None:
    result = rewrite_object(pod({"nvidia.com/gpu": 1}), mapping(action))
    assert (result.changed, len(result.notes), len(result.denied)) == (changed, notes, denied)


def test_action_override_wins() -> None:
    result = rewrite_object(
        pod({"nvidia.com/gpu": 1}), default_mappings(), action_override=MappingAction.DENY
    )
    assert not result.changed and result.denied


NATIVE_CASES = [
    pytest.param(None, True, False, "a DeviceClass maps it", id="auto-mapped-kept"),
    pytest.param(None, False, True, "", id="auto-unmapped-rewritten"),
    pytest.param(MappingAction.NATIVE, True, False, "a DeviceClass maps it", id="native-mapped"),
    pytest.param(MappingAction.NATIVE, False, False, "no DeviceClass", id="native-unmapped"),
    pytest.param(MappingAction.REWRITE, True, True, "", id="rewrite-mapped-rewritten"),
    pytest.param(MappingAction.WARN, True, False, "legacy GPU request", id="warn-mapped"),
    pytest.param(MappingAction.IGNORE, True, False, None, id="ignore-mapped"),
]


@pytest.mark.parametrize(("action", "mapped", "changed", "note"), NATIVE_CASES)
def test_a_mapped_resource_follows_the_action(
    action: MappingAction | None, mapped: bool, changed: bool, note: str | None
) -> None:
    """Auto (the default) keeps a name a DeviceClass maps (KEP-5004) and rewrites the rest;
    Native always keeps; an explicit Rewrite rewrites even a mapped name."""
    result = rewrite_object(
        pod({"nvidia.com/gpu": 1}),
        default_mappings(),
        native_resources=frozenset({"nvidia.com/gpu"} if mapped else ()),
        action_override=action,
    )
    assert result.changed is changed
    if note is None:
        assert not result.notes
    elif note:
        assert note in result.notes[0]


def test_namespace_argument_places_templates() -> None:
    result = rewrite_object(pod({"nvidia.com/gpu": 1}), default_mappings(), namespace="team-a")
    assert result.templates[0]["metadata"]["namespace"] == "team-a"


def test_rewrite_pod_spec_alone() -> None:
    spec = pod({"nvidia.com/gpu": 3})["spec"]
    result = rewrite_pod_spec(spec, default_mappings())
    assert result.object["resourceClaims"][0]["name"] == "gpu-c"
    assert "resourceClaims" not in spec


def test_claim_name_avoids_existing_claims() -> None:
    obj = pod({"nvidia.com/gpu": 1}, resourceClaims=[{"name": "gpu-c", "resourceClaimName": "x"}])
    result = rewrite_object(obj, default_mappings())
    assert [c["name"] for c in result.object["spec"]["resourceClaims"]] == ["gpu-c", "gpu-c-2"]


def test_same_request_shares_one_template() -> None:
    obj = pod({"nvidia.com/gpu": 1})
    obj["spec"]["containers"].append(
        {"name": "d", "image": "x", "resources": {"limits": {"nvidia.com/gpu": 1}}}
    )
    result = rewrite_object(obj, default_mappings())
    assert len(result.templates) == 1
    assert len(result.object["spec"]["resourceClaims"]) == 2


@pytest.mark.parametrize(
    ("text", "expected"),
    [("gpu-vllm", "gpu-vllm"), ("GPU_x", "gpu-x"), ("a" * 70, None)],
    ids=["plain", "sanitized", "truncated"],
)
def test_dns_label(text: str, expected: str | None) -> None:
    label = dns_label(text)
    assert len(label) <= 63
    if expected is not None:
        assert label == expected


def test_template_name_is_readable_without_selectors() -> None:
    request = {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 2}}
    assert template_name([request]) == "dragate-gpu-nvidia-com-2"


@pytest.mark.parametrize(
    ("key", "value", "faithful"),
    [
        ("nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB", True),
        ("nvidia.com/gpu.product", "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", False),
        ("nvidia.com/gpu.product", "Tesla-T4-SHARED", False),
        ("nvidia.com/gpu.memory", "81920", True),
        ("nvidia.com/gpu.memory", "lots", False),
        ("nvidia.com/gpu.family", "ampere", True),
        ("nvidia.com/gpu.family", "quantum", False),
        ("nvidia.com/gpu.compute.major", "9", True),
        ("nvidia.com/cuda.driver.major", "12", True),
        ("nvidia.com/gpu.count", "8", False),
        ("nvidia.com/gpu.product", None, True),
        ("nvidia.com/gpu.driver.major", "550", False),
    ],
    ids=[
        "product",
        "mig-product",
        "shared",
        "memory",
        "memory-bad",
        "family",
        "family-bad",
        "compute",
        "cuda",
        "count",
        "exists",
        "not-a-gfd-label",
    ],
)
def test_translate_label(key: str, value: str | None, faithful: bool) -> None:
    assert isinstance(translate_label(key, value), tuple) == faithful


DRIVER = "device.attributes['gpu.nvidia.com'].driverVersion"
CUDA = "device.attributes['gpu.nvidia.com'].cudaDriverVersion"


@pytest.mark.parametrize(
    ("key", "value", "expression"),
    [
        ("cuda.driver.major", "550", f"{DRIVER}.major() == 550"),
        ("cuda.driver.minor", "90", f"{DRIVER}.minor() == 90"),
        ("cuda.driver.rev", "07", f"{DRIVER}.patch() == 7"),
        ("cuda.driver-version.major", "570", f"{DRIVER}.major() == 570"),
        ("cuda.driver-version.revision", "03", f"{DRIVER}.patch() == 3"),
        (
            "cuda.driver-version.full",
            "550.90.07",
            f"{DRIVER}.major() == 550 && {DRIVER}.minor() == 90 && {DRIVER}.patch() == 7",
        ),
        ("cuda.runtime.major", "12", f"{CUDA}.major() == 12"),
        ("cuda.runtime-version.minor", "4", f"{CUDA}.minor() == 4"),
        ("cuda.runtime-version.full", "12.4", f"{CUDA}.major() == 12 && {CUDA}.minor() == 4"),
        (
            "gpu.compute.major",
            "9",
            "device.attributes['gpu.nvidia.com'].cudaComputeCapability.major() == 9",
        ),
    ],
    ids=[
        "driver-major",
        "driver-minor",
        "driver-rev",
        "driver-version-major",
        "driver-version-revision",
        "driver-version-full",
        "runtime-major",
        "runtime-version-minor",
        "runtime-version-full",
        "compute-major",
    ],
)
def test_gfd_version_labels_map_to_what_the_dra_driver_publishes(
    key: str, value: str, expression: str
) -> None:
    """GFD's cuda.driver* labels are the NVIDIA driver version (550), cuda.runtime* the CUDA
    version (12.4): driverVersion and cudaDriverVersion in the DRA driver's attributes."""
    assert translate_label(f"nvidia.com/{key}", value) == (
        expression,
        frozenset({"gpu.nvidia.com", "mig.nvidia.com"}),
    )


def test_label_kept_when_a_container_keeps_legacy_gpus() -> None:
    obj = pod({"nvidia.com/gpu": 1}, nodeSelector={"nvidia.com/gpu.product": "X"})
    obj["spec"]["containers"].append(
        {"name": "d", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1.5"}}}
    )
    result = rewrite_object(obj, default_mappings())
    assert result.object["spec"]["nodeSelector"] == {"nvidia.com/gpu.product": "X"}
