"""Answering inside the apiserver's `?timeout=`: how long a review may take.

The review runs in the request's own thread with a `webhook.types.Deadline` made from this
budget; every step that may block bounds its wait by it, and every step that changes state
checks it first. So there is no second thread pool, no hand-off per review, and a review that
ran out of time stops instead of reserving quota after its answer was sent.
"""

from __future__ import annotations

import functools
import re

_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
MIN_BUDGET = 0.05


@functools.lru_cache(maxsize=64)
def parse_go_duration(text: str) -> float | None:
    """Seconds in a Go duration such as `10s`, `1m30s` or `500ms`; None when malformed.

    The API server sends the same `?timeout=` with every review: it is parsed once."""
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
