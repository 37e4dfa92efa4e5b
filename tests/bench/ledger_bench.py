"""The offline SQLite ledger under contention: worker processes racing for one tenant's quota.

Each process makes `per_process` one-GPU reservations under distinct holders against a quota
of 3/4 of all attempts; the ledger must grant exactly the quota (zero overcommit) and the
figure is attempts per second over all processes. The curve runs 1, 2 and 4 processes.
"""

from __future__ import annotations

import multiprocessing
import tempfile
import time
from pathlib import Path
from typing import Any

from webhook.ledger.sqlite import LedgerUnavailable, SqliteLedger

TENANT = "bench"
CLASS = "gpu.nvidia.com"


def _worker(path: str, worker: int, attempts: int, limit: int, *, start: Any, out: Any) -> None:
    ledger = SqliteLedger(path)
    start.wait()
    granted = unavailable = 0
    for i in range(attempts):
        holds = {f"claim:bench/w{worker}-{i}": {CLASS: 1}}
        try:
            granted += ledger.reserve(TENANT, holds, {CLASS: limit}).granted
        except LedgerUnavailable:  # the write lock waited past the busy timeout
            unavailable += 1
    ledger.close()
    out.put((granted, unavailable))


def race(processes: int, per_process: int) -> dict[str, Any]:
    attempts = processes * per_process
    limit = attempts * 3 // 4
    context = multiprocessing.get_context("fork")
    start, out = context.Event(), context.Queue()
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp, "ledger.sqlite3"))
        SqliteLedger(path).close()
        workers = [
            context.Process(
                target=_worker,
                args=(path, w, per_process, limit),
                kwargs={"start": start, "out": out},
            )
            for w in range(processes)
        ]
        for worker in workers:
            worker.start()
        time.sleep(0.2)
        started = time.perf_counter()
        start.set()
        outcomes = [out.get(timeout=300) for _ in workers]
        granted, unavailable = (sum(column) for column in zip(*outcomes, strict=True))
        elapsed = time.perf_counter() - started
        for worker in workers:
            worker.join()
        held = SqliteLedger(path).usage(TENANT)[CLASS].used
    return {
        "processes": processes,
        "attempts": attempts,
        "quota": limit,
        "granted": granted,
        "unavailable": unavailable,
        "held": held,
        "overcommit": max(0, held - limit),
        "admissions_per_s": round(attempts / elapsed, 1),
        "ms_per_admission": round(elapsed * 1000 / attempts, 3),
    }


def curve(per_process: int, process_counts: tuple[int, ...] = (1, 2, 4)) -> list[dict[str, Any]]:
    return [race(n, per_process) for n in process_counts]
