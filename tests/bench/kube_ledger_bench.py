"""The cluster ledger under contention: two webhook processes racing for one tenant's quota
on a real kube-apiserver (issue 9: >= 100 admissions/s, zero overcommit).

Starts a throw-away control plane on loopback (etcd + kube-apiserver from the e2e toolchain,
tests/e2e/toolchain/build.sh; no controller-manager), installs the TenantUsage CRD, then for
each thread count T runs 2 spawned processes x T threads, every thread making a fixed number
of one-GPU `KubeLedger.reserve` calls under distinct holders for one tenant, in a closed loop.
The quota is 3/4 of all attempts, so the last quarter is refused. Each level uses a fresh
tenant, so every level starts from an empty TenantUsage and ends with `quota` holders in it.

Figures per level: decisions/s (granted + refused), granted/s, p50/p99/max per reserve,
CAS conflicts (409s, each followed by a re-read and retry), FactsUnavailable (budget spent:
fail closed), and the stored TenantUsage checked against the grants: overcommit is devices
held beyond the quota, `lost` grants that the object does not hold, `orphaned` holders whose
write landed although its caller gave up (FactsUnavailable; released after the pending bound).

The second curve is the cost of one reserve without contention against the number of holders
already in the tenant's object (its size, and the share of it that is `managedFields`).

    python tests/bench/kube_ledger_bench.py [--threads 1 2 4] [--per-thread N] [--budget S]
    python tests/bench/run.py --only kube-ledger
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parents[1]
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))  # the e2e package (pyproject: pythonpath = ["tests"])

from webhook.ledger import accounting, wants  # noqa: E402
from webhook.ledger.grants import GrantBook, process_owner  # noqa: E402
from webhook.ledger.kube import KubeLedger  # noqa: E402
from webhook.ledger.tenantusage import (  # noqa: E402
    COLLECTION,
    object_name,
    records_of,
    tenant_usage,
)
from webhook.types import FactsUnavailable  # noqa: E402

CRD = TESTS.parent / "webhook" / "defaults" / "crds" / "tenantusages.yaml"
CLASS = "gpu.nvidia.com"
PROCESSES = 2
HOLDER_COUNTS = (0, 50, 200, 1000)


def toolchain() -> Path | None:
    """The e2e toolchain's bin dir when it holds etcd, kube-apiserver and kubectl, else None."""
    from e2e.toolchain_bins import ToolchainMissing, require_binaries, toolchain_bin_dir

    try:
        return Path(require_binaries(toolchain_bin_dir(), ("etcd", "kube-apiserver", "kubectl")))
    except (ToolchainMissing, OSError, subprocess.SubprocessError):  # no bash or not built
        return None


@contextmanager
def control_plane(bin_dir: Path) -> Iterator[Any]:
    """etcd + kube-apiserver on loopback with the CRD installed; stopped and removed after."""
    from e2e.cluster import running_cluster

    with running_cluster(bin_dir, controller_manager=False) as cluster:
        cluster.kubectl("apply", "-f", str(CRD))
        cluster.kubectl(
            "wait", "--for=condition=Established", "crd/tenantusages.dragate.io", "--timeout=60s"
        )
        warm = KubeLedger.from_kubeconfig(str(cluster.kubeconfig), budget=30.0)
        warm.reserve("warm-up", {"claim:w/x": {CLASS: 1}}, {})  # first write sets up storage
        yield cluster


class CountingLedger(KubeLedger):
    """KubeLedger counting lost compare-and-swap races (every 409 pauses once, then retries)."""

    conflicts = 0
    _lock = threading.Lock()

    def _pause(self, attempt: int, deadline: float, tenant: str) -> None:
        with self._lock:
            self.conflicts += 1
        super()._pause(attempt, deadline, tenant)


