"""The growth curve's arithmetic: a size's figures are the medians of its processes."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import growth


def _run(validate_p50: float, mutate_p50: float, rss: float) -> dict[str, Any]:
    def summary(p50: float) -> dict[str, Any]:
        return {"samples": 10, "p50_us": p50, "p99_us": 2 * p50, "note": "text is dropped"}

    return {
        "tenants": 10,
        "claims": 100,
        "seed_s": rss / 100,
        "validate": summary(validate_p50),
        "mutate": summary(mutate_p50),
        "rss_mib": rss,
        "peak_rss_mib": rss + 1,
        "master_pss_mib": 40.0,
        "worker_pss_mib": rss - 10,
        "pss_mib": rss + 30,
    }


def test_each_figure_is_the_median_of_the_processes_and_memory_the_largest() -> None:
    row = growth.combined(
        [_run(78.0, 90.0, 100.0), _run(51.0, 130.0, 120.0), _run(52.0, 88.0, 90.0)]
    )
    assert row["validate"] == {"samples": 10, "p50_us": 52.0, "p99_us": 104.0}
    assert row["mutate"]["p50_us"] == 90.0
    assert (row["rss_mib"], row["peak_rss_mib"], row["seed_s"]) == (120.0, 121.0, 1.0)
    assert (row["pss_mib"], row["master_pss_mib"], row["worker_pss_mib"]) == (150.0, 40.0, 110.0)
    assert [r["validate"]["p50_us"] for r in row["runs"]] == [78.0, 51.0, 52.0]
