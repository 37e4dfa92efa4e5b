"""Long loops that let other work run: one event loop serves every connection of the webhook.

`dragate serve` runs on gevent (webhook/admission/server.py): every connection is a greenlet,
and a greenlet that computes keeps the others waiting until it waits itself. Background work
that walks every claim or object of a cluster (the reconciler's truth, the audit) computes for
long stretches, so it iterates through `paced`, which yields after each slice of work.
Yielding is `time.sleep(0)`: under gevent's monkey patching it lets every ready greenlet run;
unpatched (the CLI, tests) it lets another thread take the GIL. Nothing here imports gevent.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")
SLICE_SECONDS = 0.002
"""How long a loop computes before it lets others run."""


def yield_now() -> None:
    """Let whatever else is ready run (a greenlet under gevent, a thread otherwise)."""
    time.sleep(0)


def paced(
    items: Iterable[T],
    *,
    slice_seconds: float = SLICE_SECONDS,
    clock: Callable[[], float] = time.perf_counter,
    pause: Callable[[], None] = yield_now,
) -> Iterator[T]:
    """`items`, with `pause()` between two of them whenever a slice has been used up."""
    due = clock() + slice_seconds
    for item in items:
        yield item
        now = clock()
        if now >= due:
            pause()
            due = clock() + slice_seconds
