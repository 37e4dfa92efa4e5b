"""A daemon thread that loops until stopped, can be woken early, and may run only while its
process leads.

The reconciler, the template keeper and the rewrite-policy keeper do cluster-wide work that
one replica is enough for: each is given `leading` (the Lease holder's `Leadership.leading`,
kept as `lease_held`) and runs its passes only while it returns True; otherwise its thread
waits, woken when leadership changes (`Leadership.on_change`), so a replica that takes over
the Lease starts at once and one that loses it stops after the pass under way. Without
`leading` a loop always runs (offline, tests, and loops that check leadership per pass
themselves: the policy status and report writers).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Self

FOLLOWER_CHECK = 2.0
"""Seconds between a waiting loop's own checks of `leading`, were a wake-up ever missed."""


def always() -> bool:
    return True


class BackgroundLoop:
    """Subclasses implement `_loop`, looping `while self._running()` and sleeping on `_wake`."""

    thread_name = "background"

    def __init__(self, leading: Callable[[], bool] = always) -> None:
        self.lease_held = leading  # not `leading`: some subclasses check that per pass
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._starting = threading.Lock()

    def start(self) -> Self:
        """Start the loop; idempotent, also from racing threads, and cheap once started."""
        if self._thread is not None:
            return self
        with self._starting:
            if self._thread is None:
                thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
                thread.start()
                self._thread = thread
                self._started()
        return self

    def _started(self) -> None:
        """Called once, right after the thread started."""

    @property
    def has_started(self) -> bool:
        """Whether `start` was called (its thread may have ended since)."""
        return self._thread is not None

    def wake(self) -> None:
        """Look again now: work is due, or leadership changed (a `Leadership` listener)."""
        self._wake.set()

    @property
    def wake_event(self) -> threading.Event:
        """What `wake` sets: a runner that drives this loop's passes itself waits on it."""
        return self._wake

    def stop(self, timeout: float = 1.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _running(self) -> bool:
        """Whether `_loop` goes on: not stopped, and leading."""
        return not self._stop.is_set() and self.lease_held()

    def _sleep(self, seconds: float) -> None:
        """Wait `seconds`, or less when woken or stopped."""
        self._wake.wait(max(0.0, seconds))
        self._wake.clear()

    def _run(self) -> None:
        """`_loop` for each term of leadership; between terms, wait to be woken."""
        while not self._stop.is_set():
            if self.lease_held():
                self._loop()
            else:
                self._sleep(FOLLOWER_CHECK)

    def _loop(self) -> None:
        raise NotImplementedError
