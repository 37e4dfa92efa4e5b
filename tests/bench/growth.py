"""Growth: the same two reviews as cluster state grows from 10 to 10,000 tenants.

Each size runs in a fresh pair of processes shaped like a pod: the first, as gunicorn's
master in the chart's cluster mode, imports `dragate serve` and gunicorn and loads the policy
files, then forks the second, the worker, which loads the rest: the bench policy set with N
generated tenants (half listed by namespace, half selected by a namespace label), a
SnapshotState with their Namespaces and M existing ResourceClaims, and a SQLite ledger seeded
from those claims the way `dragate serve` seeds it, with the webhook's modules (Flask
included). The figures are `pipeline.review` p50/p99 for /validate (ledger reserve included)
and /mutate, and the pod's memory: the PSS of master and worker (/proc/PID/smaps_rollup,
pages they share counted once), against the chart's memory limit; the worker's RSS too.

Each size is measured in PROCESSES fresh processes, in interleaved rounds (every size once,
then every size again), and each figure is their median (memory: their largest). On this
shared machine the same process's p50 moves by half from one minute to the next (45 to 71
µs for /validate at 10 tenants within ten minutes), which is not growth: interleaved, a slow
minute lands on every size alike, as the HTTP rounds do. `runs` keeps every process's p50s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import workload
from timing import pod_pss_mib, rss_mib, sample, summarize, timed

from webhook import pipeline
from webhook.assembly import offline_context
from webhook.kube.snapshot import SnapshotState
from webhook.ledger.sqlite import SqliteLedger
from webhook.ledger.usage import existing_holds
from webhook.policy.loading import load_policies
from webhook.types import LabelSelector, PolicySet, QuotaLimit, Tenant

LABEL = "dragate.io/tenant"
PROCESSES = 3
POD_KEYS = ("pss_mib", "master_pss_mib", "worker_pss_mib")


def grown_tenant(index: int) -> Tenant:
    by_label = index % 2 == 1
    return Tenant(
        f"grown-{index}",
        namespaces=frozenset() if by_label else frozenset({f"grown-{index}"}),
        namespace_selector=LabelSelector({LABEL: f"grown-{index}"}) if by_label else None,
        allowed_device_classes=frozenset({"gpu.nvidia.com", "mig.nvidia.com"}),
        quota=(QuotaLimit("gpu.nvidia.com", 1_000_000, 8),),
    )


def grown_policies(base: PolicySet, tenants: int) -> PolicySet:
    """The bench policies with `tenants` more, put first so the Pod's tenant comes last."""
    return replace(base, tenants=(*(grown_tenant(i) for i in range(tenants)), *base.tenants))


def grown_state(tenants: int, claims: int) -> SnapshotState:
    objects = workload.state_objects()
    for i in range(tenants):
        labels = {LABEL: f"grown-{i}"} if i % 2 else {}
        objects.append(workload.namespace(f"grown-{i}", labels))
    objects += [workload.resource_claim(f"c-{j}", f"grown-{j % tenants}") for j in range(claims)]
    return SnapshotState(objects)


def measure(tenants: int, claims: int, iterations: int) -> dict[str, Any]:
    from webhook.admission.app import settle_collector  # a worker's modules, for its memory

    with tempfile.TemporaryDirectory() as tmp:
        base = load_policies([str(workload.write_policies(Path(tmp, "policies")))])
        policies = grown_policies(base, tenants)
        state = grown_state(tenants, claims)
        ledger = SqliteLedger(str(Path(tmp, "ledger.sqlite3")))
        seed_s = timed(lambda: ledger.seed(existing_holds(policies, state)))
        context = offline_context(lambda: policies, state, ledger)
        settle_collector()  # as a served worker does once loaded: collections skip the state
        result: dict[str, Any] = {"tenants": tenants, "claims": claims, "seed_s": round(seed_s, 3)}
        for name, request in _requests().items():
            verdict = pipeline.review(request, context, mutate=name == "mutate")
            assert verdict.allowed, verdict.decision.reasons
            call = lambda r=request, m=name == "mutate": pipeline.review(r, context, mutate=m)  # noqa: E731
            result[name] = summarize(sample(call, iterations, warmup=100))
        result.update(rss_mib())
        result.update(pod_pss_mib(os.getppid(), os.getpid()))
        ledger.close()
    return result


def _requests() -> dict[str, Any]:
    from webhook.admission.review import parse_review

    bodies = workload.review_bodies()
    return {
        "validate": parse_review(bodies["/validate"], "application/json"),
        "mutate": parse_review(bodies["/mutate"], "application/json"),
    }


def curve(
    sizes: tuple[tuple[int, int], ...], iterations: int, processes: int = PROCESSES
) -> list[dict[str, Any]]:
    """Per (tenants, claims): `processes` fresh processes in interleaved rounds, their
    figures' medians."""
    rounds = [
        [_one_process(tenants, claims, iterations) for tenants, claims in sizes]
        for _ in range(processes)
    ]
    return [combined([r[i] for r in rounds]) for i in range(len(sizes))]


def _one_process(tenants: int, claims: int, iterations: int) -> dict[str, Any]:
    command = [sys.executable, __file__, "--tenants", str(tenants), "--claims", str(claims)]
    done = subprocess.run(
        [*command, "--iterations", str(iterations)], capture_output=True, text=True, check=True
    )
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


def combined(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One size's row from its processes: each timing the median, memory the largest."""
    row: dict[str, Any] = {k: runs[0][k] for k in ("tenants", "claims")}
    row["seed_s"] = statistics.median(r["seed_s"] for r in runs)
    for endpoint in ("validate", "mutate"):
        row[endpoint] = {
            key: statistics.median(r[endpoint][key] for r in runs)
            for key, value in runs[0][endpoint].items()
            if isinstance(value, int | float)
        }
    for key in ("rss_mib", "peak_rss_mib"):
        row[key] = max(r[key] for r in runs if key in r)
    largest = max(runs, key=lambda r: r.get("pss_mib", 0.0))  # the pod's parts of one run
    row.update({key: largest[key] for key in POD_KEYS if key in largest})
    row["runs"] = [
        {
            endpoint: {k: r[endpoint][k] for k in ("p50_us", "p99_us")}
            for endpoint in ("validate", "mutate")
        }
        for r in runs
    ]
    return row


def as_master() -> PolicySet:
    """What `dragate serve`'s master holds before it forks its worker in cluster mode: the
    CLI, gunicorn and the policy files it loads (`master_policies`)."""
    import gunicorn.app.base  # noqa: F401

    from webhook.cli import serve  # noqa: F401

    with tempfile.TemporaryDirectory() as tmp:
        return load_policies([str(workload.write_policies(Path(tmp)))])


def in_worker(work: Callable[[], dict[str, Any]]) -> None:
    """Run `work` in a forked child (the worker), which prints its JSON line; this process
    (the master) waits for it and exits as it did."""
    child = os.fork()
    if child == 0:
        code = 1
        try:
            print(json.dumps(work()), flush=True)
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(child, 0)
    sys.exit(os.waitstatus_to_exitcode(status))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tenants", type=int, required=True)
    parser.add_argument("--claims", type=int, required=True)
    parser.add_argument("--iterations", type=int, default=2000)
    args = parser.parse_args()
    held = as_master()  # noqa: F841  (kept, as the master keeps it, while the worker runs)
    in_worker(lambda: measure(args.tenants, args.claims, args.iterations))


if __name__ == "__main__":
    main()
