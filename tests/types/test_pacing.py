from __future__ import annotations

import itertools

import pytest

from webhook.types.pacing import paced


class Ticks:
    """A clock that moves `step` seconds each time it is read."""

    def __init__(self, step: float) -> None:
        self._now = itertools.count()
        self._step = step

    def __call__(self) -> float:
        return next(self._now) * self._step


@pytest.mark.parametrize(
    ("items", "step", "pauses"),
    [
        pytest.param(10, 0.0, 0, id="instant-work-never-pauses"),
        pytest.param(10, 0.25, 5, id="a-pause-per-slice"),
        pytest.param(10, 1.0, 10, id="slow-items-pause-after-each"),
        pytest.param(0, 1.0, 0, id="nothing-to-do"),
    ],
)
def test_paced_pauses_once_per_used_up_slice(items: int, step: float, pauses: int) -> None:
    calls: list[int] = []
    seen = list(
        paced(range(items), slice_seconds=0.5, clock=Ticks(step), pause=lambda: calls.append(1))
    )
    assert seen == list(range(items))
    assert len(calls) == pauses
