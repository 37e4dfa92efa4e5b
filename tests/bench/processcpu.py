"""CPU time of whole processes, read from /proc: where a create's CPU goes on a shared machine.

On two CPUs shared by the API server, etcd, the webhook servers and the load generator, every
millisecond of CPU anywhere lands on a create's latency, so the apiserver bench reports, per
variant, the CPU each process spent per create next to the latency. A process's time is the
sum of its threads' run time in `/proc/<pid>/task/<tid>/schedstat` (nanoseconds, where
`/proc/<pid>/stat` counts 10 ms ticks: a block of 40 creates is 100-300 ms of CPU), and a
server's includes its gunicorn worker (its child).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path

Pids = Callable[[], list[int]]


def run_ns(pid: int) -> int:
    """Nanoseconds on a CPU so far, over the threads the process has now (0 once it is gone)."""
    total = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0
    for tid in tasks:
        try:
            total += int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # a thread that ended between the listing and the read
    return total


def with_children(pid: int) -> list[int]:
    """The process and its direct children (a gunicorn master and its worker)."""
    path = Path(f"/proc/{pid}/task/{pid}/children")
    try:
        return [pid, *(int(child) for child in path.read_text().split())]
    except (OSError, ValueError):
        return [pid]


class CpuMeter:
    """Run time of named groups of processes, summed between `start()` and `stop()` calls."""

    def __init__(self, groups: Mapping[str, Pids]) -> None:
        self.groups = dict(groups)
        self._started: dict[str, int] | None = None

    def read(self) -> dict[str, int]:
        return {name: sum(run_ns(pid) for pid in pids()) for name, pids in self.groups.items()}

    def start(self) -> None:
        self._started = self.read()

    def stop(self) -> dict[str, int]:
        """Nanoseconds each group ran since `start()`."""
        if self._started is None:
            raise RuntimeError("CpuMeter.stop() before start()")
        now, started, self._started = self.read(), self._started, None
        return {name: now[name] - started.get(name, 0) for name in now}


def per_create_ms(spent: Mapping[str, int], creates: int) -> dict[str, float]:
    """Each group's CPU per create, and the total, in milliseconds."""
    if creates <= 0:
        return {}
    out = {name: round(ns / creates / 1e6, 3) for name, ns in spent.items()}
    out["total"] = round(sum(spent.values()) / creates / 1e6, 3)
    return out
