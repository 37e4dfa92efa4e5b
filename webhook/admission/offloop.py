"""Work that must not stall the serving loop: run in a real OS thread of gevent's threadpool.

`dragate serve` answers every connection on one gevent loop (server.py), and a greenlet that
computes keeps every other connection waiting until it is done: compiling a policy set of
thousands of Tenants is such work. In a thread of gevent's threadpool (its public API,
`gevent.get_hub().threadpool`) it shares the interpreter with the loop the way two threads
do, taking turns at the GIL, so the loop goes on answering; the greenlet that asked waits
cooperatively for the result.

The collector is paused while such work runs and what it made is frozen before it resumes, as
`app.settle_collector` does at start: a full collection holds the GIL for as long as it walks
what the work is building (long, for thousands of Tenants), a stall of every
connection no thread can avoid. A policy set holds no reference cycles, so one replaced later
is still freed by reference counting. Outside gevent (the CLI, tests, the gunicorn master) the work
runs on the caller, as before.
"""

from __future__ import annotations

import gc
import sys
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
SWITCH_SECONDS = 0.001
"""The interpreter's GIL switch interval while such work runs: how long the loop may wait for
the GIL when it wakes for a connection (shorter than CPython's default, paid at every
wake-up)."""


def off_loop(work: Callable[[], T]) -> T:
    """`work()`, in a threadpool thread when this process serves on gevent's loop; what it
    raises is raised here."""
    if not _on_gevent():
        return work()
    import gevent  # noqa: PLC0415  (only in a process that runs on gevent)

    previous, collecting = sys.getswitchinterval(), gc.isenabled()
    sys.setswitchinterval(min(previous, SWITCH_SECONDS))
    gc.disable()
    try:
        result: T = gevent.get_hub().threadpool.apply(work)
    finally:
        sys.setswitchinterval(previous)
        if collecting:
            gc.freeze()
            gc.enable()
    return result


def _on_gevent() -> bool:
    """Whether gevent patched `threading` in this process (gunicorn's gevent worker does)."""
    monkey = sys.modules.get("gevent.monkey")
    return monkey is not None and bool(monkey.is_module_patched("threading"))


def yield_now() -> None:
    """Let whatever else is ready run: every ready greenlet on gevent's loop (a review's
    `Deadline` pauses with it between slices of its own work), another thread otherwise."""
    time.sleep(0)
