"""Inventory: selectors counted with Kubernetes CEL semantics over grouped devices, and the
feasibility answer built on it (which selector is in the way, which devices nearly match)."""

from __future__ import annotations

from typing import Any

import pytest
from bench.inventory import DRIVER, GPU_CLASS, MIG_EVERY, cluster_slices, driver_version_of
from nvidia_shapes import A100, gpu_devices, partitioned_slices, resource_slice, tainted

from webhook.engine import inventory as inventory_module
from webhook.engine.devices import reads_device_identity
from webhook.engine.feasibility import check_claim, check_satisfiable
from webhook.engine.inventory import Inventory, SelectorCache
from webhook.types import AllocationMode, ClaimSpec, DeviceRequest, Taint

D = DRIVER
ATTR = f"device.attributes['{D}']"
CAP = f"device.capacity['{D}']"


def gpu(name: str, product: str = "A100", memory: str = "40Gi", **extra: Any) -> dict[str, Any]:
    attributes = {
        "type": {"string": "gpu"},
        "uuid": {"string": f"GPU-{name}"},
        "productName": {"string": product},
        "cores": {"int": 108},
        "mig": {"bool": False},
        "driverVersion": {"version": "550.54.15"},
        **extra,
    }
    return {"name": name, "attributes": attributes, "capacity": {"memory": {"value": memory}}}


def v1_slice(
    node: str, devices: list[dict[str, Any]], driver: str = D, generation: int = 1
) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{driver}"},
        "spec": {
            "driver": driver,
            "nodeName": node,
            "devices": devices,
            "pool": {"name": node, "generation": generation, "resourceSliceCount": 1},
        },
    }


def v1beta1_slice(node: str, devices: list[dict[str, Any]]) -> dict[str, Any]:
    wrapped = [
        {"name": d["name"], "basic": {k: v for k, v in d.items() if k != "name"}} for d in devices
    ]
    return {
        **v1_slice(node, []),
        "apiVersion": "resource.k8s.io/v1beta1",
        "spec": {**v1_slice(node, [])["spec"], "devices": wrapped},
    }


DEVICES = [
    gpu("gpu-0"),
    gpu("gpu-1"),
    gpu("gpu-2", "H100", "80Gi", cores={"int": 132}, driverVersion={"version": "570.86.10"}),
    gpu("gpu-3", "A100", "80Gi", mig={"bool": True}),
]
NIC = {"name": "nic-0", "attributes": {"model": {"string": "cx7"}}, "capacity": {}}


def small() -> Inventory:
    return Inventory.from_slices(
        [v1_slice("node-a", DEVICES), v1_slice("node-a", [NIC], driver="nic.example.com")]
    )


SELECTOR_CASES = [
    ("string", [], [f"{ATTR}.productName == 'A100'"], 3),
    ("int", [], [f"{ATTR}.cores > 120"], 1),
    ("bool", [], [f"{ATTR}.mig"], 1),
    ("version-semver", [], [f"{ATTR}.driverVersion.compareTo(semver('560.0.0')) >= 0"], 1),
    ("version-is-not-a-string", [], [f"{ATTR}.driverVersion == '550.54.15'"], 0),
    ("capacity-quantity", [], [f"{CAP}.memory.compareTo(quantity('40Gi')) > 0"], 2),
    ("capacity-isGreaterThan", [], [f"{CAP}.memory.isGreaterThan(quantity('79Gi'))"], 2),
    ("driver", [f"device.driver == '{D}'"], [], 4),
    (
        "class-and-request-anded",
        [f"device.driver == '{D}'"],
        [f"{CAP}.memory.compareTo(quantity('80Gi')) >= 0", f"{ATTR}.productName == 'A100'"],
        1,
    ),
    ("no-selectors-match-all", [], [], 5),
    ("unknown-domain-is-empty-map", [], ["'x' in device.attributes['other.example.com']"], 0),
    ("missing-attribute-error-no-match", [], [f"{ATTR}.productName == 'A100'"], 3),
    ("error-on-some-devices", [], ["device.attributes['nic.example.com'].model == 'cx7'"], 1),
    ("uuid-pinning-per-device", [], [f"{ATTR}.uuid == 'GPU-gpu-1'"], 1),
    ("computed-index", [], [f"{ATTR}['uu' + 'id'] == 'GPU-gpu-0'"], 1),
    ("has-macro", [], [f"has({ATTR}.mig) && !{ATTR}.mig"], 3),
    ("compile-error-matches-nothing", [], ["device.attributes["], 0),
    ("non-bool-result-matches-nothing", [], ["device.driver"], 0),
]


