"""`run.py --merge`: re-running some sections keeps the others of the report as they were."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import pytest
import report
import run
import summary

MACHINE = {
    "nproc": 2,
    "cpu_model": "cpu",
    "memory_gib": 1,
    "python": "3",
    "gunicorn": "g",
    "wrk": "wrk",
    "openssl": "ssl",
    "loadavg_start": [9.0],
    "loadavg_end": [9.0],
}
LEDGER = [{"processes": 2, "overcommit": 0}]
OLD_RACE = {"processes": 2, "threads_per_process": 4, "admissions_per_s": 30.0, "overcommit": 0}
NEW_RACE = {**OLD_RACE, "admissions_per_s": 130.0}


def _write_previous(path: Path) -> None:
    previous = {
        "mode": "full",
        "machine": MACHINE,
        "ledger": LEDGER,
        "kube-ledger": {"races": [OLD_RACE]},
        "seconds": {"ledger": 1.0},
        "targets": [{"name": "stale"}],
    }
    path.write_text(json.dumps(previous))


@pytest.mark.parametrize(
    ("where", "named"),
    [("2 CPUs (cpu), 1 GiB", ""),
     ("4 CPUs (other), 8 GiB",
      " Measured on another machine: `kube-ledger` on 4 CPUs (other), 8 GiB.")],
    ids=["the-same-machine", "another-machine-is-named"],
)  # fmt: skip
def test_sections_run_now_replace_theirs_and_the_others_stay(
    tmp_path: Path, where: str, named: str
) -> None:
    _write_previous(tmp_path / "report.json")
    at, load = "2026-12-01T06:15:00Z", {"loadavg_start": [1.0], "loadavg_end": [1.2]}
    runs = {"kube-ledger": {"at": at, **load, "machine": where}}
    now: dict[str, Any] = {
        "mode": "full",
        "machine": {**MACHINE, "loadavg_start": [1.0]},
        "kube-ledger": {"races": [NEW_RACE]},
        "runs": runs,
        "seconds": {"kube-ledger": 60.0},
    }
    merged = run.merged(tmp_path / "report.json", now)
    assert merged["ledger"] == LEDGER
    assert merged["kube-ledger"]["races"] == [NEW_RACE]
    assert merged["seconds"] == {"ledger": 1.0, "kube-ledger": 60.0}
    assert "targets" not in merged  # recomputed by report.write from the merged sections
    report.write(merged, tmp_path)
    text = (tmp_path / "report.md").read_text()
    assert "| cluster ledger decisions/s, one tenant, 2 processes x 4 threads | 130.0 |" in text
    assert f"| kube-ledger | 2026-12-01T06:15:00Z | {where} | [1.0] | [1.2] |" in text
    line = summary.machine(merged)
    assert f"at its end.{named} Every figure" in line


def test_without_a_previous_report_the_run_is_the_report(tmp_path: Path) -> None:
    now: dict[str, Any] = {"mode": "quick", "machine": MACHINE}
    assert run.merged(tmp_path / "report.json", now) is now


def test_a_profile_alone_keeps_every_section_and_adds_no_re_run(tmp_path: Path) -> None:
    """`--merge --profile FILE --only`: the counts go in, nothing is marked re-run."""
    _write_previous(tmp_path / "report.json")
    profile = {"instructions": {"route/validate": 600_000, "pipeline/validate": 250_000}}
    now: dict[str, Any] = {"mode": "full", "machine": MACHINE, "profile": profile}
    merged = run.merged(tmp_path / "report.json", now)
    assert merged["ledger"] == LEDGER and merged["profile"] == profile
    assert not merged["merged"]
    report.write(merged, tmp_path)
    text = (tmp_path / "report.md").read_text()
    assert "| route/validate | 600,000 | 350,000 |" in text
    assert "Sections re-run since" not in text


def test_no_section_without_merge_is_refused(tmp_path: Path) -> None:
    """A run of no section into a fresh report would write an empty one over the last."""
    done = subprocess.run(
        [sys.executable, run.__file__, "--only", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert "it needs --merge" in done.stderr
    assert not list(tmp_path.iterdir())
