"""How much a variant adds to a latency quantile over its baseline, with the interval a run
can vouch for.

On a shared two-CPU machine a create's tail comes from disturbances (the API server's
garbage collection, etcd's syncs, the controller's audit writes) that last tens of
milliseconds and slow every create in flight. The apiserver bench therefore measures its
variants in cycles: each cycle runs a short block of every variant in turn, so a disturbance
lands on the variants of one cycle alike. The figure judged is the difference of a quantile
over the pooled samples, and its interval comes from a bootstrap over whole cycles (each
resample draws cycles with replacement and takes both sides' samples of each drawn cycle):
what the samples of one cycle share, the resample keeps together, so the interval is as wide
as the run's disturbances make it and no narrower. A target is met only when the interval's
upper end is within it.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from timing import percentile

RESAMPLES = 2000
CONFIDENCE = 0.95
SEED = 5


@dataclass(frozen=True)
class Difference:
    """A quantile's difference in milliseconds: the estimate and its bootstrap interval."""

    estimate_ms: float
    low_ms: float
    high_ms: float
    cycles: int
    samples: int

    def as_dict(self) -> dict[str, float | int]:
        return asdict(self)


Cycles = dict[int, list[float]]
"""Samples in microseconds by the cycle they were measured in."""


def by_cycle(samples_us: Sequence[float], cycles: Sequence[int]) -> Cycles:
    """Samples grouped by their cycle (the two sequences run in parallel)."""
    if len(samples_us) != len(cycles):
        raise ValueError(f"{len(samples_us)} samples but {len(cycles)} cycle numbers")
    grouped: Cycles = {}
    for sample, cycle in zip(samples_us, cycles, strict=True):
        grouped.setdefault(cycle, []).append(sample)
    return grouped


def merged(*groups: Cycles) -> Cycles:
    """Several variants' samples as one side (twin variants pooled), cycle by cycle."""
    out: Cycles = {}
    for group in groups:
        for cycle, samples in group.items():
            out.setdefault(cycle, []).extend(samples)
    return out


def difference(
    mine: Cycles,
    base: Cycles,
    fraction: float,
    *,
    resamples: int = RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = SEED,
) -> Difference | None:
    """`mine`'s quantile `fraction` over `base`'s, on the cycles both sides measured (None
    when they share none)."""
    shared = sorted(mine.keys() & base.keys())
    if not shared:
        return None
    estimate = _gap(mine, base, shared, fraction)
    draw = random.Random(seed)
    spread = sorted(
        _gap(mine, base, draw.choices(shared, k=len(shared)), fraction) for _ in range(resamples)
    )
    tail = (1 - confidence) / 2
    return Difference(
        estimate_ms=round(estimate / 1000, 2),
        low_ms=round(percentile(spread, tail) / 1000, 2),
        high_ms=round(percentile(spread, 1 - tail) / 1000, 2),
        cycles=len(shared),
        samples=sum(len(mine[c]) for c in shared),
    )


def _gap(mine: Cycles, base: Cycles, cycles: Sequence[int], fraction: float) -> float:
    return _quantile(mine, cycles, fraction) - _quantile(base, cycles, fraction)


def _quantile(side: Cycles, cycles: Sequence[int], fraction: float) -> float:
    return float(percentile(sorted(s for c in cycles for s in side[c]), fraction))
