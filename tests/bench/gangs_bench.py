"""Gangs: a 1,000-Pod Job charged whole at creation, and its Pods drawing from the reservation.

A gang's CREATE reserves every Pod it runs at once under one holder; each of its Pods is then
reserved with a draw on that holder in the same ledger call. Measured through
`pipeline.review` of /validate with the memory ledger and the SQLite ledger (`dragate
serve`'s default): the Job's own review (each repetition a new Job, its holder released
untimed afterwards so the next one fits), each member Pod's review, and, as the baseline in
the same run, the same Pod with no gang (no owner) reviewed into a fresh ledger of the same
kind. Every Pod asks for one GPU and the tenant's quota is the gang's size: the member and
the ordinary series both fill it exactly. The first `WARMUP` Pods of each series are
reviewed untimed. The ratio is a member Pod's p50 over an ordinary Pod's p50.
"""

from __future__ import annotations

import copy
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import workload
from timing import summarize

from webhook import pipeline
from webhook.assembly import offline_context
from webhook.kube.snapshot import load_state
from webhook.ledger.memory import MemoryLedger
from webhook.ledger.sqlite import SqliteLedger
from webhook.pipeline import request_from_object
from webhook.policy.loading import load_policies
from webhook.types import Ledger, PolicySet

CLASS = "gpu.nvidia.com"
TENANT = f"bench-{workload.TENANTS - 1}"
WARMUP = 20


def gang_policies(directory: Path, size: int) -> PolicySet:
    """The bench policies with the bench Pod's tenant limited to `size` GPUs in all."""
    policies = load_policies([str(workload.write_policies(directory))])
    tenants = tuple(
        replace(t, quota=tuple(_limited(q, size) for q in t.quota)) if t.name == TENANT else t
        for t in policies.tenants
    )
    return replace(policies, tenants=tenants)


def _limited(quota: Any, size: int) -> Any:
    return replace(quota, max_devices=size) if quota.device_class == CLASS else quota


def one_gpu_pod(name: str, owner: str | None = None) -> dict[str, Any]:
    """The bench Pod with one container of one GPU (template `gpu-1`); owned by Job `owner`."""
    pod = workload.dra_pod()
    spec = pod["spec"]
    spec["containers"] = spec["containers"][:1]
    spec["resourceClaims"] = spec["resourceClaims"][:1]
    pod["metadata"].update(name=name, uid=f"{name}-uid")
    if owner is not None:
        ref = {"apiVersion": "batch/v1", "kind": "Job", "name": owner, "uid": f"{owner}-uid"}
        pod["metadata"]["ownerReferences"] = [{**ref, "controller": True}]
    return pod


def gang_job(name: str, size: int) -> dict[str, Any]:
    """A Job running `size` one-GPU Pods at once."""
    spec = copy.deepcopy(one_gpu_pod("template")["spec"])
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": workload.NAMESPACE, "uid": f"{name}-uid"},
        "spec": {"parallelism": size, "completions": size, "template": {"spec": spec}},
    }


def _timed_reviews(context: Any, objects: Iterator[dict[str, Any]]) -> list[float]:
    """Microseconds of each object's review; every one must be allowed."""
    samples = []
    for obj in objects:
        request = request_from_object(obj)
        started = time.perf_counter_ns()
        verdict = pipeline.review(request, context, mutate=False)
        samples.append((time.perf_counter_ns() - started) / 1000)
        assert verdict.allowed, verdict.decision.reasons
    return samples


def _gang_reviews(context: Any, ledger: Ledger, size: int, repetitions: int) -> list[float]:
    """Each repetition a new Job's CREATE, its holder released (untimed) after."""
    samples = []
    for i in range(WARMUP // 4 + repetitions):
        name = f"gang-{i}"
        samples += _timed_reviews(context, iter([gang_job(name, size)]))
        ledger.release(TENANT, f"gang:{workload.NAMESPACE}/Job/{name}")
    return samples[WARMUP // 4 :]


def _pods(context: Any, size: int, owner: str | None, prefix: str) -> list[float]:
    pods = (one_gpu_pod(f"{prefix}-{i}", owner) for i in range(size))
    return _timed_reviews(context, pods)[WARMUP:]


def measure(make: Callable[[], Ledger], tmp: Path, size: int, repetitions: int) -> dict[str, Any]:
    """One ledger kind: the gang's review, its members' and ordinary Pods' (fresh ledger)."""
    policies = gang_policies(tmp / "policies", size)
    state = load_state(str(workload.write_state(tmp / "state.json")))
    gang_ledger, plain_ledger = make(), make()
    gang_context = offline_context(lambda: policies, state, gang_ledger)
    plain_context = offline_context(lambda: policies, state, plain_ledger)
    gang = summarize(_gang_reviews(gang_context, gang_ledger, size, repetitions))
    _timed_reviews(gang_context, iter([gang_job("gang", size)]))
    member = summarize(_pods(gang_context, size, "gang", "member"))
    ordinary = summarize(_pods(plain_context, size, None, "plain"))
    held = {h.key: h.devices for h in gang_ledger.usage(TENANT)[CLASS].holders}
    assert held.get(f"gang:{workload.NAMESPACE}/Job/gang", 0) == 0, "members drew the gang"
    assert sum(held.values()) == size, held
    return {
        "gang_pods": size,
        "gang": gang,
        "member_pod": member,
        "ordinary_pod": ordinary,
        "member_over_ordinary_p50": round(member["p50_us"] / ordinary["p50_us"], 2),  # type: ignore[operator]
        "gang_over_ordinary_p50": round(gang["p50_us"] / ordinary["p50_us"], 2),  # type: ignore[operator]
    }


def curve(size: int, repetitions: int) -> list[dict[str, Any]]:
    """Per ledger kind (memory, SQLite): the gang's, a member's and an ordinary Pod's review."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="dragate-gangs-") as tmp:
        files = iter(range(10))
        kinds: dict[str, Callable[[], Ledger]] = {
            "memory": MemoryLedger,
            "sqlite": lambda: SqliteLedger(str(Path(tmp, f"ledger-{next(files)}.sqlite3"))),
        }
        for kind, make in kinds.items():
            directory = Path(tmp, kind)
            directory.mkdir()
            rows.append({"ledger": kind, **measure(make, directory, size, repetitions)})
    return rows
