"""Runs a table of loops, one ordinary thread each (the controller process is not gevent's).

A leader-only loop passes only while `lease()` is True; between passes every loop waits for
its `interval` or its `wake` event. A pass that raises is logged and the loop goes on: a
loop that died would leave its objects stale forever.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

from webhook.controllers.loop import Loop

log = logging.getLogger("dragate.controllers")
FOLLOWER_CHECK = 2.0
"""Seconds between a leader-only loop's looks at the Lease, were a wake-up ever missed."""


def always() -> bool:
    return True


class LoopRunner:
    """Threads for `loops`; `start()` once, `stop()` to end them."""

    def __init__(self, loops: Sequence[Loop], lease: Callable[[], bool] = always) -> None:
        self.loops = tuple(loops)
        self.lease = lease
        self.passes: dict[str, int] = {loop.name: 0 for loop in self.loops}
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> LoopRunner:
        for loop in self.loops:
            thread = threading.Thread(target=self._run, args=(loop,), name=loop.name, daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def wake_all(self) -> None:
        """Every loop looks again now (a `Leadership.on_change` listener)."""
        for loop in self.loops:
            loop.wake.set()

    def stop(self, timeout: float = 2.0) -> None:
        self._stop.set()
        self.wake_all()
        for thread in self._threads:
            thread.join(timeout)

    def due(self, loop: Loop) -> bool:
        """Whether `loop` may pass now: not stopped, and leading when it must."""
        return not self._stop.is_set() and (not loop.leading or self.lease())

    def step(self, loop: Loop) -> bool:
        """One pass if due, its failure logged; True when it ran."""
        if not self.due(loop):
            return False
        try:
            loop.pass_once()
        except Exception:
            log.exception("controller pass failed", extra={"loop": loop.name})
        self.passes[loop.name] += 1
        return True

    def _run(self, loop: Loop) -> None:
        while not self._stop.is_set():
            ran = self.step(loop)
            loop.wake.wait(loop.interval if ran else min(loop.interval, FOLLOWER_CHECK))
            loop.wake.clear()
