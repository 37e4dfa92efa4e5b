"""dragate's own DRA selector cases: NVIDIA-style devices and the selectors users write.

Devices are in the ResourceSlice API shape ({"int": 1}, {"version": "8.0.0"},
{"value": "80Gi"}), which both the oracle and dragate read. Every selector runs against
every device, so a selector is checked on a match, a mismatch and a missing attribute.
"""

from __future__ import annotations

from typing import Any

NV = "gpu.nvidia.com"


def _gpu(product: str, arch: str, cc: str, memory: str, index: int) -> dict[str, Any]:
    return {
        "driver": NV,
        "attributes": {
            "type": {"string": "gpu"},
            "uuid": {"string": f"GPU-{index:08d}-aaaa-bbbb-cccc-000000000000"},
            "productName": {"string": product},
            "brand": {"string": "Nvidia"},
            "architecture": {"string": arch},
            "cudaComputeCapability": {"version": cc},
            "driverVersion": {"version": "550.54.15"},
            "cudaDriverVersion": {"version": "12.4.0"},
            "index": {"int": index},
            "minor": {"int": index},
            "resource.kubernetes.io/pcieRoot": {"string": f"pci0000:{index:02x}"},
        },
        "capacity": {"memory": {"value": memory}},
    }


NVIDIA_DEVICES: dict[str, Any] = {
    "a100": _gpu("NVIDIA A100-SXM4-80GB", "Ampere", "8.0.0", "80Gi", 0),
    "h100": _gpu("NVIDIA H100 80GB HBM3", "Hopper", "9.0.0", "81559Mi", 1),
    "l4": _gpu("NVIDIA L4", "Ada Lovelace", "8.9.0", "23034Mi", 2),
    "mig-1g.10gb": {
        "driver": NV,
        "attributes": {
            "type": {"string": "mig"},
            "uuid": {"string": "MIG-11111111-2222-3333-4444-555555555555"},
            "parentUUID": {"string": "GPU-00000001-aaaa-bbbb-cccc-000000000000"},
            "parentIndex": {"int": 1},
            "profile": {"string": "1g.10gb"},
            "productName": {"string": "NVIDIA H100 80GB HBM3"},
            "architecture": {"string": "Hopper"},
            "cudaComputeCapability": {"version": "9.0.0"},
            "driverVersion": {"version": "550.54.15"},
        },
        "capacity": {
            "memory": {"value": "9984Mi"},
            "multiprocessors": {"value": "16"},
            "copyEngines": {"value": "1"},
            "decoders": {"value": "1"},
        },
    },
    "bare": {"driver": NV, "attributes": {"type": {"string": "gpu"}}, "capacity": {}},
    "other-driver": {
        "driver": "dra.example.com",
        "attributes": {"model": {"string": "LATEST-GPU-MODEL"}, "index": {"int": 3}},
        "capacity": {"memory": {"value": "8Gi"}},
    },
}

