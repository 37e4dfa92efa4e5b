"""The paired difference of a quantile and its bootstrap interval over measuring cycles."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import paired


def _cycles(per_cycle: list[list[float]]) -> paired.Cycles:
    return dict(enumerate(per_cycle))


FLAT = [[1000.0 + 10 * i for i in range(10)] for _ in range(20)]
SHIFTED = [[s + 500.0 for s in cycle] for cycle in FLAT]
ONE_SLOW_CYCLE = [*FLAT[:19], [s + 40_000.0 for s in FLAT[19]]]


@pytest.mark.parametrize(
    ("mine", "base", "fraction", "expected"),
    [
        (FLAT, FLAT, 0.99, (0.0, 0.0, 0.0)),
        (SHIFTED, FLAT, 0.5, (0.5, 0.5, 0.5)),
        (FLAT, SHIFTED, 0.99, (-0.5, -0.5, -0.5)),
    ],
    ids=["same-samples", "shifted-p50", "faster-p99"],
)
def test_a_steady_difference_has_no_spread(
    mine: list[list[float]],
    base: list[list[float]],
    fraction: float,
    expected: tuple[float, float, float],
) -> None:
    gap = paired.difference(_cycles(mine), _cycles(base), fraction, resamples=200)
    assert gap is not None
    assert (gap.estimate_ms, gap.low_ms, gap.high_ms) == expected
    assert (gap.cycles, gap.samples) == (20, 200)


def test_a_tail_from_one_cycle_widens_the_interval_past_the_estimate() -> None:
    """Ten slow samples (+40 ms), all in one cycle of twenty: the p99 (the 198th of 200)
    falls among them, but a resample that leaves that cycle out has no slow sample at all,
    so the interval reaches down to no difference."""
    gap = paired.difference(_cycles(ONE_SLOW_CYCLE), _cycles(FLAT), 0.99)
    assert gap is not None
    assert gap.estimate_ms == 39.98  # 41.07 ms, the slow cycle's 8th, over the flat 1.09
    assert gap.low_ms == 0.0  # resamples without the slow cycle
    assert gap.high_ms == 40.0  # resamples with it twice or more: their slowest


def test_the_interval_is_the_same_for_the_same_seed() -> None:
    mine, base = _cycles(ONE_SLOW_CYCLE), _cycles(SHIFTED)
    first = paired.difference(mine, base, 0.99, resamples=300)
    assert first == paired.difference(mine, base, 0.99, resamples=300)


def test_only_cycles_both_sides_measured_count() -> None:
    gap = paired.difference({0: [1000.0], 1: [9000.0]}, {0: [500.0]}, 0.5, resamples=50)
    assert gap is not None and (gap.estimate_ms, gap.cycles, gap.samples) == (0.5, 1, 1)
    assert paired.difference({0: [1.0]}, {1: [1.0]}, 0.5) is None


def test_samples_are_grouped_by_cycle_and_twins_pooled() -> None:
    first = paired.by_cycle([1.0, 2.0, 3.0], [0, 0, 1])
    second = paired.by_cycle([4.0], [1])
    assert paired.merged(first, second) == {0: [1.0, 2.0], 1: [3.0, 4.0]}
    with pytest.raises(ValueError, match="2 samples but 1 cycle numbers"):
        paired.by_cycle([1.0, 2.0], [0])
