"""The background loop: started once whoever calls `start`, stopped promptly."""

from __future__ import annotations

import threading

import pytest

from webhook.kube.background import BackgroundLoop


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