@pytest.mark.parametrize(
    ("class_selectors", "request_selectors", "expected"),
    [c[1:] for c in SELECTOR_CASES],
    ids=[c[0] for c in SELECTOR_CASES],
)
def test_count_matching(
    class_selectors: list[str], request_selectors: list[str], expected: int
) -> None:
    assert small().count_matching(class_selectors, request_selectors) == expected


@pytest.mark.parametrize(
    ("class_selectors", "request_selectors", "expected"),
    [c[1:] for c in SELECTOR_CASES],
    ids=[c[0] for c in SELECTOR_CASES],
)
def test_v1beta1_slices_count_the_same(
    class_selectors: list[str], request_selectors: list[str], expected: int
) -> None:
    inventory = Inventory.from_slices(
        [
            v1beta1_slice("node-a", DEVICES),
            {
                **v1beta1_slice("node-a", [NIC]),
                "spec": {**v1beta1_slice("node-a", [NIC])["spec"], "driver": "nic.example.com"},
            },
        ]
    )
    assert inventory.count_matching(class_selectors, request_selectors) == expected


def test_evaluation_errors_are_kept_for_the_message() -> None:
    selection = small().select([f"{ATTR}.productName == 'A100'"])
    assert selection.count == 3
    assert any("no such key" in e and "productName" in e for e in selection.errors)


def test_class_selectors_run_first_so_their_exclusions_raise_no_errors() -> None:
    selection = small().select([f"device.driver == '{D}'", f"{ATTR}.productName == 'A100'"])
    assert (selection.count, selection.errors) == (3, ())


def with_pci(device: dict[str, Any], bus: str) -> dict[str, Any]:
    device["attributes"]["resource.kubernetes.io/pciBusID"] = {"string": bus}
    return device


GROUPING_CASES = [
    ("differ-only-in-uuid", gpu("a"), gpu("b"), 1),
    ("differ-in-pci-ids", with_pci(gpu("a"), "0:1"), with_pci(gpu("b"), "0:2"), 1),
    ("differ-in-memory", gpu("a", memory="40Gi"), gpu("b", memory="80Gi"), 2),
    ("differ-in-product", gpu("a", "A100"), gpu("b", "H100"), 2),
    ("differ-in-attribute-kind", gpu("a", n={"int": 1}), gpu("b", n={"string": "1"}), 2),
    ("id-present-or-absent", gpu("a", serial={"string": "x"}), gpu("b"), 2),
]


@pytest.mark.parametrize(
    ("first", "second", "groups"),
    [c[1:] for c in GROUPING_CASES],
    ids=[c[0] for c in GROUPING_CASES],
)
def test_grouping(first: dict[str, Any], second: dict[str, Any], groups: int) -> None:
    inventory = Inventory.from_slices([v1_slice("n", [first, second])])
    assert len(inventory.groups) == groups
    assert inventory.device_count == 2


def test_other_drivers_never_share_a_group() -> None:
    inventory = Inventory.from_slices(
        [v1_slice("n", [gpu("a")]), v1_slice("n", [gpu("a")], driver="other.example.com")]
    )
    assert len(inventory.groups) == 2
    assert inventory.count_matching([f"device.driver == '{D}'"]) == 1


def test_only_the_newest_generation_of_a_pool_counts() -> None:
    inventory = Inventory.from_slices(
        [
            v1_slice("n", [gpu("old")], generation=1),
            v1_slice("n", [gpu("a"), gpu("b")], generation=2),
        ]
    )
    assert inventory.device_count == 2


@pytest.mark.parametrize(
    ("expression", "reads"),
    [
        (f"{ATTR}.productName == 'A100'", False),
        (f"{ATTR}.productName.indexOf('A') == 0", False),
        (f"x in ['a', 'b'] && {CAP}.memory.isGreaterThan(quantity('1Gi'))", False),
        (f"{ATTR}.uuid == 'GPU-1'", True),
        ("device.attributes['resource.kubernetes.io/pciBusID'].x == ''", True),
        (f"{ATTR}['product' + 'Name'] == 'A100'", True),
        (f"{ATTR}.exists(k, {ATTR}[k] == 'x')", True),
        (f"{CAP}.memorySlice3.isInteger()", True),
        (f"{ATTR}.all(k, v, v != 'x')", True),
    ],
    ids=[
        "plain",
        "indexOf",
        "list-literal",
        "uuid",
        "pciBusID",
        "computed",
        "comprehension",
        "memorySlice",
        "two-variable",
    ],
)
def test_which_expressions_are_evaluated_per_device(expression: str, reads: bool) -> None:
    assert reads_device_identity(expression) is reads


# ---------------------------------------------------------------------- 10,000 devices

NODES = 1250
MIG_NODES = len([n for n in range(NODES) if n % MIG_EVERY == 0 and n % 3 == 0])