def _worker(
    kubeconfig: str,
    tenant: str,
    proc: int,
    *,
    threads: int,
    per_thread: int,
    quota: int,
    budget: float,
    grants: bool,
    ready: Any,
    start: Any,
    out: Any,
) -> None:
    ledger = CountingLedger.from_kubeconfig(
        kubeconfig,
        budget=budget,
        grants=GrantBook(process_owner()) if grants else None,
    )
    assert isinstance(ledger, CountingLedger)
    if ledger.loops is not None:
        ledger.loops.start()  # as the composer starts them
    ledger.usage(tenant)  # one TLS connection up before the clock starts
    latencies: list[list[float]] = [[] for _ in range(threads)]
    counts = [[0, 0, 0] for _ in range(threads)]  # granted, refused, unavailable

    def loop(thread: int) -> None:
        mine, tally = latencies[thread], counts[thread]
        for i in range(per_thread):
            holds = {f"claim:ns/c-{proc}-{thread}-{i}": {CLASS: 1}}
            began = time.perf_counter()
            try:
                granted = ledger.reserve(tenant, holds, {CLASS: quota}).granted
                tally[0 if granted else 1] += 1
            except FactsUnavailable:
                tally[2] += 1
            mine.append(time.perf_counter() - began)

    workers = [threading.Thread(target=loop, args=(t,)) for t in range(threads)]
    ready.put(proc)
    start.wait()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    finished = time.monotonic()
    ledger.close(timeout=30.0)  # with grants: what was admitted is written, grants given back
    granted, refused, unavailable = (sum(column) for column in zip(*counts, strict=True))
    out.put(
        {
            "proc": proc,
            "granted": granted,
            "refused": refused,
            "unavailable": unavailable,
            "conflicts": ledger.conflicts,
            "finished": finished,
            "latencies": [x for thread in latencies for x in thread],
        }
    )


def race(
    kubeconfig: str,
    threads: int,
    per_thread: int,
    budget: float,
    *,
    grants: bool = False,
) -> dict[str, Any]:
    """2 processes (two replicas) x `threads` threads x `per_thread` reservations against
    one fresh tenant; with `grants`, each admits from its grant of the quota
    (`webhook.ledger.grants`)."""
    attempts = PROCESSES * threads * per_thread
    quota = attempts * 3 // 4
    tenant = f"bench-t{threads}" + ("-grants" if grants else "")
    context = multiprocessing.get_context("spawn")
    ready, start, out = context.Queue(), context.Event(), context.Queue()
    procs = [
        context.Process(
            target=_worker,
            args=(kubeconfig, tenant, p),
            kwargs={
                "threads": threads,
                "per_thread": per_thread,
                "quota": quota,
                "budget": budget,
                "grants": grants,
                "ready": ready,
                "start": start,
                "out": out,
            },
        )
        for p in range(PROCESSES)
    ]
    for proc in procs:
        proc.start()
    try:
        for _ in procs:
            ready.get(timeout=60)
        started = time.monotonic()
        start.set()
        outcomes = [out.get(timeout=300) for _ in procs]
    finally:
        for proc in procs:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.kill()
    elapsed = max(o["finished"] for o in outcomes) - started
    granted, refused, unavailable, conflicts = (
        sum(o[key] for o in outcomes) for key in ("granted", "refused", "unavailable", "conflicts")
    )
    latencies = sorted(x for o in outcomes for x in o["latencies"])
    reader = KubeLedger.from_kubeconfig(kubeconfig, budget=30.0)
    stored = reader.api.request("GET", f"{COLLECTION}/{object_name(tenant)}")
    records = records_of(stored)
    held = sum(r.devices.get(CLASS, 0) for k, r in records.items() if not _internal(k))
    decided = granted + refused
    return {
        "processes": PROCESSES,
        "threads_per_process": threads,
        "attempts": attempts,
        "as": "replicas" + (", grants" if grants else ""),
        "quota": quota,
        "granted": granted,
        "refused": refused,
        "unavailable": unavailable,
        "conflicts": conflicts,
        "conflicts_per_grant": round(conflicts / max(granted, 1), 2),
        "held": held,
        "overcommit": max(0, held - quota),
        "lost": max(0, granted - held),
        "orphaned": max(0, held - granted),  # landed, but the caller saw FactsUnavailable
        "exact": held == granted == min(quota, attempts),
        "object_kib": round(len(json.dumps(stored)) / 1024, 1),
        "seconds": round(elapsed, 2),
        "admissions_per_s": round(decided / elapsed, 1),
        "granted_per_s": round(granted / elapsed, 1),
        "p50_ms": round(_quantile(latencies, 0.50) * 1000, 2),
        "p99_ms": round(_quantile(latencies, 0.99) * 1000, 2),
        "max_ms": round(latencies[-1] * 1000, 2),
        "mean_ms": round(statistics.fmean(latencies) * 1000, 2),
    }


def _internal(key: str) -> bool:
    """A grant or want record: a process's share of the quota, not a holder."""
    return key.startswith((wants.GRANT_PREFIX, wants.WANT_PREFIX))


