"""Whether this thread may wait on the network: a worker's event-loop thread may not.

A gunicorn worker answers a review on its event loop's own thread, sparing the hand-off to a
pool thread and back (a quarter of a no-op request's CPU). While it does, the loop serves no
other connection, so a review that would wait for the API server (a ledger write, a template
created, a read) stops before it does with WouldBlock, and the worker serves the request again
on a pool thread, where waiting is allowed. Reviews are pure up to those calls, so the first
attempt leaves nothing behind.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

_state = threading.local()


class WouldBlock(Exception):
    """Raised instead of waiting on the network where this thread must not wait.

    Not a DragateError: no layer may turn it into an outcome; it reaches the worker."""


@contextmanager
def forbidden() -> Iterator[None]:
    """While inside, `check` raises in this thread (other threads are not affected)."""
    before = getattr(_state, "forbidden", False)
    _state.forbidden = True
    try:
        yield
    finally:
        _state.forbidden = before


def check(what: str) -> None:
    """Raise WouldBlock if this thread may not wait; `what` names the wait, for the log."""
    if getattr(_state, "forbidden", False):
        raise WouldBlock(what)
