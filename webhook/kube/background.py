"""A daemon thread that loops until stopped and can be woken early.

The reconciler and the template keeper both run beside the webhook in every gunicorn worker:
started after fork (threads do not survive it), woken by watch events, stopped promptly.
"""

from __future__ import annotations

import threading
from typing import Self


class BackgroundLoop:
    """Subclasses implement `_loop`, checking `_stop` and sleeping on `_wake`."""

    thread_name = "background"

    def __init__(self) -> None:
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._starting = threading.Lock()

    def start(self) -> Self:
        """Start the loop; idempotent, also from racing threads, and cheap once started.
        Call after forking."""
        if self._thread is not None:
            return self
        with self._starting:
            if self._thread is None:
                thread = threading.Thread(target=self._loop, name=self.thread_name, daemon=True)
                thread.start()
                self._thread = thread
                self._started()
        return self

    def _started(self) -> None:
        """Called once, right after the thread started."""

    def stop(self, timeout: float = 1.0) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _sleep(self, seconds: float) -> None:
        """Wait `seconds`, or less when woken or stopped."""
        self._wake.wait(max(0.0, seconds))
        self._wake.clear()

    def _loop(self) -> None:
        raise NotImplementedError
