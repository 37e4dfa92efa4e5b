"""Summaries of latency samples: the same keys in every section of the report."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence


def percentile(ordered: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile of already sorted samples (fraction in 0..1)."""
    if not ordered:
        return float("nan")
    rank = max(1, round(fraction * len(ordered) + 0.5 - 1e-9))
    return ordered[min(rank, len(ordered)) - 1]


SUMMARY_KEYS = ("min_us", "p50_us", "p90_us", "p99_us", "max_us")


def summarize(samples_us: Sequence[float]) -> dict[str, float | str | None]:
    """min / p50 / p90 / p99 / max in microseconds, and how many samples they come from.

    No samples (a load window in which a starved machine completed nothing) is a result to
    report, not a crash: every key is there, the numbers are None and `note` says why.
    """
    ordered = sorted(samples_us)
    if not ordered:
        return {"samples": 0, "note": "no samples", **dict.fromkeys(SUMMARY_KEYS)}
    return {
        "samples": len(ordered),
        "min_us": round(ordered[0], 1),
        "p50_us": round(percentile(ordered, 0.50), 1),
        "p90_us": round(percentile(ordered, 0.90), 1),
        "p99_us": round(percentile(ordered, 0.99), 1),
        "max_us": round(ordered[-1], 1),
    }


def sample(call: Callable[[], object], iterations: int, warmup: int = 50) -> list[float]:
    """Microseconds per call, after `warmup` untimed calls."""
    for _ in range(min(warmup, iterations)):
        call()
    samples = []
    for _ in range(iterations):
        started = time.perf_counter_ns()
        call()
        samples.append((time.perf_counter_ns() - started) / 1000)
    return samples


def timed(work: Callable[[], object]) -> float:
    """Seconds one call of `work` takes."""
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


def rss_mib(pid: int | str = "self") -> dict[str, float]:
    """Resident memory now and at its peak, from /proc (Linux)."""
    fields = {}
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                fields[key] = round(int(value.split()[0]) / 1024, 1)
    return {"rss_mib": fields.get("VmRSS", 0.0), "peak_rss_mib": fields.get("VmHWM", 0.0)}


def pss_mib(pid: int | str = "self") -> float:
    """Proportional set size from /proc/PID/smaps_rollup (Linux): the process's own pages plus
    its share of pages it shares (with a forked master, say), so the PSS of a pod's processes
    adds up to the memory they take together, each shared page counted once."""
    with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as rollup:
        for line in rollup:
            if line.startswith("Pss:"):
                return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def pod_pss_mib(master: int, worker: int) -> dict[str, float]:
    """A pod's memory as its two processes (gunicorn's master and its one worker) take it."""
    own = {"master_pss_mib": pss_mib(master), "worker_pss_mib": pss_mib(worker)}
    return {**own, "pss_mib": round(own["master_pss_mib"] + own["worker_pss_mib"], 1)}
