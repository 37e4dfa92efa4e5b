"""Feasibility on Kubernetes 1.37 DRA devices, with kube-scheduler as the oracle.

Device taints (KEP-5055) and partitionable devices (KEP-4815) are on by default in 1.37
(DRADeviceTaints is GA, DRAPartitionableDevices beta, on). One control plane with kube-scheduler
and three fake Ready Nodes: `part-0` publishes two partitionable A100 80GB (a pool of two
slices: counter sets, and the whole GPUs with their MIG placements consuming them), `taint-0`
four A100 of which two carry a NoSchedule taint and one a None taint, `drain-0` two H100 with
a NoExecute taint. A fixed table and random claims (with and without tolerations): every
claim's Pod is bound iff dragate says the claim is feasible.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from nvidia_shapes import (
    A100,
    H100,
    device_classes,
    gpu_devices,
    partitioned_slices,
    resource_slice,
    tainted,
)

from webhook.engine.feasibility import check_claim
from webhook.engine.inventory import Inventory
from webhook.engine.normalize import claim_spec

from .cluster import Cluster, running_cluster
from .scheduling import BOUND, UNSCHEDULABLE, fake_node, force_delete, pod_outcome
from .toolchain_bins import require_binaries

pytestmark = pytest.mark.e2e

NS = "dra137"
ECC = {"key": "gpu.nvidia.com/ecc", "value": "bad", "effect": "NoSchedule"}
DRAIN = {"key": "drain", "effect": "NoExecute"}
PROFILE = "device.attributes['gpu.nvidia.com'].profile == '{}'"
ONE_G, THREE_G = PROFILE.format("1g.10gb"), PROFILE.format("3g.40gb")
H100_ONLY = "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'"
TOLERATIONS = (
    {"key": ECC["key"], "operator": "Exists"},
    ECC,
    {**ECC, "value": "good"},
    {**ECC, "effect": "NoExecute"},
    {"key": "drain", "operator": "Exists", "effect": "NoExecute"},
    {"operator": "Exists"},
)
RANDOM_CLAIMS = int(os.environ.get("DRAGATE_E2E_DRA137_CLAIMS", "30"))


def inventory_slices() -> list[dict[str, Any]]:
    clean = gpu_devices("taint-0", A100, 1, first=2)
    return [
        *partitioned_slices("part-0", 2),
        resource_slice(
            "taint-0",
            tainted(gpu_devices("taint-0", A100, 2), ECC)
            + clean
            + tainted(gpu_devices("taint-0", A100, 1, first=3), {**ECC, "effect": "None"}),
        ),
        resource_slice("drain-0", tainted(gpu_devices("drain-0", H100, 2), DRAIN)),
    ]


@pytest.fixture(scope="module")
def dra137(e2e_bin_dir: Path) -> Iterator[tuple[Cluster, list[dict[str, Any]]]]:
    require_binaries(e2e_bin_dir, ("kube-scheduler",))
    with running_cluster(e2e_bin_dir, scheduler=True) as cluster:
        for node in ("part-0", "taint-0", "drain-0"):
            fake_node(cluster, node)
        slices = inventory_slices()
        stored = [{**s, "metadata": {"name": s["metadata"]["name"]}} for s in slices]
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}
        items = {
            "apiVersion": "v1",
            "kind": "List",
            "items": [*device_classes(), *stored, namespace],
        }
        cluster.kubectl("create", "-f", "-", input=json.dumps(items))
        published = cluster.get_json("resourceslices")["items"]
        yield cluster, published


def leaf(cls: str, count: int | str = 1, *selectors: str, tolerate: Any = ()) -> dict[str, Any]:
    body: dict[str, Any] = {"deviceClassName": f"{cls}.nvidia.com"}
    body.update({"allocationMode": "All"} if count == "All" else {"count": count})
    if selectors:
        body["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    if tolerate:
        body["tolerations"] = list(tolerate)
    return body


def exact(name: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
    return {"name": name, "exactly": leaf(*args, **kwargs)}


ON_PART = "device.attributes['gpu.nvidia.com'].uuid.startsWith('GPU-part')"
ON_TAINT = "device.attributes['gpu.nvidia.com'].uuid.startsWith('GPU-taint')"
EXISTS = {"operator": "Exists"}

TABLE: list[tuple[str, list[dict[str, Any]], bool]] = [
    ("part-two-gpus", [exact("g", "gpu", 2, ON_PART)], True),
    ("part-gpus-leave-no-mig", [exact("g", "gpu", 2, ON_PART), exact("m", "mig")], False),
    ("part-gpu-and-seven-1g", [exact("g", "gpu", 1, ON_PART), exact("m", "mig", 7, ONE_G)], True),
    ("14-1g", [exact("m", "mig", 14, ONE_G)], True),
    ("15-1g", [exact("m", "mig", 15, ONE_G)], False),
    ("3g-and-14-1g", [exact("b", "mig", 1, THREE_G), exact("s", "mig", 14, ONE_G)], False),
    ("three-3g-four-1g", [exact("b", "mig", 3, THREE_G), exact("s", "mig", 4, ONE_G)], True),
    ("four-3g-and-1g", [exact("b", "mig", 4, THREE_G), exact("s", "mig", 1, ONE_G)], False),
    ("all-migs-overlap", [exact("m", "mig", "All")], False),
    ("untolerated", [exact("a", "gpu", 3, ON_TAINT)], False),
    ("tolerated-equal", [exact("a", "gpu", 4, ON_TAINT, tolerate=[ECC])], True),
    ("tolerated-exists", [exact("a", "gpu", 4, ON_TAINT, tolerate=[TOLERATIONS[0]])], True),
    ("other-value", [exact("a", "gpu", 3, ON_TAINT, tolerate=[TOLERATIONS[2]])], False),
    ("other-effect", [exact("a", "gpu", 3, ON_TAINT, tolerate=[TOLERATIONS[3]])], False),
    ("all-meets-a-taint", [exact("a", "gpu", "All", ON_TAINT)], False),
    ("all-tolerating", [exact("a", "gpu", "All", ON_TAINT, tolerate=[ECC])], True),
    ("noexecute", [exact("a", "gpu", 1, H100_ONLY)], False),
    ("noexecute-tolerated", [exact("a", "gpu", 2, H100_ONLY, tolerate=[TOLERATIONS[4]])], True),
    (
        "subrequest-tolerates",
        [
            {
                "name": "g",
                "firstAvailable": [
                    {"name": "x", **leaf("gpu", 2, H100_ONLY)},
                    {"name": "y", **leaf("gpu", 2, H100_ONLY, tolerate=[EXISTS])},
                ],
            }
        ],
        True,
    ),
]


def random_leaf(rng: random.Random) -> dict[str, Any]:
    cls = rng.choice(("gpu", "mig"))
    count: int | str = "All" if rng.random() < 0.1 else rng.choice((1, 1, 2, 3, 4, 7, 8, 14))
    choices = (ONE_G, THREE_G) if cls == "mig" else (ON_PART, ON_TAINT, H100_ONLY)
    selectors = [rng.choice(choices)] if rng.random() < 0.6 else []
    tolerate = [rng.choice(TOLERATIONS)] if rng.random() < 0.4 else []
    return leaf(cls, count, *selectors, tolerate=tolerate)


def random_requests(rng: random.Random) -> list[dict[str, Any]]:
    requests = []
    for i in range(rng.randint(1, 2)):
        if rng.random() < 0.2:
            subs = [{"name": f"s{j}", **random_leaf(rng)} for j in range(2)]
            requests.append({"name": f"r{i}", "firstAvailable": subs})
        else:
            requests.append({"name": f"r{i}", "exactly": random_leaf(rng)})
    return requests


def cases() -> list[tuple[str, list[dict[str, Any]], bool | None]]:
    rng = random.Random(137)
    randoms = [(f"random-{i}", random_requests(rng), None) for i in range(RANDOM_CLAIMS)]
    return [*TABLE, *randoms]


def test_feasibility_on_taints_and_counters_equals_the_schedulers_outcome(
    dra137: tuple[Cluster, list[dict[str, Any]]],
) -> None:
    """The table's expectations and random claims: bound iff dragate says feasible. One claim
    at a time, so allocations never compete (feasibility ignores them on purpose)."""
    cluster, slices = dra137
    inventory = Inventory.from_slices(slices)
    classes = {c["metadata"]["name"]: c for c in device_classes()}
    disagreements = []
    for i, (name, requests, expected) in enumerate(cases()):
        claim = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": f"c{i}", "namespace": NS},
            "spec": {"devices": {"requests": requests}},
        }
        results = check_claim(inventory, claim_spec(claim, "c"), classes)
        verdict = BOUND if all(r.ok for r in results) else UNSCHEDULABLE
        outcome, pod = run_pod(cluster, claim, f"c{i}")
        if outcome != verdict or (
            expected is not None and outcome != (BOUND if expected else UNSCHEDULABLE)
        ):
            said = [c.get("message") for c in pod.get("status", {}).get("conditions", [])]
            disagreements.append((name, requests, outcome, said, [r.message for r in results]))
    assert not disagreements, json.dumps(disagreements, indent=1)


def run_pod(cluster: Cluster, claim: dict[str, Any], name: str) -> tuple[str, dict[str, Any]]:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "containers": [{"name": "c", "image": "x", "resources": {"claims": [{"name": "d"}]}}],
            "resourceClaims": [{"name": "d", "resourceClaimName": name}],
        },
    }
    items = {"apiVersion": "v1", "kind": "List", "items": [claim, pod]}
    cluster.kubectl("create", "-f", "-", input=json.dumps(items))
    try:
        return pod_outcome(cluster, NS, name)
    finally:
        force_delete(cluster, NS, f"pod/{name}")
        cluster.kubectl("delete", "resourceclaim", name, "-n", NS, "--wait=true", "--timeout=60s")