@pytest.fixture(scope="module")
def cluster() -> Inventory:
    return Inventory.from_slices(cluster_slices(NODES))


def per_model(model: int) -> int:
    return 8 * len([n for n in range(NODES) if n % 3 == model])


@pytest.mark.parametrize(
    ("class_selectors", "request_selectors", "expected"),
    [c[1:] for c in SELECTOR_CASES],
    ids=[c[0] for c in SELECTOR_CASES],
)
def test_a_remembered_selection_is_the_one_first_computed(
    class_selectors: list[str], request_selectors: list[str], expected: int
) -> None:
    inventory, selectors = small(), [*class_selectors, *request_selectors]
    first = inventory.select(selectors)
    again = inventory.select(tuple(selectors))
    fresh = small().select(selectors)
    assert again is first
    assert (again.count, again.errors, again.most_on_one_node()) == (
        fresh.count,
        fresh.errors,
        fresh.most_on_one_node(),
    )
    assert again.count == expected


def test_remembered_selections_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inventory_module, "MAX_CACHED_SELECTIONS", 2)
    inventory = small()
    first = inventory.select([f"{ATTR}.cores > 120"])
    inventory.select([f"{ATTR}.mig"])
    inventory.select([f"device.driver == '{D}'"])  # the table is full: it starts over
    again = inventory.select([f"{ATTR}.cores > 120"])
    assert again is not first and again == first


SNAPSHOT_CASES = [
    ("all-gpus", [GPU_CLASS], 10_000),
    ("mig", [f"{ATTR}.type == 'mig'"], 7 * MIG_NODES),
    ("a100-40", [GPU_CLASS, f"{CAP}.memory.compareTo(quantity('80Gi')) < 0"], per_model(0)),
    (
        "80gb",
        [GPU_CLASS, f"{CAP}.memory.compareTo(quantity('80Gi')) >= 0"],
        per_model(1) + per_model(2),
    ),
    ("h100", [f"{ATTR}.productName.matches('H100')"], per_model(2)),
    (
        "new-driver",
        [GPU_CLASS, f"{ATTR}.driverVersion.compareTo(semver('560.0.0')) >= 0"],
        8 * len([n for n in range(NODES) if driver_version_of(n) == "570.86.10"]),
    ),
    ("hopper-cc9", [GPU_CLASS, f"{ATTR}.cudaComputeCapability.major() >= 9"], per_model(2)),
    ("one-uuid", [f"{ATTR}.uuid == 'GPU-00007-3'"], 1),
    ("mig-placement", [f"'memorySlice3' in {CAP}"], MIG_NODES),
]


@pytest.mark.parametrize(
    ("selectors", "expected"), [c[1:] for c in SNAPSHOT_CASES], ids=[c[0] for c in SNAPSHOT_CASES]
)
def test_ten_thousand_devices(cluster: Inventory, selectors: list[str], expected: int) -> None:
    assert cluster.count_matching(selectors) == expected


def test_ten_thousand_devices_make_few_groups(cluster: Inventory) -> None:
    assert cluster.device_count == 10_000 + 7 * MIG_NODES
    assert len(cluster.groups) <= 20


def test_class_capacity(cluster: Inventory) -> None:
    classes = {
        "gpu.nvidia.com": device_class(GPU_CLASS),
        "mig.nvidia.com": device_class(f"{ATTR}.type == 'mig'"),
        "everything": {"spec": {}},
    }
    assert cluster.class_capacity(classes) == {
        "gpu.nvidia.com": 10_000,
        "mig.nvidia.com": 7 * MIG_NODES,
        "everything": 10_000 + 7 * MIG_NODES,
    }


def test_a_shared_cache_survives_a_rebuild_with_the_same_answers() -> None:
    cache = SelectorCache()
    slices = [
        {**s, "metadata": {**s["metadata"], "resourceVersion": "1"}} for s in cluster_slices(30)
    ]
    first = Inventory.from_slices(slices, cache).count_matching([GPU_CLASS])
    slices[0] = {
        **slices[0],
        "metadata": {**slices[0]["metadata"], "resourceVersion": "2"},
        "spec": {**slices[0]["spec"], "devices": slices[0]["spec"]["devices"][:2]},
    }
    assert Inventory.from_slices(slices, cache).count_matching([GPU_CLASS]) == first - 6


# ---------------------------------------------------------------------- feasibility


def device_class(*expressions: str) -> dict[str, Any]:
    return {"spec": {"selectors": [{"cel": {"expression": e}} for e in expressions]}}


CLASSES = {
    "gpu.nvidia.com": device_class(GPU_CLASS),
    "mig.nvidia.com": device_class(f"{ATTR}.type == 'mig'"),
}