def by_holders(
    kubeconfig: str, counts: tuple[int, ...] = HOLDER_COUNTS, samples: int = 15
) -> list[dict[str, Any]]:
    """Median time of one uncontended reserve (a new holder) with `count` holders stored, and
    of its parts: a GET of the TenantUsage, and a PUT of it (the compare-and-swap) changing
    only an annotation (an unchanged object is not written at all).

    Samples are spaced by a pause, so each reserve is alone: nothing in flight, nothing
    written just before it (a ledger may treat back-to-back writes as contention).
    """
    rows = []
    for count in counts:
        tenant = f"bench-holders-{count}"
        ledger = KubeLedger.from_kubeconfig(kubeconfig, budget=30.0)
        seed = {f"claim:seed/c-{n}": accounting.Record({CLASS: 1}) for n in range(count)}
        ledger.api.request("POST", COLLECTION, body=tenant_usage(tenant, seed, None))
        ledger.usage(tenant)  # the connection is up before timing
        times = []
        for n in range(samples):
            time.sleep(0.1)
            began = time.perf_counter()
            ledger.reserve(tenant, {f"claim:ns/new-{n}": {CLASS: 1}}, {})
            times.append(time.perf_counter() - began)
        path = f"{COLLECTION}/{object_name(tenant)}"
        gets, puts = _get_and_put(ledger, path, samples)
        stored = ledger.api.request("GET", path)
        managed = stored["metadata"].get("managedFields") or []
        rows.append(
            {
                "holders": count,
                "reserve_ms": _median_ms(times),
                "get_ms": _median_ms(gets),
                "put_ms": _median_ms(puts),
                "object_kib": round(len(json.dumps(stored)) / 1024, 1),
                "managed_fields_kib": round(len(json.dumps(managed)) / 1024, 1),
            }
        )
    return rows


def _get_and_put(ledger: KubeLedger, path: str, samples: int) -> tuple[list[float], list[float]]:
    gets, puts = [], []
    obj = ledger.api.request("GET", path)
    for sample in range(samples):
        began = time.perf_counter()
        obj = ledger.api.request("GET", path)
        gets.append(time.perf_counter() - began)
        obj["metadata"]["annotations"] = {"dragate.io/bench": str(sample)}
        began = time.perf_counter()
        ledger.api.request("PUT", path, body=obj)
        puts.append(time.perf_counter() - began)
    return gets, puts


def _median_ms(seconds: list[float]) -> float:
    return round(statistics.median(seconds) * 1000, 2)


def _quantile(ordered: list[float], q: float) -> float:
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def curve(
    per_thread_total: int = 300,
    thread_counts: tuple[int, ...] = (1, 2, 4),
    budget: float = 1.5,
    bin_dir: Path | None = None,
) -> dict[str, Any]:
    """Each level makes 2 x `per_thread_total` attempts, split over its threads.

    `budget` is KubeLedger's per-operation budget (1.5 s, the webhook's default).
    """
    bin_dir = bin_dir or toolchain()
    if bin_dir is None:
        return {"skipped": "e2e toolchain not built (tests/e2e/toolchain/build.sh)"}
    started = time.monotonic()
    with control_plane(bin_dir) as cluster:
        startup = time.monotonic() - started
        kubeconfig, busiest = str(cluster.kubeconfig), max(thread_counts)
        rows = [race(kubeconfig, t, max(1, per_thread_total // t), budget) for t in thread_counts]
        busy = (kubeconfig, busiest, max(1, per_thread_total // busiest), budget)
        rows.append(race(*busy, grants=True))
        growth = by_holders(str(cluster.kubeconfig))
    return {
        "budget_s": budget,
        "control_plane_start_s": round(startup, 1),
        "races": rows,
        "by_holders": growth,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument(
        "--per-process",
        type=int,
        default=300,
        help="attempts per process per level, split over its threads",
    )
    parser.add_argument("--budget", type=float, default=1.5)
    args = parser.parse_args()
    result = curve(args.per_process, tuple(args.threads), args.budget)
    print(json.dumps(result, indent=2))
    columns = (
        "threads_per_process",
        "admissions_per_s",
        "granted_per_s",
        "p50_ms",
        "p99_ms",
        "max_ms",
        "granted",
        "quota",
        "held",
        "overcommit",
        "orphaned",
        "conflicts",
        "unavailable",
    )
    if "races" in result:
        print("| " + " | ".join(columns) + " |", file=sys.stderr)
        for row in result["races"]:
            print("| " + " | ".join(str(row[c]) for c in columns) + " |", file=sys.stderr)
        for row in result["by_holders"]:
            print(json.dumps(row), file=sys.stderr)


if __name__ == "__main__":
    main()
