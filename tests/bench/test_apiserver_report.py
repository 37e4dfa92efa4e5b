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
from apiserver_objects import KINDS, VARIANTS


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


def _measured(per_variant: dict[tuple[str, str], float]) -> dict[tuple[str, str], Any]:
    """Ten cycles of each variant and kind, each cycle's samples 1,000 to 1,090 µs plus the
    variant's own offset."""
    return {
        key: apiserver_bench.Measured(
            sequential=[1000.0 + 10 * i + offset for _ in range(10) for i in range(10)],
            sequential_cycles=[cycle for cycle in range(10) for _ in range(10)],
        )
        for key, offset in per_variant.items()
    }


def test_targets_judge_what_dragate_adds_over_the_noop_on_the_same_stack() -> None:
    """A claim over the no-op validating webhook, twins pooled on both sides; a legacy Pod
    over the no-op pair that answers with dragate's patch. Each judged on the upper end of
    its interval, which a steady offset makes the offset itself."""
    measured = _measured(
        {
            ("validate", "claim"): 200.0, ("mutate", "claim"): 200.0,
            ("noop-validate", "claim"): 0.0, ("noop-mutate", "claim"): 0.0,
            ("mutate", "pod"): 700.0, ("noop-patch", "pod"): 300.0,
        }
    )  # fmt: skip
    results = {"apiserver": {"judged": apiserver_bench.judged(measured)}}
    judged = {
        t["name"].split(":")[0]: (t["measured"], t["met"])
        for t in report.targets(results)
        if t["name"].startswith("apiserver create")
    }
    assert judged == {
        "apiserver create p50 at 1 conn, dragate (validate + mutate) over the no-op webhook, "
        "claim": (0.2, True),
        "apiserver create p50 at 1 conn, dragate (mutate) over the no-op webhooks answering "
        "with its patch, pod": (0.4, False),
        "apiserver create p99 at 1 conn, dragate (validate + mutate) over the no-op webhook, "
        "claim": (0.2, True),
        "apiserver create p99 at 1 conn, dragate (mutate) over the no-op webhooks answering "
        "with its patch, pod": (0.4, True),
    }


def test_a_variant_not_measured_is_not_judged() -> None:
    measured = _measured({("mutate", "pod"): 0.0, ("noop-patch", "pod"): 0.0})
    assert [(j["kind"], j["quantile"]) for j in apiserver_bench.judged(measured)] == [
        ("pod", "p50"), ("pod", "p99"),
    ]  # fmt: skip


class _Client:
    """The API server's answer to every create: 201, each create's namespace recorded."""

    def __init__(self) -> None:
        self.created: list[str] = []

    def create(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        self.created.append(path.split("/namespaces/")[1].split("/", maxsplit=1)[0])
        return 201, body


def test_each_cycle_runs_a_block_of_every_variant_and_kind_in_a_rotated_order() -> None:
    from processcpu import CpuMeter

    client = _Client()
    measured = {(v, k): apiserver_bench.Measured() for v in VARIANTS for k in KINDS}
    apiserver_bench.cycles(client, range(3, 5), measured, CpuMeter({}))
    blocks = client.created[:: apiserver_bench.BLOCK]
    assert len(client.created) == 2 * len(VARIANTS) * len(KINDS) * apiserver_bench.BLOCK
    assert blocks[0] == "bench-validate-claim-seq"  # VARIANTS rotated by the cycle, 3
    assert blocks[len(VARIANTS) * len(KINDS)] == "bench-noop-mutate-claim-seq"
    validate = measured[("validate", "pod")]
    assert validate.sequential_cycles == [3] * 8 + [4] * 8
    assert validate.sequential_creates == 16


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