NVIDIA_SELECTORS = [
    f"device.driver == '{NV}'",
    f"device.driver != '{NV}'",
    f"device.attributes['{NV}'].type == 'gpu'",
    f"device.attributes['{NV}'].type == 'mig'",
    f"device.attributes['{NV}'].productName == 'NVIDIA A100-SXM4-80GB'",
    f"device.attributes['{NV}'].productName.startsWith('NVIDIA H100')",
    f"device.attributes['{NV}'].productName.contains('A100')",
    f"device.attributes['{NV}'].productName.lowerAscii().contains('h100')",
    f"device.attributes['{NV}'].productName.matches('^NVIDIA (A|H)100')",
    f"device.attributes['{NV}'].productName.split(' ')[1] == 'A100-SXM4-80GB'",
    f"device.attributes['{NV}'].productName.split(' ')[-1] == 'HBM3'",
    f"device.attributes['{NV}'].productName.split(' ').size() > 2",
    f"(device.attributes['{NV}'].productName + ' x').split(' ').size() == 4",
    f"device.attributes['{NV}'].architecture in ['Ampere', 'Hopper']",
    f"sets.contains(['Ampere'] + ['Hopper'], [device.attributes['{NV}'].architecture])",
    f"sets.intersects(['Ampere', 'Hopper'], [device.attributes['{NV}'].architecture])",
    f"device.attributes['{NV}'].index < 1.5",
    f"device.attributes['{NV}'].index == 0u",
    f"device.attributes['{NV}'].index == 1.0",
    f"device.attributes['{NV}'].index >= 1",
    f"device.attributes['{NV}'].index % 2 == 0",
    f"[0, 1].exists(i, i == device.attributes['{NV}'].index)",
    f"device.attributes['{NV}'].cudaComputeCapability.isGreaterThan(semver('8.5.0'))",
    f"device.attributes['{NV}'].cudaComputeCapability.compareTo(semver('9.0.0')) >= 0",
    f"device.attributes['{NV}'].cudaComputeCapability.major() >= 9",
    f"device.attributes['{NV}'].driverVersion.isLessThan(semver('560.0.0'))",
    f"device.attributes['{NV}'].cudaComputeCapability == semver('8.0.0')",
    f"device.attributes['{NV}'].cudaComputeCapability == '8.0.0'",
    f"device.capacity['{NV}'].memory.compareTo(quantity('40Gi')) >= 0",
    f"device.capacity['{NV}'].memory.isGreaterThan(quantity('79Gi'))",
    f"device.capacity['{NV}'].memory.asApproximateFloat() > 1e10",
    f"device.capacity['{NV}'].memory.asInteger() >= 85899345920",
    f"device.capacity['{NV}'].memory.add(quantity('1Gi')).isGreaterThan(quantity('80Gi'))",
    f"device.capacity['{NV}'].memory > quantity('1Gi')",
    f"device.capacity['{NV}'].memory.compareTo(40)",
    "quantity('5') == 5",
    f"device.capacity['{NV}'].multiprocessors.asInteger() >= 14",
    f"'profile' in device.attributes['{NV}']",
    f"has(device.attributes['{NV}'].profile)",
    f"has(device.attributes['{NV}'].profile) && device.attributes['{NV}'].profile == '1g.10gb'",
    f"!has(device.attributes['{NV}'].profile) || "
    f"device.attributes['{NV}'].profile.startsWith('1g')",
    f"device.attributes['{NV}'].profile == '1g.10gb'",
    f"device.attributes['{NV}'].?profile.orValue('') == '1g.10gb'",
    f"device.attributes['{NV}'].?profile.hasValue()",
    f"cel.bind(nv, device.attributes['{NV}'], nv.type == 'gpu' && nv.index == 0)",
    f"cel.bind(nv, device.attributes['{NV}'], nv.architecture == 'Hopper')",
    f"device.attributes['{NV}'].all(k, k.size() > 0)",
    f"device.attributes['{NV}'].exists(k, k == 'profile')",
    f"device.attributes['{NV}'].all(k, v, k.size() > 0)",
    "device.attributes['resource.kubernetes.io'].pcieRoot == 'pci0000:00'",
    "device.attributes['dra.example.com'].model == 'LATEST-GPU-MODEL'",
    "'model' in device.attributes['dra.example.com']",
    "device.attributes['no.such.domain'].size() == 0",
    f"device.attributes['{NV}'].uuid.indexOf('-') == 3",
    f"device.attributes['{NV}'].uuid.substring(0, 3) in ['GPU', 'MIG']",
    f"device.attributes['{NV}'].uuid.lastIndexOf('-', 100) > 0",
    f"device.attributes['{NV}'].productName.replace('NVIDIA ', '').startsWith('A')",
    f"string(device.attributes['{NV}'].index) == '0'",
    "string(true) == 'true'",
    f"int(device.attributes['{NV}'].index) + 1 == 1",
    f"[1, 2].sum() + device.attributes['{NV}'].index > 3",
    f"[device.attributes['{NV}'].index, 5].max() == 5",
    f"device.attributes['{NV}'].index in [0, 2] && device.driver == '{NV}'",
    f"device.attributes['{NV}'].type",
    f"device.attributes['{NV}'].index",
    "device.unknownField == 'x'",
    "device.attributes",
    "true ? 1 : 'a'",
    "[1, 'a'].size() == 2",
    "'x'.matches('[')",
    "duration('1x') > duration('1s')",
    "int('abc') == 1",
    "[1, 2].all(i, i > 0) && lists.range(3).size() == 3",
    "[3, 1, 2].sort()[0] == 1",
    "'%s-%d'.format(['a', 1]) == 'a-1'",
    "ip('10.0.0.1').family() == 4",
    "cidr('10.0.0.0/8').containsIP(ip('10.1.2.3'))",
    "url('https://example.com/x').getHost() == 'example.com'",
    "lists.range(10000).all(i, i >= 0)",
    "lists.range(1000).map(i, lists.range(1000).filter(j, j > i).size()).size() > 0",
    "'ab'.repeat(5) == 'ababababab'",
    "'abc'.reverse() == 'cba'",
]
"""Selectors users write, including the classes where dragate once disagreed with Kubernetes."""

_EXAMPLE = "dra.example.com"


def _example(name: dict[str, Any]) -> dict[str, Any]:
    return {
        "driver": _EXAMPLE,
        "attributes": {
            "name": name,
            "bool": {"bool": True},
            "int": {"int": 1},
            "string": {"string": "fish"},
            "version": {"version": "1.0.0"},
            "services": {"string": "some_example_value"},
            f"{_EXAMPLE}/something": {"bool": True},
            "other.example.com/name": {"bool": True},
        },
        "capacity": {
            "memory": {"value": "1Mi"},
            "quantity": {"value": "1Mi"},
            "name": {"value": "1Mi"},
        },
    }


UPSTREAM_DEVICES: dict[str, Any] = {
    "name-bool": _example({"bool": True}),
    "name-int": _example({"int": 1}),
    "name-string": _example({"string": "fish"}),
    "name-version": _example({"version": "1.0.0"}),
    "empty": {"driver": _EXAMPLE, "attributes": {}, "capacity": {}},
}
"""Devices for the expressions of the DRA compile_test table (its attribute names)."""
