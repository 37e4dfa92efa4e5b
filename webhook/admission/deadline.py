"""Answering inside the apiserver's `?timeout=`: run the review on a pool, wait a bounded time.

A gthread worker cannot interrupt a thread, so a review that overruns keeps running in the
pool while the caller answers; its result is discarded. The pool is per process and made
lazily, so it is created after gunicorn forks the worker.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TypeVar

T = TypeVar("T")
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
MIN_BUDGET = 0.05


class DeadlineExceeded(Exception):
    """The review did not finish inside its budget."""


def parse_go_duration(text: str) -> float | None:
    """Seconds in a Go duration such as `10s`, `1m30s` or `500ms`; None when malformed."""
    text = text.strip()
    if not text or _PART.sub("", text):
        return None
    seconds = sum(float(n) * _UNITS[u] for n, u in _PART.findall(text))
    return seconds if seconds > 0 else None


def budget(timeout_param: str | None, default: float, margin: float) -> float:
    """How long a review may run: the apiserver's timeout (or the default) minus a margin."""
    total = parse_go_duration(timeout_param) if timeout_param else None
    total = min(total or default, 30.0)  # the apiserver never waits longer than 30s
    return max(total - min(margin, total / 4), MIN_BUDGET)


class DeadlineRunner:
    """Runs calls on a per-process pool and waits at most their budget for each."""

    def __init__(self, max_workers: int) -> None:
        self._max_workers = max_workers
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._pid = 0

    def run(self, call: Callable[[], T], seconds: float) -> T:
        future: Future[T] = self._executor().submit(call)
        try:
            return future.result(timeout=seconds)
        except FutureTimeout:
            future.cancel()
            raise DeadlineExceeded(f"review did not finish within {seconds:.2f}s") from None

    def _executor(self) -> ThreadPoolExecutor:
        """The pool of this process; a pool inherited through fork has no threads, so remake it."""
        with self._lock:
            if self._pool is None or self._pid != os.getpid():
                self._pool = ThreadPoolExecutor(self._max_workers, thread_name_prefix="review")
                self._pid = os.getpid()
            return self._pool
