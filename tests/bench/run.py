"""dragate's benchmark harness: one command, a JSON and a Markdown report and a PNG plot.

    python tests/bench/run.py [--quick] [--out DIR] [--only SECTION ...] [--merge]
                              [--client auto|wrk|python] [--audit-load TENANTS,CLAIMS]

Sections: http (dragate serve vs a no-op app under the same gunicorn and TLS, keep-alive
connections 1..16), engine, inventory, migrate, ledger, growth, holders (one tenant's
claims, 0 to 6,000, under a new Pod's review), gangs (a 1,000-Pod Job's review and its
Pods' drawing from its reservation against an ordinary Pod's, memory and SQLite ledgers),
audit (one background audit pass, 10 tenants / 100 claims to 10,000 / 100,000, seconds and
peak memory), and two that need a real
etcd + kube-apiserver: kube-ledger (the cluster ledger) and apiserver (create latency and
creates/s with no admission, a ValidatingAdmissionPolicy, dragate validating, dragate
validating + mutating, dragate as the chart runs it: a webhook process and a controller
process beside it, auditing `--audit-load` Tenants and ResourceClaims, default
10,000 / 100,000, while the creates are measured); in a full run only when the e2e
toolchain is built, never in `--quick` unless named with --only. `--quick` uses tiny
counts (seconds; what CI's smoke test runs); the full run takes several minutes. Writes
report.json, report.md and latency.png (with matplotlib: `pip install -e '.[bench]'`) to
--out (default tests/bench/results). Needs wrk for the HTTP figures (Debian: `apt-get
install wrk`), else falls back to a Python client. `--merge` keeps the sections of the
report.json already in --out that this run does not make (re-running a few sections, e.g.
late when the machine is quiet); `runs` in the JSON says when and under what load each
section was measured. `--merge --profile FILE --only` (no section) runs nothing: it puts
the instruction counts of `instructions.py` into the report already there. A full report
written to tests/bench/results also becomes the results table of docs/benchmarks.md and
README.md (`summary.py`, between its markers), so the documents show the report's figures.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import apiserver_bench
import audit_bench
import engine
import gangs_bench
import growth
import holders
import http_bench
import inventory
import kube_ledger_bench
import ledger_bench
import machine
import migrate_bench
import report
import summary
from apiserver_load import parse_audit_load

RESULTS = Path(__file__).resolve().parent / "results"
REPO = Path(__file__).resolve().parents[2]
DOCUMENTS = ((REPO / "docs" / "benchmarks.md", False), (REPO / "README.md", True))
"""Where the results table goes, and whether the document shows the brief one."""
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
OPTIONAL = ("kube-ledger", "apiserver")  # needs the e2e toolchain; never part of --quick by default


@dataclass(frozen=True)
class Sizes:
    """Iteration counts and input sizes for one mode."""

    http_levels: tuple[int, ...]
    http_seconds: float  # per round of a (target, connections) cell
    engine_iterations: int
    inventory_nodes: tuple[int, ...]
    migrate_docs: tuple[int, ...]
    ledger_per_process: int
    growth_sizes: tuple[tuple[int, int], ...]
    growth_iterations: int
    kube_ledger_per_process: int = 300
    apiserver_counts: tuple[int, int] = (3840, 960)  # sequential, concurrent creates
    apiserver_audit_load: str = apiserver_bench.FULL_LOAD  # tenants, claims held while measuring
    http_rounds: int = 5
    migrate_repeats: int = migrate_bench.REPEATS
    holder_levels: tuple[int, ...] = (0, 500, 2000, 6000)
    holder_iterations: int = 200
    gang_pods: int = 1000
    gang_repetitions: int = 50
    audit_sizes: tuple[tuple[int, int], ...] = (
        (10, 100),
        (100, 1_000),
        (1_000, 10_000),
        (10_000, 100_000),
    )


FULL = Sizes(
    (1, 2, 4, 8, 16),
    2,
    20_000,
    (125, 1250, 6250),
    (100, 400, 1600),
    400,
    ((10, 100), (100, 1_000), (1_000, 10_000), (10_000, 100_000)),
    5_000,
)
QUICK = Sizes(
    (1, 8),
    1,
    300,
    (125,),
    (20,),
    20,
    ((10, 100), (100, 1_000)),
    200,
    kube_ledger_per_process=40,
    migrate_repeats=1,
    apiserver_counts=(20, 40),
    apiserver_audit_load="20,200",
    http_rounds=2,
    holder_levels=(0, 100),
    holder_iterations=20,
    gang_pods=60,
    gang_repetitions=5,
    audit_sizes=((10, 100), (50, 500)),
)


def sections(sizes: Sizes, tmp: Path, client: str) -> dict[str, Callable[[], Any]]:
    def http() -> dict[str, Any]:
        result = http_bench.run(
            tmp / "http", sizes.http_levels, sizes.http_seconds, client, sizes.http_rounds
        )
        return {**result, "ratios": http_bench.ratios(result)}

    return {
        "http": http,
        "engine": lambda: engine.curve(sizes.engine_iterations),
        "inventory": lambda: [inventory.measure(n) for n in sizes.inventory_nodes],
        "migrate": lambda: migrate_bench.curve(
            tmp / "migrate", sizes.migrate_docs, sizes.migrate_repeats
        ),
        "ledger": lambda: ledger_bench.curve(sizes.ledger_per_process),
        "growth": lambda: growth.curve(sizes.growth_sizes, sizes.growth_iterations),
        "holders": lambda: holders.curve(sizes.holder_levels, sizes.holder_iterations),
        "gangs": lambda: gangs_bench.curve(sizes.gang_pods, sizes.gang_repetitions),
        "audit": lambda: audit_bench.curve(sizes.audit_sizes),
        "kube-ledger": lambda: kube_ledger_bench.curve(sizes.kube_ledger_per_process),
        "apiserver": lambda: apiserver_bench.curve(
            *sizes.apiserver_counts, parse_audit_load(sizes.apiserver_audit_load)
        ),
    }


def chosen_sizes(quick: bool, audit_load: str | None, error: Callable[[str], Any]) -> Sizes:
    """The mode's sizes, with the apiserver section's audit load when one is given."""
    sizes = QUICK if quick else FULL
    if audit_load is None:
        return sizes
    try:
        parse_audit_load(audit_load)
    except ValueError as err:
        error(str(err))
    return replace(sizes, apiserver_audit_load=audit_load)


def _load() -> list[float]:
    """1, 5 and 15 minute load averages: other work on the machine skews the figures."""
    return [round(x, 2) for x in os.getloadavg()]


def merged(previous: Path, results: dict[str, Any]) -> dict[str, Any]:
    """The report in `previous` with this run's sections (and their `runs`) put in; marked
    `merged` (its sections from several runs) only once a section was re-run."""
    if not previous.exists():
        return results
    old: dict[str, Any] = json.loads(previous.read_text())
    old.pop("targets", None)  # recomputed from the merged sections
    runs = {**old.get("runs", {}), **results.get("runs", {})}
    seconds = {**old.get("seconds", {}), **results.get("seconds", {})}
    return {
        **old,
        **results,
        "machine": old.get("machine", results["machine"]),
        "mode": old.get("mode", results["mode"]),
        "runs": runs,
        "seconds": seconds,
        "merged": bool(old.get("merged")) or bool(results.get("runs")),
    }


def documents_to_update(out: Path, mode: str) -> tuple[tuple[Path, bool], ...]:
    """The documents whose results table a report becomes: only a full report written where
    the documents link (a quick run or another --out leaves them alone)."""
    return DOCUMENTS if out.resolve() == RESULTS and mode == "full" else ()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny counts: seconds, not minutes")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--only", nargs="*", choices=SECTIONS + OPTIONAL, help="no section: with --merge only"
    )
    parser.add_argument("--client", choices=("auto", "wrk", "python"), default="auto")
    parser.add_argument(
        "--merge", action="store_true", help="keep the other sections of the report.json in --out"
    )
    parser.add_argument(
        "--profile",
        type=Path,
        metavar="FILE",
        help="JSON: instructions per review (instructions.py --summarize --json) for the report",
    )
    parser.add_argument(
        "--audit-load",
        metavar="TENANTS,CLAIMS",
        help="apiserver: Tenants and ResourceClaims in the cluster while measuring (default "
        f"{FULL.apiserver_audit_load}, --quick {QUICK.apiserver_audit_load}; none: no load)",
    )
    args = parser.parse_args()
    if args.only == [] and not args.merge:
        parser.error("--only without a section runs nothing: it needs --merge")
    sizes = chosen_sizes(args.quick, args.audit_load, parser.error)
    if args.only is None:
        built = not args.quick and kube_ledger_bench.toolchain() is not None
        args.only = list(SECTIONS) + (list(OPTIONAL) if built else [])
    results: dict[str, Any] = {
        "mode": "quick" if args.quick else "full",
        "machine": {**machine.describe(), "loadavg_start": _load()},
    }
    with tempfile.TemporaryDirectory(prefix="dragate-bench-") as tmp:
        for name, section in sections(sizes, Path(tmp), args.client).items():
            if name in args.only:
                started = time.perf_counter()
                print(f"bench: {name} ...", file=sys.stderr, flush=True)
                load = _load()
                results[name] = section()
                results.setdefault("seconds", {})[name] = round(time.perf_counter() - started, 1)
                results.setdefault("runs", {})[name] = {
                    "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    "loadavg_start": load,
                    "loadavg_end": _load(),
                    "machine": machine.short(results["machine"]),
                }
    results["machine"]["loadavg_end"] = _load()
    if args.profile is not None:
        results["profile"] = json.loads(args.profile.read_text())
    if args.merge:
        results = merged(args.out / "report.json", results)
    for kind, path in report.write(results, args.out).items():
        print(f"bench: {kind} report {path}", file=sys.stderr)
    documents = documents_to_update(args.out, results["mode"])
    summary.write(results, documents)
    for path, _ in documents:
        print(f"bench: results table of {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
