"""The documents show the committed report's figures, and only run.py's full runs rewrite them."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import report
import run
import summary

REPORT: dict[str, Any] = json.loads((run.RESULTS / "report.json").read_text())
TARGETS = report.targets(REPORT)


@pytest.mark.parametrize(
    ("document", "brief"), run.DOCUMENTS, ids=[p.name for p, _ in run.DOCUMENTS]
)
def test_the_documents_show_the_reports_results(document: Path, brief: bool) -> None:
    shown = summary.block(document.read_text())
    assert shown == summary.table(REPORT, TARGETS, brief), (
        f"{document} does not show tests/bench/results/report.json: write it with "
        "summary.write (run.py does after a full run)"
    )


def test_report_md_is_the_markdown_of_report_json() -> None:
    assert (run.RESULTS / "report.md").read_text() == report.markdown(
        {**REPORT, "targets": TARGETS}
    )


def test_the_brief_table_is_a_subset_of_the_full_one() -> None:
    full = summary.table(REPORT, TARGETS).splitlines()
    brief = summary.table(REPORT, TARGETS, brief=True).splitlines()
    assert set(brief) <= set(full) and len(brief) < len(full)


TEXT = f"# Doc\n\nbefore\n{summary.START}\nold table\n{summary.END}\nafter\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (TEXT, f"# Doc\n\nbefore\n{summary.START}\nnew\n{summary.END}\nafter\n"),
        ("# Doc without markers\n", ValueError),
        (TEXT + TEXT, ValueError),
        (f"{summary.END}\n{summary.START}\n", ValueError),
    ],
    ids=["replaced", "no markers", "two blocks", "markers reversed"],
)
def test_only_the_block_between_the_markers_is_replaced(
    text: str, expected: str | type[Exception]
) -> None:
    if isinstance(expected, str):
        assert summary.replaced(text, "new\n") == expected
    else:
        with pytest.raises(expected):
            summary.replaced(text, "new\n")


def _target(name: str, met: bool | None) -> dict[str, Any]:
    return {"name": name, "met": met}


@pytest.mark.parametrize(
    ("targets", "names", "expected"),
    [
        ([_target("a p50", True), _target("a p99", True)], ("a p50", "a p99"), "met"),
        ([_target("a p50", True), _target("a p99", False)], ("a p50", "a p99"), "met / **missed**"),
        ([_target("x claim", True), _target("x pod", False)], ("x",), "**missed**"),
        ([_target("y", True), _target("y, apart", False)], ("y",), "met"),
        ([_target("z", None)], ("z",), "n/a"),
        ([], ("absent",), "n/a"),
    ],
    ids=["all met", "one missed", "prefix: any missed", "exact name first", "unmeasured", "absent"],
)
def test_a_rows_verdict_joins_its_targets(
    targets: list[dict[str, Any]], names: tuple[str, ...], expected: str
) -> None:
    assert summary.verdict(targets, *names) == expected


@pytest.mark.parametrize(
    ("out", "mode", "written"),
    [
        (run.RESULTS, "full", True),
        (run.RESULTS, "quick", False),
        (Path("/tmp/elsewhere"), "full", False),
    ],
    ids=["full run into results", "quick run", "another --out"],
)
def test_only_a_full_report_into_the_results_directory_rewrites_the_documents(
    out: Path, mode: str, written: bool
) -> None:
    assert bool(run.documents_to_update(out, mode)) is written


def test_a_report_without_sections_gives_an_empty_table() -> None:
    bare = {"machine": REPORT["machine"]}
    assert summary.rows(bare, []) == []


def _audit_row(order: str, pass_s: float) -> dict[str, Any]:
    return {"tenants": 10_000, "claims": 100_000, "order": order, "pass_s": pass_s,
            "fail": 10_000, "results": 100_012, "reports": 10_001,
            "peak_rss_mib": 434.6}  # fmt: skip


@pytest.mark.parametrize(
    ("created_s", "expected"),
    [(40.0, "met"), (110.6, "**missed**")],
    ids=["both orders within the interval", "one order past it"],
)
def test_the_audit_row_is_judged_on_every_order_at_the_largest_size(
    created_s: float, expected: str
) -> None:
    small = {**_audit_row("created", 99.0), "tenants": 10, "claims": 100}
    results = {"audit": [small, _audit_row("listed", 18.4), _audit_row("created", created_s)]}
    (row,) = summary.rows(results, report.targets(results))
    assert row.verdict == expected and row.target == "≤ 60 s per pass (the audit interval)"
    assert row.measured.startswith(f"18.4 / {created_s:.1f} s / 435 MiB")


def _api_row(variant: str, failed: tuple[int, int], slowest_us: float) -> dict[str, Any]:
    seq = {"samples": 40, "failed": failed[0], "max_us": 9000.0}
    conc = {"samples": 80, "failed": failed[1], "max_us": slowest_us}
    return {"variant": variant, "kind": "pod", "sequential": seq, "concurrent": conc}


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        ([_api_row("validate", (0, 0), 1e4)], "none"),
        (
            [_api_row("validate", (0, 0), 1e4), _api_row("mutate", (1, 7), 5.03e6)],
            "mutate pod: 8 of 120 (the slowest create 5.0 s)",
        ),
    ],
    ids=["none failed", "one variant failed"],
)
def test_failed_creates_name_their_variant_and_the_slowest(
    rows: list[dict[str, Any]], expected: str
) -> None:
    assert summary._failed(rows) == expected
