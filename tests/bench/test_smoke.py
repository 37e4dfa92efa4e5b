"""CI smoke for the benchmark harness: `run.py --quick` makes every report with every key.

No timing is asserted (CI machines vary); only that the harness runs end to end. The HTTP
section uses wrk when installed and falls back to the Python client otherwise.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

RUN = Path(__file__).resolve().parent / "run.py"
SECTIONS = (
    "http",
    "engine",
    "inventory",
    "migrate",
    "ledger",
    "growth",
    "holders",
    "gangs",
    "audit",
)
SUMMARY_KEYS = {"min_us", "p50_us", "p99_us", "max_us"}


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:  # type: ignore[type-arg]
    out = tmp_path_factory.mktemp("bench")
    subprocess.run(
        [sys.executable, str(RUN), "--quick", "--out", str(out)], check=True, timeout=240
    )
    return out, json.loads((out / "report.json").read_text())


def test_report_files_are_written(report: tuple[Path, dict]) -> None:  # type: ignore[type-arg]
    out, _ = report
    assert (out / "report.md").read_text().startswith("# dragate benchmarks")
    png = out / "latency.png"
    pytest.importorskip("matplotlib")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_report_has_every_section_and_machine(report: tuple[Path, dict]) -> None:  # type: ignore[type-arg]
    _, data = report
    assert set(SECTIONS) <= data.keys()
    assert {"nproc", "cpu_model", "python", "gunicorn"} <= data["machine"].keys()


def test_http_curves_compare_against_noop(report: tuple[Path, dict]) -> None:  # type: ignore[type-arg]
    _, data = report
    http = data["http"]
    assert set(http["curves"]) == {"noop", "validate", "mutate"}
    for curve in http["curves"].values():
        for row in curve:
            assert SUMMARY_KEYS | {"connections", "rps", "rps_min", "rps_max"} <= row.keys()
            assert row["non_2xx"] == 0 and len(row["rounds_rps"]) == http["rounds"]
    assert {"validate_rps_ratio_at_8", "validate_p50_delta_ms_at_1"} <= http["ratios"].keys()
    if len(os.sched_getaffinity(0)) > 1:  # the load generator on a CPU of its own
        assert set(http["apart"]) == {"noop", "validate", "mutate"}
        assert "validate_p50_delta_ms_at_1_apart" in http["ratios"]
    assert http["verdicts"]["mutate"]["patched"]


def test_curves_and_targets(report: tuple[Path, dict]) -> None:  # type: ignore[type-arg]
    _, data = report
    assert data["engine"][0].keys() >= SUMMARY_KEYS
    assert {"cold_ms", "warm_ms", "devices"} <= data["inventory"][0].keys()
    assert {"migrate_docs_per_s", "ratio", "check_migrated_docs_per_s"} <= data["migrate"][0].keys()
    assert all(row["overcommit"] == 0 for row in data["ledger"])
    assert {"validate", "mutate", "rss_mib", "pss_mib"} <= data["growth"][0].keys()
    for pod in [*(data["growth"]), *data["http"]["memory"].values()]:
        assert pod["pss_mib"] == round(pod["master_pss_mib"] + pod["worker_pss_mib"], 1)
        assert pod["master_pss_mib"] > 0 and pod["worker_pss_mib"] > 0
    assert [level["holders"] > 0 for level in data["holders"]] == [True, True]
    measured = {"new_pod", "readmitted", "new_pod_p50_ratio", "grant_write"}
    assert measured | {"grant_write_p50_ratio"} <= data["holders"][0].keys()
    assert [row["ledger"] for row in data["gangs"]] == ["memory", "sqlite"]
    gang_keys = {"gang", "member_pod", "ordinary_pod", "member_over_ordinary_p50"}
    assert gang_keys <= data["gangs"][0].keys()
    assert all({"name", "measured", "target", "met"} <= t.keys() for t in data["targets"])


def test_audit_passes_find_the_tenants_over_quota(report: tuple[Path, dict]) -> None:  # type: ignore[type-arg]
    _, data = report
    audit = data["audit"]
    assert [(r["tenants"], r["order"]) for r in audit] == [
        (10, "listed"),
        (10, "created"),
        (50, "listed"),
        (50, "created"),
    ]
    for row in audit:
        over_quota = row["tenants"] // 10  # their ten claims each fail
        assert (row["fail"], row["warn"]) == (over_quota * 10, 0)
        assert row["results"] == row["fail"] + row["pass"] >= row["claims"]
        assert row["reports"] > row["tenants"] and row["peak_rss_mib"] >= row["state_rss_mib"]
    assert [t["met"] is not None for t in data["targets"] if t["name"].startswith("audit")] == [
        True,
        True,
    ]


def test_merge_keeps_the_sections_not_run(
    report: tuple[Path, dict],
    tmp_path: Path,  # type: ignore[type-arg]
) -> None:
    out, earlier = report
    (tmp_path / "report.json").write_text((out / "report.json").read_text())
    profile = {"instructions": {"route/validate": 3, "pipeline/validate": 2}}
    (tmp_path / "profile.json").write_text(json.dumps(profile))
    subprocess.run(
        [
            sys.executable,
            str(RUN),
            "--quick",
            "--only",
            "ledger",
            "--merge",
            "--profile",
            str(tmp_path / "profile.json"),
            "--out",
            str(tmp_path),
        ],
        check=True,
        timeout=240,
    )
    merged = json.loads((tmp_path / "report.json").read_text())
    assert merged["http"] == earlier["http"] and merged["engine"] == earlier["engine"]
    assert merged["merged"] and merged["runs"]["http"] == earlier["runs"]["http"]
    text = (tmp_path / "report.md").read_text()
    assert "Sections re-run since" in text
    assert "| route/validate | 3 | 1 |" in text
