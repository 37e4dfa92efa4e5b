"""The apiserver benchmark's arithmetic and report, on figures given here (no cluster)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import apiserver_bench
import report


def _row(variant: str, kind: str, p50_us: float, rate: float) -> dict[str, Any]:
    summary = {
        "samples": 10,
        "min_us": p50_us,
        "p50_us": p50_us,
        "p90_us": p50_us,
        "p99_us": 2 * p50_us,
        "max_us": 3 * p50_us,
        "failed": 0,
    }
    return {
        "variant": variant,
        "kind": kind,
        "sequential": summary,
        "concurrent": {**summary, "creates_per_s": rate, "connections": 8},
    }


ROWS = [
    _row("none", "claim", 3000, 200),
    _row("vap", "claim", 3500, 190),
    _row("validate", "claim", 4500, 100),
    _row("mutate", "claim", 6000, 50),
]


@pytest.mark.parametrize(
    ("variant", "p50_ms", "p99_ms", "ratio"),
    [("vap", 0.5, 1.0, 0.95), ("validate", 1.5, 3.0, 0.5), ("mutate", 3.0, 6.0, 0.25)],
    ids=["vap", "validate", "mutate"],
)
def test_added_is_measured_against_no_admission_of_the_same_kind(
    variant: str, p50_ms: float, p99_ms: float, ratio: float
) -> None:
    row = next(r for r in apiserver_bench.added(ROWS) if r["variant"] == variant)
    assert (row["added_p50_ms"], row["added_p99_ms"], row["creates_per_s_ratio"]) == (
        p50_ms,
        p99_ms,
        ratio,
    )


def test_targets_judge_dragate_and_name_the_vap_figure() -> None:
    results = {"apiserver": {"added": apiserver_bench.added(ROWS)}}
    judged = {t["name"]: t["met"] for t in report.targets(results) if "apiserver" in t["name"]}
    assert judged == {
        "apiserver create p50 added by dragate validating, claim "
        "(a ValidatingAdmissionPolicy adds 0.5 ms)": True,
        "apiserver create p50 added by dragate validating + mutating, claim "
        "(a ValidatingAdmissionPolicy adds 0.5 ms)": False,
    }


def test_tables_show_every_variant() -> None:
    api = {
        "rows": ROWS,
        "added": apiserver_bench.added(ROWS),
        "connections": 8,
        "sequential_count": 10,
        "concurrent_count": 80,
        "reviews": [
            {
                "variant": "validate",
                "kind": "claim",
                "endpoint": "validate",
                "samples": 10,
                "p50_us": 900.0,
                "p99_us": 1500.0,
            }
        ],
    }
    text = "\n".join(report._apiserver_tables(api))
    for variant in apiserver_bench.VARIANTS:
        assert f"| {variant} | claim |" in text
    assert "| validate | claim | validate | 10 | 0.9 | 1.5 |" in text
