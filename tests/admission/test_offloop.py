"""A reload's work runs off the serving loop: in a threadpool thread under gevent, on the
caller elsewhere; what it raises reaches the caller either way."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest
from admission.admission_support import POLICIES, StaticLoader

from webhook.admission.offloop import off_loop
from webhook.admission.reload import PolicyHolder
from webhook.types import PolicySet

T = TypeVar("T")

UNDER_GEVENT = """
from gevent import monkey; monkey.patch_all()
import gc, threading, time, gevent
from webhook.admission.offloop import off_loop

ticks = []
def tick():
    while True:
        ticks.append(time.monotonic()); gevent.sleep(0.001)
ticker = gevent.spawn(tick)
gevent.sleep(0.01)
loop_thread = threading.get_native_id()

def busy():
    until = time.monotonic() + 0.5
    while time.monotonic() < until:
        sum(range(1000))
    return threading.get_native_id()

ran_in = off_loop(busy)
gaps = [b - a for a, b in zip(ticks, ticks[1:])]
try:
    off_loop(lambda: 1 / 0)
    raised = False
except ZeroDivisionError:
    raised = True
print(ran_in != loop_thread, len(ticks) > 50, max(gaps) < 0.2, raised, gc.isenabled())
"""


def test_under_gevent_the_work_runs_in_another_thread_while_the_loop_runs() -> None:
    """A greenlet ticking every millisecond goes on ticking while the work computes."""
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", UNDER_GEVENT], capture_output=True, text=True,
                          timeout=60, cwd=root, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True"] * 5, done.stdout


def test_outside_gevent_the_work_runs_on_the_caller() -> None:
    assert off_loop(threading.get_ident) == threading.get_ident()
    with pytest.raises(ZeroDivisionError):
        off_loop(lambda: 1 / 0)


def test_a_reload_reads_and_compiles_through_the_runner(tmp_path: Path) -> None:
    policy = tmp_path / "p.yaml"
    policy.write_text("one")
    ran: list[str] = []

    def runner(work: Callable[[], T]) -> T:
        ran.append("work")
        return work()

    loader = StaticLoader(POLICIES)
    holder = PolicyHolder([str(tmp_path)], loader, runner=runner)
    assert ran == []  # the first load is the worker's start, before any connection
    loader.result = PolicySet(digest="d2")
    policy.write_text("two")
    assert holder.poll() and holder.get().digest == "d2"
    assert ran == ["work", "work"]  # the digest, then the compilation
