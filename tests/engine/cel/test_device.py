"""The DRA `device` variable: domains, types, unknown domains and missing attributes."""

import pytest

from webhook.engine.cel import compile_expression, device_to_cel

DEVICE = device_to_cel(
    "gpu.nvidia.com",
    {
        "type": {"string": "gpu"},
        "productName": {"string": "NVIDIA A100-SXM4-80GB"},
        "driverVersion": {"version": "550.54.15"},
        "cudaComputeCapability": {"version": "8.0.0"},
        "index": {"int": 0},
        "addressingMode": {"string": "HMM"},
        "resource.kubernetes.io/pciBusID": {"string": "0000:3b:00.0"},
        "dra.example.com/healthy": {"bool": True},
    },
    {"memory": {"value": "80Gi"}, "multiprocessors": {"value": "98"}},
)

VALUES = [
    (
        "capacity_compare",
        "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0",
        True,
    ),
    (
        "capacity_too_small",
        "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('100Gi')) >= 0",
        False,
    ),
    (
        "driver_version",
        "device.attributes['gpu.nvidia.com'].driverVersion.compareTo(semver('550.0.0')) >= 0",
        True,
    ),
    (
        "version_is_semver_not_string",
        "device.attributes['gpu.nvidia.com'].cudaComputeCapability.isGreaterThan(semver('7.5.0'))",
        True,
    ),
    ("string_attribute", "device.attributes['gpu.nvidia.com'].type == 'gpu'", True),
    ("int_attribute", "device.attributes['gpu.nvidia.com'].index == 0", True),
    (
        "qualified_attribute",
        "device.attributes['resource.kubernetes.io'].pciBusID.startsWith('0000:')",
        True,
    ),
    ("bool_attribute", "device.attributes['dra.example.com'].healthy", True),
    ("driver", "device.driver == 'gpu.nvidia.com'", True),
    ("unknown_domain_is_empty", "device.attributes['tpu.google.com'] == {}", True),
    ("unknown_domain_guard", "!('x' in device.attributes['tpu.google.com'])", True),
    (
        "guarded_missing",
        "'profile' in device.attributes['gpu.nvidia.com'] && "
        "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'",
        False,
    ),
    ("has_missing", "has(device.attributes['gpu.nvidia.com'].profile)", False),
    ("product_regex", "device.attributes['gpu.nvidia.com'].productName.matches('A100|H100')", True),
    (
        "memory_as_integer",
        "device.capacity['gpu.nvidia.com'].memory.asInteger() == 85899345920",
        True,
    ),
]


@pytest.mark.parametrize(("expr", "expected"), [c[1:] for c in VALUES], ids=[c[0] for c in VALUES])
def test_selectors(expr, expected):
    result = compile_expression(expr, variables=["device"]).evaluate({"device": DEVICE})
    assert result.error is None
    assert result.value is expected


def test_missing_attribute_is_an_error_result():
    program = compile_expression(
        "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'", variables=["device"]
    )
    assert program.evaluate({"device": DEVICE}).error == "no such key: 'profile'"


def test_version_cannot_be_compared_as_string():
    program = compile_expression(
        "device.attributes['gpu.nvidia.com'].driverVersion > '500'", variables=["device"]
    )
    assert program.evaluate({"device": DEVICE}).error is not None


@pytest.mark.parametrize(
    ("attributes", "capacity"),
    [
        ({"v": {"version": "v1"}}, {}),
        ({"x": {"float": 1.5}}, {}),
        ({}, {"memory": {"value": "lots"}}),
    ],
    ids=["bad_version", "unknown_type", "bad_capacity"],
)
def test_malformed_device_raises_value_error(attributes, capacity):
    with pytest.raises(ValueError, match=r"attribute|capacity"):
        device_to_cel("d.example.com", attributes, capacity)
