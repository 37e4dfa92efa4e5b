"""The background loop: started once whoever calls `start`, stopped promptly, and running its
passes only while its process leads."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from webhook.kube.background import FOLLOWER_CHECK, BackgroundLoop


class Counting(BackgroundLoop):
    thread_name = "counting"

    def __init__(self) -> None:
        super().__init__()
        self.loops = 0
        self.started = 0

    def _started(self) -> None:
        self.started += 1

    def _loop(self) -> None:
        self.loops += 1
        while not self._stop.is_set():
            self._sleep(5.0)


@pytest.mark.parametrize("callers", [1, 2, 16], ids=lambda n: f"{n}-callers")
def test_racing_starts_run_one_thread_and_the_hook_once(callers: int) -> None:
    loop = Counting()
    gate = threading.Barrier(callers)

    def start() -> None:
        gate.wait()
        loop.start()

    threads = [threading.Thread(target=start) for _ in range(callers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert loop.started == 1
        assert sum(t.name == "counting" for t in threading.enumerate()) == 1
    finally:
        loop.stop()
    assert loop.loops == 1
    assert loop._thread is not None and not loop._thread.is_alive(), "stop wakes the sleep"


class Passes(BackgroundLoop):
    """One pass per wake-up while leading (its own sleep outlasts every test)."""

    thread_name = "passes"

    def __init__(self, leading: Callable[[], bool]) -> None:
        super().__init__(leading)
        self.passes = 0

    def _loop(self) -> None:
        while self._running():
            self.passes += 1
            self._sleep(600.0)


def _settles_at(loop: Passes, expected: int, seconds: float) -> bool:
    """Whether `loop.passes` reaches `expected` within `seconds` and stays there a moment."""
    ends = time.monotonic() + seconds
    while loop.passes < expected and time.monotonic() < ends:
        time.sleep(0.005)
    time.sleep(0.1)
    return loop.passes == expected


@pytest.mark.parametrize(
    "steps",
    [
        pytest.param([(False, 0), (False, 0)], id="a-follower-idles-when-woken"),
        pytest.param([(True, 1), (True, 2)], id="a-leader-passes-once-per-wake"),
        pytest.param([(False, 0), (True, 1)], id="gaining-the-lease-starts-at-once"),
        pytest.param([(True, 1), (False, 1), (False, 1)], id="losing-the-lease-stops"),
        pytest.param([(True, 1), (False, 1), (True, 2)], id="a-second-term-runs-again"),
    ],
)
def test_a_loop_runs_its_passes_only_while_leading(steps: list[tuple[bool, int]]) -> None:
    """Each step sets leadership and wakes the loop as `Leadership.on_change` does; the
    loop's passes must then be as given, well before a follower's own check would run."""
    leading = [steps[0][0]]
    loop = Passes(lambda: leading[0]).start()
    try:
        for number, (lead, passes) in enumerate(steps):
            leading[0] = lead
            if number:
                loop.wake()
            assert _settles_at(loop, passes, FOLLOWER_CHECK / 2), (number, loop.passes)
    finally:
        loop.stop()
    assert loop._thread is not None and not loop._thread.is_alive(), "stop wakes a follower"
