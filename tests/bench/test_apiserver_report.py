"""The apiserver benchmark's arithmetic and report, on figures given here (no cluster)."""

from __future__ import annotations

import json
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
    _row("noop-validate", "claim", 4000, 160),
    _row("validate", "claim", 4500, 100),
    _row("noop-mutate", "claim", 4200, 150),
    _row("noop-patch", "claim", 4300, 140),
    _row("mutate", "claim", 6000, 50),
    _row("mutate-map", "claim", 4400, 120),
    _row("none", "pod", 2000, 100),
    _row("validate", "pod", 2500, 50),
]


@pytest.mark.parametrize(
    ("variant", "kind", "expected"),
    [
        ("vap", "claim", (0.5, 1.0, 0.95, None)),
        ("noop-validate", "claim", (1.0, 2.0, 0.8, None)),
        ("validate", "claim", (1.5, 3.0, 0.5, 0.5)),
        ("mutate", "claim", (3.0, 6.0, 0.25, 1.8)),
        ("validate", "pod", (0.5, 1.0, 0.5, None)),  # no no-op row of this kind
    ],
    ids=["vap", "noop-validate", "validate", "mutate", "no-noop-of-the-kind"],
)
def test_added_is_measured_against_no_admission_and_the_noop_of_the_same_kind(
    variant: str, kind: str, expected: tuple[float, float, float, float | None]
) -> None:
    """(added p50 ms, added p99 ms, creates/s ratio, p50 ms over the no-op webhook)."""
    row = next(
        r for r in apiserver_bench.added(ROWS) if r["variant"] == variant and r["kind"] == kind
    )
    found = (row["added_p50_ms"], row["added_p99_ms"], row["creates_per_s_ratio"])
    assert (*found, row.get("over_noop_p50_ms")) == expected


def test_mutate_is_also_measured_against_the_noop_that_returns_dragates_patch() -> None:
    added = {(r["variant"], r["kind"]): r for r in apiserver_bench.added(ROWS)}
    assert added[("mutate", "claim")]["over_patch_p50_ms"] == 1.7
    assert "over_patch_p50_ms" not in added[("validate", "claim")]


def test_targets_judge_what_dragate_adds_over_the_noop_on_the_same_stack() -> None:
    """A claim against the no-op validating webhook; a legacy Pod against the no-op pair that
    answers with dragate's patch (ROWS has no Pod of those variants: the claim's stand in)."""
    rows = ROWS + [
        _row(v, "pod", p50, 100) for v, p50 in (("noop-mutate", 4000), ("noop-patch", 4700))
    ]
    rows += [_row("mutate", "pod", 4900, 60)]
    results = {"apiserver": {"added": apiserver_bench.added(rows)}}
    judged = {
        t["name"]: (t["measured"], t["met"])
        for t in report.targets(results)
        if t["name"].startswith("apiserver create p50")
    }
    assert judged == {
        "apiserver create p50 added by dragate over the no-op webhook, claim (validating; "
        "over no admission 1.5 ms)": (0.5, False),
        "apiserver create p50 added by dragate over the no-op webhooks answering with its "
        "patch, legacy Pod (validating + mutating; over the no-op pair that does not patch "
        "0.9 ms, over no admission 2.9 ms)": (0.2, True),
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
                "level": "seq",
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
    assert "| claim | validate | 1.5 | 3.0 | 0.5 |  | 0.5 |" in text
    assert "| claim | mutate | 3.0 | 6.0 | 1.8 | 1.7 | 0.25 |" in text
    assert "| validate | claim | seq | validate | 10 | 0.9 | 1.5 |" in text


def test_review_times_are_split_by_variant_kind_level_and_endpoint(tmp_path: Path) -> None:
    def line(ns: str, endpoint: str, ms: float, msg: str = "review") -> str:
        entry = {"msg": msg, "namespace": ns, "endpoint": endpoint, "duration_ms": ms}
        return json.dumps(entry)

    log = tmp_path / "dragate.log"
    log.write_text(
        "\n".join(
            [
                "not json: a gunicorn line",
                line("bench-validate-claim-seq", "validate", 0.25),
                line("bench-validate-claim-seq", "validate", 0.75),
                line("bench-validate-claim-conc", "validate", 9.0),
                line("bench-mutate-pod-seq", "mutate", 0.5),
                line("bench-validate-claim-seq", "validate", 7.0, msg="template created"),
                line("elsewhere", "validate", 3.0),
            ]
        )
    )
    found = {
        (r["variant"], r["kind"], r["level"], r["endpoint"]): (r["samples"], r["max_us"])
        for r in apiserver_bench.review_times(log)
    }
    assert found == {
        ("validate", "claim", "seq", "validate"): (2, 750.0),
        ("validate", "claim", "conc", "validate"): (1, 9000.0),
        ("mutate", "pod", "seq", "mutate"): (1, 500.0),
    }


@pytest.mark.parametrize("turn", [0, 1, 6, 7, 13], ids=lambda t: f"turn-{t}")
def test_every_round_runs_every_variant_once_in_another_order(turn: int) -> None:
    order = apiserver_bench.rotated(turn)
    assert sorted(order) == sorted(apiserver_bench.VARIANTS)
    assert order[0] == apiserver_bench.VARIANTS[turn % len(apiserver_bench.VARIANTS)]


def _with_cpu(row: dict[str, Any], apiserver: float, webhook: float) -> dict[str, Any]:
    groups = {"kube-apiserver": apiserver, "etcd": 1.0, "no-op": webhook, "load generator": 0.5}
    return {**row, "cpu_ms_per_create": {**groups, "total": sum(groups.values())}}


def test_cpu_per_create_is_added_over_no_admission_and_shown_by_process() -> None:
    rows = [
        _with_cpu(_row("none", "claim", 3000, 200), 2.5, 0.0),
        _with_cpu(_row("noop-validate", "claim", 4000, 160), 3.75, 0.9),
        _row("vap", "claim", 3500, 190),  # a run from before CPU was measured
    ]
    added = {r["variant"]: r for r in apiserver_bench.added(rows)}
    assert added["noop-validate"]["apiserver_cpu_added_ms"] == 1.25
    assert added["noop-validate"]["cpu_added_ms"] == 2.15
    assert "cpu_added_ms" not in added["vap"]
    api = {"rows": rows, "added": list(added.values()), "connections": 8}
    text = "\n".join(
        report._apiserver_tables({**api, "sequential_count": 1, "concurrent_count": 8})
    )
    assert "| noop-validate | claim | 3.75 | 1.0 |  | 0.9 | 0.5 | 6.15 |" in text
    assert "| vap | claim | 3.75" not in text