def request(
    count: int = 1,
    *selectors: str,
    device_class: str = "gpu.nvidia.com",
    mode: AllocationMode = AllocationMode.EXACT_COUNT,
) -> DeviceRequest:
    return DeviceRequest("gpu", device_class, count, mode, selectors=selectors)


FEASIBLE_CASES = [
    ("one-gpu", request(1), True, 10_000),
    ("eight-on-one-node", request(8), True, 10_000),
    ("nine-on-one-node", request(9), False, 10_000),
    (
        "all-mode-needs-one",
        request(0, mode=AllocationMode.ALL, device_class="mig.nvidia.com"),
        True,
        7 * MIG_NODES,
    ),
    ("no-such-model", request(1, f"{ATTR}.productName == 'B200'"), False, 0),
    ("unknown-class", request(1, device_class="tpu.example.com"), False, 0),
]


@pytest.mark.parametrize(
    ("req", "ok", "matching"), [c[1:] for c in FEASIBLE_CASES], ids=[c[0] for c in FEASIBLE_CASES]
)
def test_feasibility(cluster: Inventory, req: DeviceRequest, ok: bool, matching: int) -> None:
    result = check_satisfiable(cluster, req, CLASSES)
    assert (result.ok, result.matching) == (ok, matching), result.message


def test_the_failing_selector_and_closest_devices_are_named(cluster: Inventory) -> None:
    blocker = f"{CAP}.memory.compareTo(quantity('100Gi')) >= 0"
    result = check_satisfiable(
        cluster, request(1, f"{ATTR}.productName.matches('H100')", blocker), CLASSES
    )
    assert not result.ok
    assert result.failed_selector == blocker
    assert len(result.closest) == 2  # two driver versions of H100: two groups
    assert all("H100" in c for c in result.closest)
    assert "rules out the most" in result.message and "100Gi" in result.message
    decisive, _, _ = result.message.partition("; ")
    assert decisive == "request 'gpu' needs 1 gpu.nvidia.com device, 0 in the cluster match"


def test_not_enough_on_one_node_is_explained(cluster: Inventory) -> None:
    result = check_satisfiable(cluster, request(9), CLASSES)
    assert result.on_one_node == 8
    assert result.message.startswith(
        "request 'gpu' needs 9 gpu.nvidia.com devices on one node, at most 8 on any one node;"
    )


def test_unknown_class_is_said(cluster: Inventory) -> None:
    result = check_satisfiable(cluster, request(1, device_class="tpu.example.com"), CLASSES)
    assert result.unknown_class
    assert "DeviceClass 'tpu.example.com' does not exist" in result.message


def test_first_available_is_feasible_when_any_alternative_is(cluster: Inventory) -> None:
    b200 = DeviceRequest("gpu/b200", "gpu.nvidia.com", selectors=(f"{ATTR}.productName == 'B'",))
    mig = DeviceRequest("gpu/mig", "mig.nvidia.com")
    assert check_satisfiable(cluster, DeviceRequest("gpu", alternatives=(b200, mig)), CLASSES).ok
    neither = check_satisfiable(cluster, DeviceRequest("gpu", alternatives=(b200, b200)), CLASSES)
    assert not neither.ok
    assert "no alternative can be satisfied" in neither.message


def test_check_claim_answers_per_request(cluster: Inventory) -> None:
    spec = ClaimSpec("claim", (request(1), request(99)))
    assert [r.ok for r in check_claim(cluster, spec, CLASSES)] == [True, False]


def test_taints_binding_conditions_and_counters_are_read_from_the_slice() -> None:
    ecc = {"key": "ecc", "value": "bad", "effect": "NoSchedule"}
    devices = tainted(gpu_devices("n", A100, 1), ecc) + gpu_devices("n", A100, 1, first=1)
    devices[1] = {**devices[1], "bindingConditions": ["attached"]}
    slices = [resource_slice("n", devices), *partitioned_slices("p", 1)]
    inventory = Inventory.from_slices(slices)
    by_name = {d.name: d for g in inventory.groups for d in g.devices}
    assert by_name["n/gpu-0"].taints == (Taint("ecc", "bad", "NoSchedule"),)
    assert by_name["n/gpu-1"].binding_conditions == ("attached",)
    consumes = by_name["p/gpu-0-mig-1g-10gb-3"].consumes
    assert consumes == (
        (
            ("gpu.nvidia.com", "p", "gpu-0-counters"),
            (("memory", 10240 * 2**20), ("memory-slice-3", 1)),
        ),
    )
    groups = {d.name: id(g) for g in inventory.groups for d in g.devices}
    assert len({groups["n/gpu-0"], groups["n/gpu-1"]}) == 2  # taints, conditions: other kinds
