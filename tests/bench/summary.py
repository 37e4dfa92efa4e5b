"""The results table of docs/benchmarks.md and README.md, made from a report's sections.

`run.py` writes it between the START and END markers of both documents after a full run
into tests/bench/results, so the figures the documents show are always the report's, and
tests/bench/test_summary.py holds the documents to the committed report.json. One row per
figure a reader asks about, each with its target and whether it was met (`curve` and
`profile` rows have no target); the README shows the rows marked brief.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import roles_report
from machine import short

START = "<!-- results: written by tests/bench/run.py from tests/bench/results/report.json -->"
END = "<!-- end of results -->"
VERDICT = {True: "met", False: "**missed**", None: "n/a"}


@dataclass(frozen=True)
class Row:
    """One figure: what it is, the measured value, its target and the verdict."""

    figure: str
    measured: str
    target: str
    verdict: str
    brief: bool = True


def verdict(targets: list[dict[str, Any]], *names: str) -> str:
    """`met / met`: per name, the target of that name, or else every target whose name
    starts with it (missed if any is); one word when they all agree."""
    words = [VERDICT[_met(targets, name)] for name in names]
    return words[0] if len(set(words)) == 1 else " / ".join(words)


def _met(targets: list[dict[str, Any]], name: str) -> bool | None:
    exact = [t["met"] for t in targets if t["name"] == name]
    found = exact or [t["met"] for t in targets if t["name"].startswith(name)]
    if not found or None in found:
        return None
    return all(found)


def _engine(results: dict[str, Any], targets: list[dict[str, Any]]) -> list[Row]:
    row = next((r for r in results.get("engine", []) if r["cel_rules"] == 20), None)
    if row is None:
        return []
    return [
        Row(
            "engine alone, one Pod review (50 tenants, 20 CEL rules), p50 / p99",
            f"{row['p50_us']} / {row['p99_us']} µs",
            "≤ 100 / 300 µs",
            verdict(targets, "engine p50", "engine p99"),
        )
    ]


def _feasibility(results: dict[str, Any], targets: list[dict[str, Any]]) -> list[Row]:
    rows = results.get("inventory", [])
    if not rows:
        return []
    row = min(rows, key=lambda r: abs(r["devices"] - 10_000))
    warm = "< 0.01" if row["warm_ms"] < 0.01 else f"{row['warm_ms']}"
    devices = row["devices"]
    return [
        Row(
            f"feasibility, {devices:,} devices \u00d7 10 selectors, cold / warm",
            f"{row['cold_ms']:.1f} / {warm} ms",
            "≤ 50 / 5 ms",
            verdict(
                targets,
                f"{devices} devices x 10 selectors cold",
                f"{devices} devices x 10 selectors warm",
            ),
        )
    ]


def _growth(results: dict[str, Any], targets: list[dict[str, Any]]) -> list[Row]:
    growth = results.get("growth", [])
    if len(growth) < 2:
        return []
    small, large = growth[0], growth[-1]
    ratios = {
        endpoint: " / ".join(
            f"\u00d7{large[endpoint][key] / small[endpoint][key]:.2f}"
            for key in ("p50_us", "p99_us")
        )
        for endpoint in ("validate", "mutate")
    }
    return [
        Row(
            f"review p50 / p99 growth, {small['tenants']:,} tenants/{small['claims']:,} claims "
            f"→ {large['tenants']:,}/{large['claims']:,}",
            f"{ratios['validate']} validate, {ratios['mutate']} mutate",
            "≤ 1.2\u00d7",
            verdict(targets, "validate p50 growth", "validate p99", "mutate p50", "mutate p99"),
        ),
        *_pod_memory(large, targets),
    ]


def _pod_memory(large: dict[str, Any], targets: list[dict[str, Any]]) -> list[Row]:
    if "pss_mib" not in large:
        return []
    return [
        Row(
            f"memory per pod (PSS of gunicorn's master + its worker) at {large['tenants']:,} "
            f"tenants / {large['claims']:,} claims",
            f"{large['pss_mib']:.0f} MiB (master {large['master_pss_mib']:.0f}, worker "
            f"{large['worker_pss_mib']:.0f})",
            "≤ 768 MiB (the chart's limit)",
            verdict(targets, "memory per pod"),
        )
    ]


def _audit(results: dict[str, Any], targets: list[dict[str, Any]]) -> list[Row]:
    rows = results.get("audit") or []
    if not rows:
        return []
    largest = max((r["tenants"], r["claims"]) for r in rows)
    passes = {r["order"]: r for r in rows if (r["tenants"], r["claims"]) == largest}
    if set(passes) != {"listed", "created"}:
        return []
    listed, created = passes["listed"], passes["created"]
    peak = max(r["peak_rss_mib"] for r in passes.values())
    return [
        Row(
            f"background audit, {largest[0]:,} tenants / {largest[1]:,} claims: seconds per "
            "pass (claims listed by namespace / in creation order across tenants) / peak memory",
            f"{listed['pass_s']:.1f} / {created['pass_s']:.1f} s / {peak:.0f} MiB "
            f"({listed['fail']:,} of {listed['results']:,} results fail, "
            f"{listed['reports']:,} reports)",
            "≤ 60 s per pass (the audit interval)",
            verdict(targets, "audit pass at"),
        )
    ]


def _migrate(results: dict[str, Any], targets: list[dict[str, Any]]) -> list[Row]:
    migrate = results.get("migrate", [])
    mixes = [r for r in migrate if r["corpus"] == "mix"]
    legacy = [r for r in migrate if r["corpus"] == "all-legacy"]
    if not mixes or not legacy:
        return []
    mix, every = mixes[-1], legacy[-1]
    return [
        Row(
            f"`dragate migrate --write`: 10% GPU mix, {mix['documents']:,} documents / every "
            "document rewritten, \u00d7 a ruamel round trip",
            f"{mix['migrate_docs_per_s']:,.0f} docs/s / {every['ratio']:.2f}\u00d7",
            "≥ 1000 docs/s / ≥ 0.6\u00d7",
            verdict(targets, "migrate docs/s", "migrate / ruamel"),
        ),
        Row(
            "`dragate migrate --check` on the tree it wrote; `dragate check`; `dragate lint` "
            "(the mix)",
            f"{mix['check_migrated_docs_per_s']:,.0f}; {mix['check_docs_per_s']:,.0f}; "
            f"{mix['lint_docs_per_s']:,.0f} docs/s",
            "",
            "curve",
        ),
    ]


def _http(results: dict[str, Any], targets: list[dict[str, Any]]) -> list[Row]:
    http = results.get("http")
    if not http:
        return []
    ratios = http["ratios"]
    curves = {t: {r["connections"]: r for r in curve} for t, curve in http["curves"].items()}
    both = ("validate", "mutate")

    def pair(key: str, fmt: Callable[[float], str]) -> str:
        return " / ".join(fmt(ratios[f"{e}_{key}"]) for e in both)

    def at(connections: int, key: str) -> str:
        return " / ".join(f"{curves[e][connections][key]:,.0f}" for e in both)

    def judged(name: str) -> str:
        return verdict(targets, *(f"/{e} {name}" for e in both))

    noop_rps = curves["noop"][8]["rps"]
    return [
        Row(
            "`/validate` / `/mutate` rps at 8 connections, \u00d7 the no-op's",
            f"{pair('rps_ratio_at_8', '{:.3f}'.format)} ({at(8, 'rps')} rps; "
            f"the no-op {noop_rps:,.0f})",
            "≥ 0.5\u00d7",
            judged("rps at 8 conns"),
        ),
        Row(
            "`/validate` / `/mutate` p50 at 1 connection over the no-op's",
            f"{pair('p50_delta_ms_at_1', '{:+.3f}'.format)} ms ({at(1, 'p50_us')} µs, "
            f"the no-op {curves['noop'][1]['p50_us']:.0f})",
            "≤ +0.3 ms",
            judged("p50 at 1 conn minus no-op p50"),
        ),
        Row(
            "the same, the load generator on its own CPU (servers pinned to the other)",
            f"{pair('p50_delta_ms_at_1_apart', '{:+.3f}'.format)} ms",
            "≤ +0.3 ms",
            judged("p50 at 1 conn minus no-op p50, load generator"),
            brief=False,
        ),
        Row(
            "`/validate` / `/mutate` p99 at 1 connection",
            f"{pair('p99_ms_at_1', '{:.2f}'.format)} ms (the no-op's own "
            f"{curves['noop'][1]['p99_us'] / 1000:.2f})",
            "≤ 2 ms",
            judged("p99 at 1 conn"),
        ),
    ]


def _instructions(results: dict[str, Any], _: list[dict[str, Any]]) -> list[Row]:
    counts = (results.get("profile") or {}).get("instructions") or {}
    if not {"route/validate", "route/mutate", "noop/validate"} <= counts.keys():
        return []

    def millions(name: str) -> str:
        return f"{counts[name] / 1e6:.2f} M"

    return [
        Row(
            "CPU per review in instructions (callgrind, the WSGI app in-process, no TLS; "
            "`tests/bench/instructions.py`): `/validate` / `/mutate` / the no-op Flask app",
            f"{millions('route/validate')} / {millions('route/mutate')} / "
            f"{millions('noop/validate')} (the review itself {millions('pipeline/validate')} / "
            f"{millions('pipeline/mutate')})",
            "",
            "profile",
            brief=False,
        )
    ]


def _ledgers(results: dict[str, Any], targets: list[dict[str, Any]]) -> list[Row]:
    rows = []
    levels = results.get("holders") or []
    if len(levels) >= 2:
        first, last = levels[0], levels[-1]
        readmitted = sorted(level["readmitted"]["p50_us"] / 1000 for level in levels)
        rows.append(
            Row(
                f"a new Pod's `/validate` review as its tenant already holds {first['holders']:,}"
                f" / {last['holders']:,} claims (SQLite ledger; `tests/bench/holders.py`)",
                f"{first['new_pod']['p50_us'] / 1000:.3f} / {last['new_pod']['p50_us'] / 1000:.3f}"
                f" ms; re-admitted {readmitted[0]:.3f}\u2013{readmitted[-1]:.3f} ms at every level",
                "",
                "curve",
                brief=False,
            )
        )
        if "grant_write" in first:
            rows.append(
                Row(
                    f"a grant write's own CPU (`KubeLedger.flush`, no HTTP) as its tenant holds "
                    f"{first['holders']:,} / {last['holders']:,} claims: what it holds the "
                    "webhook's serving loop for (cluster ledger; `tests/bench/holders.py`)",
                    f"{first['grant_write']['p50_us'] / 1000:.3f} / "
                    f"{last['grant_write']['p50_us'] / 1000:.3f} ms",
                    "",
                    "curve",
                    brief=False,
                )
            )
    if results.get("ledger"):
        rows.append(
            Row(
                "SQLite ledger, processes racing for one tenant",
                f"overcommit {max(r['overcommit'] for r in results['ledger'])}",
                "0 overcommit",
                verdict(targets, "ledger overcommit"),
                brief=False,
            )
        )
    return rows + _cluster_ledger(results, targets)


def _cluster_ledger(results: dict[str, Any], targets: list[dict[str, Any]]) -> list[Row]:
    races = (results.get("kube-ledger") or {}).get("races") or []
    plain = [r for r in races if r.get("as") == "replicas"]
    granted = [r for r in races if r.get("as") == "replicas, grants"]
    if not plain or not granted:
        return []
    busiest = max(plain, key=lambda r: r["threads_per_process"])
    label = f"{busiest['processes']} processes \u00d7 {busiest['threads_per_process']} threads"
    return [
        Row(
            f"cluster ledger, one tenant, {label}",
            f"{busiest['admissions_per_s']:,.0f} decisions/s without grants, "
            f"{granted[-1]['admissions_per_s']:,.0f}/s with quota grants (the default), "
            f"overcommit {max(r['overcommit'] for r in races)} at every level",
            "≥ 100/s, 0 overcommit",
            verdict(targets, "cluster ledger decisions/s", "cluster ledger overcommit"),
        )
    ]


def _apiserver(results: dict[str, Any], targets: list[dict[str, Any]]) -> list[Row]:
    api = results.get("apiserver") or {}
    added = {(r["variant"], r["kind"]): r for r in api.get("added", [])}
    p50 = {j["kind"]: roles_report.shown(j) for j in roles_report.judged(api, "p50")}
    pod = added.get(("mutate", "pod"))
    if not p50 or pod is None:
        return []

    def over_none(variant: str) -> str:
        both = [added.get((variant, kind)) for kind in ("claim", "pod")]
        return " / ".join("n/a" if r is None else f"{r['added_p50_ms']:+.2f}" for r in both)

    return [
        Row(
            "creates through kube-apiserver, p50 dragate adds over the no-op webhook on the same "
            "stack, with its 95% interval: claim (validating) / legacy Pod (validating + "
            "mutating, the no-op pair answering with dragate's patch)",
            f"{p50.get('claim', 'n/a')} / {p50.get('pod', 'n/a')} ms (the Pod over the no-op "
            f"pair that does not patch {pod['over_noop_p50_ms']:+.2f})",
            "≤ 0.3 ms",
            verdict(targets, "apiserver create p50 at 1 conn"),
        ),
        Row(
            "the same creates, p50 added over no admission, claim / legacy Pod: dragate "
            "validating; validating + mutating; the same behind `dragate rewrite-policy`; "
            "a ValidatingAdmissionPolicy; the no-op pair answering with dragate's patch",
            f"{over_none('validate')}; {over_none('mutate')}; {over_none('mutate-map')}; "
            f"{over_none('vap')}; {over_none('noop-patch')} ms",
            "",
            "curve",
            brief=False,
        ),
        Row(
            "the same creates that failed (one connection and 8)",
            _failed(api.get("rows", [])),
            "",
            "curve",
            brief=False,
        ),
    ]


def _failed(rows: list[dict[str, Any]]) -> str:
    """Each variant and kind with failed creates: how many of how many, and the slowest."""
    found = []
    for row in rows:
        seq, conc = row["sequential"], row["concurrent"]
        failed = seq["failed"] + conc["failed"]
        if failed:
            made = seq["samples"] + conc["samples"]
            slowest = max(seq["max_us"] or 0, conc["max_us"] or 0) / 1e6
            found.append(
                f"{row['variant']} {row['kind']}: {failed:,} of {made:,} (the slowest create "
                f"{slowest:.1f} s)"
            )
    return "; ".join(found) or "none"


SECTIONS = (
    _engine,
    _feasibility,
    _growth,
    _audit,
    _migrate,
    _http,
    _instructions,
    _ledgers,
    _apiserver,
    roles_report.summary_rows,
)


def rows(results: dict[str, Any], targets: list[dict[str, Any]]) -> list[Row]:
    """Every row the report's sections give, in the documents' order."""
    return [row for section in SECTIONS for row in section(results, targets)]


def machine(results: dict[str, Any]) -> str:
    """The machine line under the table: the figures hold for this machine only."""
    m = results["machine"]
    return (
        f"Machine: {m['nproc']} CPUs ({m['cpu_model']}), {m['memory_gib']} GiB, Python "
        f"{m['python']}, gunicorn {m['gunicorn']}, {m['wrk']} on the same machine (the load "
        "generator takes a share of the CPUs), shared with other work: load average "
        f"{_load(m.get('loadavg_start'))} at the start of the run, {_load(m.get('loadavg_end'))} "
        f"at its end.{_elsewhere(results)} Every figure is against its baseline of the same run."
    )


def _elsewhere(results: dict[str, Any]) -> str:
    """Sections re-run (`run.py --merge`) on another machine than the run above, named."""
    here = short(results["machine"])
    other = {name: run["machine"] for name, run in (results.get("runs") or {}).items()
             if run.get("machine", here) != here}  # fmt: skip
    if not other:
        return ""
    named = "; ".join(f"`{name}` on {where}" for name, where in other.items())
    return f" Measured on another machine: {named}."


def _load(averages: list[float] | None) -> str:
    return " / ".join(f"{a:.2f}" for a in averages) if averages else "n/a"


def table(results: dict[str, Any], targets: list[dict[str, Any]], brief: bool = False) -> str:
    """The Markdown table (and the machine line) that goes between the markers."""
    shown = [r for r in rows(results, targets) if r.brief or not brief]
    lines = ["| figure | measured | target | |", "|---|---|---|---|"]
    lines += [f"| {r.figure} | {r.measured} | {r.target} | {r.verdict} |" for r in shown]
    return "\n".join(lines) + "\n\n" + machine(results) + "\n"


def replaced(text: str, block: str) -> str:
    """`text` with what stands between its markers replaced by `block`."""
    pattern = re.compile(re.escape(START) + r"\n.*?" + re.escape(END), re.S)
    if len(pattern.findall(text)) != 1:
        raise ValueError(f"expected one {START!r} ... {END!r} block")
    return pattern.sub(lambda _: f"{START}\n{block}{END}", text)


def block(text: str) -> str:
    """What stands between the markers of `text`."""
    start = text.index(START) + len(START) + 1
    return text[start : text.index(END, start)]


def write(results: dict[str, Any], documents: Iterable[tuple[Path, bool]]) -> None:
    """Put the table into each (document, brief) in place."""
    targets = results["targets"]
    for path, brief in documents:
        path.write_text(replaced(path.read_text(), table(results, targets, brief)))
