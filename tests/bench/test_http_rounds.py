"""The HTTP benchmark's rounds: a cell is the median of its rounds, a ratio is taken within
each round (figures given here; no server)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import http_bench


def _run(rps: float, p50_us: float) -> dict[str, Any]:
    figures = dict.fromkeys(("min_us", "p90_us", "p99_us", "max_us", "mean_us"), p50_us)
    return {"rps": rps, "p50_us": p50_us, "requests": 10, "errors": 0, "non_2xx": 0,
            "client": "wrk", **figures}  # fmt: skip


@pytest.mark.parametrize(
    ("rps", "median", "spread"),
    [([100.0], 100.0, 0.0), ([90.0, 100.0, 130.0], 100.0, 0.4), ([50.0, 150.0], 100.0, 1.0)],
    ids=["one-round", "odd", "even"],
)
def test_a_cell_is_the_median_of_its_rounds(rps: list[float], median: float, spread: float) -> None:
    row = http_bench.cell(8, [_run(r, 1000.0) for r in rps])
    assert (row["rps"], row["rps_spread"], row["rounds_rps"]) == (median, spread, rps)
    assert (row["rps_min"], row["rps_max"], row["requests"]) == (min(rps), max(rps), 10 * len(rps))


def _curves(noop: list[float], validate: list[float]) -> dict[str, Any]:
    def curve(rps: list[float], p50: float) -> list[dict[str, Any]]:
        return [http_bench.cell(c, [_run(r, p50 * c) for r in rps]) for c in (1, 8)]

    return {"curves": {"noop": curve(noop, 500.0), "validate": curve(validate, 800.0),
                       "mutate": curve(validate, 900.0)}}  # fmt: skip


@pytest.mark.parametrize(
    ("noop", "validate", "ratio", "spread"),
    [
        ([1000.0, 1000.0, 1000.0], [500.0, 600.0, 400.0], 0.5, [0.4, 0.6]),
        # the machine slowed in round 2 for both: within-round ratios stay 0.5, while the
        # ratio of the medians (400 / 1000) would say 0.4
        ([1000.0, 400.0, 1000.0], [500.0, 200.0, 400.0], 0.5, [0.4, 0.5]),
    ],
    ids=["steady", "drift-hits-both"],
)
def test_ratios_are_taken_within_each_round(
    noop: list[float], validate: list[float], ratio: float, spread: list[float]
) -> None:
    found = http_bench.ratios(_curves(noop, validate))
    assert found["validate_rps_ratio_at_8"] == ratio
    assert found["validate_rps_ratio_range_at_8"] == spread
    assert found["validate_p50_delta_ms_at_1"] == 0.3


def test_one_connection_apart_is_judged_on_its_own_rounds() -> None:
    """The `apart` cells (load generator on its own CPU) give their own p50 difference; a
    machine with one CPU measures none, and then no figure is made up."""
    result = _curves([1000.0], [500.0])
    result["apart"] = {
        "noop": http_bench.cell(1, [_run(2000.0, 400.0), _run(2000.0, 600.0)]),
        "validate": http_bench.cell(1, [_run(1500.0, 550.0), _run(1500.0, 800.0)]),
    }
    found = http_bench.ratios(result)
    assert found["validate_p50_delta_ms_at_1_apart"] == 0.175  # rounds: +150, +200 µs
    assert found["validate_p99_ms_at_1_apart"] == 0.675
    assert found["validate_p50_delta_ms_at_1"] == 0.3  # the shared measurement is kept
    assert "mutate_p50_delta_ms_at_1_apart" not in found  # no apart cell for /mutate
    assert "validate_p50_delta_ms_at_1_apart" not in http_bench.ratios(_curves([1.0], [1.0]))
