"""The loop contract and its runner: a leader-only loop passes only under the Lease, every
loop passes again after its interval or at once when woken, and a pass that raises is logged
without ending its loop."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from webhook.controllers.loop import Loop, LoopSpec
from webhook.controllers.runner import LoopRunner


def _eventually(condition: Callable[[], bool], seconds: float = 3.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


@pytest.mark.parametrize(
    ("leading", "lease", "due"),
    [
        pytest.param(True, True, True, id="leader-only-and-leading"),
        pytest.param(True, False, False, id="leader-only-not-leading"),
        pytest.param(False, False, True, id="every-process-not-leading"),
        pytest.param(False, True, True, id="every-process-leading"),
    ],
)
def test_a_pass_is_due_only_under_the_lease_when_the_loop_needs_it(
    leading: bool, lease: bool, due: bool
) -> None:
    calls: list[int] = []
    row = LoopSpec("x", lambda: calls.append(1), 60.0, leading=leading)
    runner = LoopRunner([row], lease=lambda: lease)
    assert runner.step(row) is due
    assert calls == ([1] if due else [])


def test_a_loop_spec_meets_the_loop_protocol() -> None:
    row: Loop = LoopSpec("x", lambda: None, 1.0)
    assert (row.name, row.leading, row.interval) == ("x", True, 1.0)


def test_a_failing_pass_is_counted_and_the_loop_goes_on() -> None:
    def boom() -> None:
        raise RuntimeError("a bug in one pass")

    row = LoopSpec("boom", boom, 60.0, leading=False)
    runner = LoopRunner([row])
    assert runner.step(row) and runner.step(row)
    assert runner.passes["boom"] == 2


def test_passes_repeat_after_the_interval_and_at_once_when_woken() -> None:
    ticks: list[float] = []
    row = LoopSpec("ticks", lambda: ticks.append(time.monotonic()), 0.05, leading=False)
    slow = LoopSpec("slow", lambda: ticks.append(-1.0), 3600.0, leading=False)
    runner = LoopRunner([row, slow]).start()
    try:
        assert _eventually(lambda: len([t for t in ticks if t > 0]) >= 3)
        assert ticks.count(-1.0) == 1  # one pass at start, then an hour's wait
        slow.wake.set()
        assert _eventually(lambda: ticks.count(-1.0) == 2)
    finally:
        runner.stop()


def test_a_leader_only_loop_starts_when_the_lease_is_gained() -> None:
    lease = threading.Event()
    passes: list[int] = []
    row = LoopSpec("leader", lambda: passes.append(1), 3600.0)
    runner = LoopRunner([row], lease=lease.is_set).start()
    try:
        time.sleep(0.1)
        assert passes == []
        lease.set()
        runner.wake_all()  # what `Leadership.on_change` calls
        assert _eventually(lambda: passes == [1])
    finally:
        runner.stop()


def test_stop_ends_every_thread_promptly() -> None:
    row = LoopSpec("idle", lambda: None, 3600.0, leading=False)
    runner = LoopRunner([row]).start()
    began = time.monotonic()
    runner.stop()
    assert time.monotonic() - began < 1.0
    assert not any(t.is_alive() for t in runner._threads)
