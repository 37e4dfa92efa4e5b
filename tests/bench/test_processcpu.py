"""CPU time of real processes from /proc (tests/bench/processcpu.py)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import processcpu

SPIN = "import time\nend = time.process_time() + {seconds}\nwhile time.process_time() < end: pass\n"
PARENT = (
    "import subprocess, sys, time\n"
    "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'])\n"
    "print(child.pid, flush=True)\n"
    "time.sleep(30)\n"
)


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[str]]:
    process = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    yield process
    process.kill()
    process.wait()


def test_a_spinning_process_is_charged_its_cpu_and_an_idle_one_nothing() -> None:
    spinner = subprocess.Popen([sys.executable, "-c", SPIN.format(seconds=3)])
    idle = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"])
    try:
        time.sleep(0.3)  # both past their start-up
        meter = processcpu.CpuMeter({"spinner": lambda: [spinner.pid], "idle": lambda: [idle.pid]})
        started = time.monotonic_ns()
        meter.start()
        time.sleep(0.5)
        spent = meter.stop()
        wall = time.monotonic_ns() - started
    finally:
        for process in (spinner, idle):
            process.kill()
            process.wait()
    # at most one CPU for the time measured; on a shared machine, some of it at least (ns)
    assert wall / 10 < spent["spinner"] <= wall * 1.05
    assert spent["idle"] < spent["spinner"] / 10


def test_a_servers_group_includes_its_children(sleeper: subprocess.Popen[str]) -> None:
    assert sleeper.stdout is not None
    child = int(sleeper.stdout.readline())
    assert processcpu.with_children(sleeper.pid) == [sleeper.pid, child]


def test_a_process_that_is_gone_has_no_children_and_no_time() -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    assert processcpu.with_children(gone.pid) == [gone.pid]
    assert processcpu.run_ns(gone.pid) == 0


def test_stop_before_start_is_a_mistake() -> None:
    with pytest.raises(RuntimeError):
        processcpu.CpuMeter({}).stop()


@pytest.mark.parametrize(
    ("spent", "creates", "expected"),
    [
        ({"a": 3_000_000, "b": 1_500_000}, 3, {"a": 1.0, "b": 0.5, "total": 1.5}),
        ({"a": 1_000_000}, 0, {}),
    ],
    ids=["per-create", "no-creates"],
)
def test_per_create_milliseconds(
    spent: dict[str, int], creates: int, expected: dict[str, float]
) -> None:
    assert processcpu.per_create_ms(spent, creates) == expected
