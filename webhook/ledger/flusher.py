"""The thread that writes what a process admitted from its grants, moments after.

An admission answered from a grant (`grants.GrantBook.admit`) only queues its holder; this
thread, one per process, writes each tenant's queued holders within FLUSH_INTERVAL of the
first (a burst shares one write), sizes the grant again in the same write, and gives back
the grant of a tenant that went idle or that another process wants. The composer starts
it (`grantloops.GrantLoops`) and, at shutdown, `drain` gives everything back.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from webhook.kube.background import BackgroundLoop
from webhook.ledger.grants import GrantBook
from webhook.types import DragateError

log = logging.getLogger("dragate.ledger.flusher")

RETRY_SECONDS = 0.5
"""A tenant whose flush failed (the API unreachable) is tried again after this."""


class Flusher(BackgroundLoop):
    """Calls `flush(tenant)` for every tenant the book says is due, until stopped."""

    thread_name = "ledger-flusher"

    def __init__(self, book: GrantBook, flush: Callable[[str], None]) -> None:
        super().__init__()
        self.book = book
        self.flush = flush
        self.flushes = 0  # tenants flushed (for tests and metrics)
        self.failures = 0
        self._flush_ok = True  # whether the last flush succeeded

    def drain(self, timeout: float = 2.0) -> None:
        """Write what is queued and give every grant back, for at most `timeout` seconds."""
        self.book.closing = True
        self._stop.set()
        self.book.queued_signal.set()
        if self._thread is not None:
            self._thread.join(timeout)
        ends = time.monotonic() + timeout
        while time.monotonic() < ends and self.book.has_work():
            if not self._flush_due():
                time.sleep(0.005)  # a flush interval to pass; a failure ends the drain
            if self.failures and not self._flush_ok:
                return

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.book.queued_signal.clear()
            self._flush_due()
            self.book.queued_signal.wait(self.book.next_due_in())

    def _flush_due(self) -> bool:
        """Flush every due tenant; False when none was due."""
        due = self.book.due()
        for tenant in due:
            try:
                self.flush(tenant)
                self.flushes += 1
                self._flush_ok = True
            except DragateError as error:  # FactsUnavailable: the API did not answer in time
                self.failures += 1
                self._flush_ok = False
                log.warning("writing the grant of tenant %r failed: %s", tenant, error)
                self.book.retry_later(tenant, RETRY_SECONDS)
            except Exception:  # the loop must survive a bug in one flush
                self.failures += 1
                self._flush_ok = False
                log.exception("writing the grant of tenant %r failed", tenant)
                self.book.retry_later(tenant, RETRY_SECONDS)
        return bool(due)
