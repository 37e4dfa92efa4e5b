"""The report: JSON (everything), Markdown (targets met or missed, then each curve), PNG."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from roles_report import over_noop_targets, role_tables, role_targets

Target = tuple[str, str, float | None, str, float, str]
"""(name, shown as, measured, comparison `<=`/`>=`, target, unit)."""


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Every target with its measured figure and whether it was met (None: not measured)."""
    rows: list[Target] = []
    http = results.get("http", {}).get("ratios", {})
    for endpoint in ("validate", "mutate"):
        rows += [
            (
                f"/{endpoint} rps at 8 conns / no-op",
                "ratio",
                http.get(f"{endpoint}_rps_ratio_at_8"),
                ">=",
                0.5,
                "",
            ),
            (
                f"/{endpoint} p50 at 1 conn minus no-op p50",
                "delta",
                http.get(f"{endpoint}_p50_delta_ms_at_1"),
                "<=",
                0.3,
                "ms",
            ),
            (
                f"/{endpoint} p99 at 1 conn",
                "p99",
                http.get(f"{endpoint}_p99_ms_at_1"),
                "<=",
                2.0,
                "ms",
            ),
            (
                f"/{endpoint} p50 at 1 conn minus no-op p50, load generator on its own CPU",
                "delta",
                http.get(f"{endpoint}_p50_delta_ms_at_1_apart"),
                "<=",
                0.3,
                "ms",
            ),
        ]
    engine = _first(results.get("engine", []), "cel_rules", 20)
    rows += [
        ("engine p50 (50 tenants, 20 rules)", "p50", _get(engine, "p50_us"), "<=", 100, "µs"),
        ("engine p99 (50 tenants, 20 rules)", "p99", _get(engine, "p99_us"), "<=", 300, "µs"),
    ]
    rows += _migrate_targets(results.get("migrate", []))
    inventory = _first(results.get("inventory", []), "devices", None, near=10_000)
    devices = _get(inventory, "devices")
    rows += [
        (
            f"{devices} devices x 10 selectors cold",
            "ms",
            _get(inventory, "cold_ms"),
            "<=",
            50,
            "ms",
        ),
        (f"{devices} devices x 10 selectors warm", "ms", _get(inventory, "warm_ms"), "<=", 5, "ms"),
    ]
    ledger = _first(results.get("ledger", []), "processes", 2)
    rows.append(
        (
            "ledger overcommit, 2 processes",
            "devices",
            _get(ledger, "overcommit"),
            "<=",
            0,
            "devices",
        )
    )
    rows += _growth_targets(results.get("growth", []))
    rows += _audit_targets(results.get("audit", []))
    rows += _kube_ledger_targets(results.get("kube-ledger", {}).get("races", []))
    rows += over_noop_targets(results.get("apiserver", {}), "p50", APISERVER_TARGET_MS)
    rows += role_targets(results.get("apiserver", {}))
    return [_judge(row) for row in rows]


APISERVER_TARGET_MS = 0.3
"""What dragate may add to a create's p50 over the no-op webhook on the same stack."""


def _added(added: list[dict[str, Any]], variant: str, kind: str) -> Any:
    return next(
        (r["added_p50_ms"] for r in added if r["variant"] == variant and r["kind"] == kind),
        "n/a",
    )


def _kube_ledger_targets(races: list[dict[str, Any]]) -> list[Target]:
    """Rate judged on processes that meet only at the API server (replicas), the harder
    case; overcommit on every level."""
    replicas = [r for r in races if r.get("as", "replicas") == "replicas"]
    if not replicas:
        return []
    busiest = max(replicas, key=lambda r: r["threads_per_process"])
    label = f"{busiest['processes']} processes x {busiest['threads_per_process']} threads"
    return [
        (
            f"cluster ledger decisions/s, one tenant, {label}",
            "rate",
            busiest["admissions_per_s"],
            ">=",
            100,
            "/s",
        ),
        (
            "cluster ledger overcommit, every level",
            "devices",
            max(r["overcommit"] for r in races),
            "<=",
            0,
            "devices",
        ),
    ]


def _migrate_targets(migrate: list[dict[str, Any]]) -> list[Target]:
    """At the largest size: speed on the realistic mix, ratio where every document changes."""
    mix = ([r for r in migrate if r.get("corpus") == "mix"] or [{}])[-1]
    legacy = ([r for r in migrate if r.get("corpus") == "all-legacy"] or [{}])[-1]
    return [
        (
            "migrate docs/s (comments kept, 10% GPU mix)",
            "docs/s",
            mix.get("migrate_docs_per_s"),
            ">=",
            1000,
            "docs/s",
        ),
        (
            "migrate / ruamel round trip (every document rewritten)",
            "ratio",
            legacy.get("ratio"),
            ">=",
            0.6,
            "",
        ),
    ]


def _growth_targets(growth: list[dict[str, Any]]) -> list[Target]:
    if len(growth) < 2:
        return []
    small, large = growth[0], growth[-1]
    size = (
        f"{large['tenants']} tenants/{large['claims']} claims vs "
        f"{small['tenants']}/{small['claims']}"
    )
    rows: list[Target] = []
    for endpoint in ("validate", "mutate"):
        for key in ("p50_us", "p99_us"):
            growth_factor = round(large[endpoint][key] / small[endpoint][key], 2)
            name = f"{endpoint} {key[:3]} growth, {size}"
            rows.append((name, "x", growth_factor, "<=", 1.2, "x"))
    rows.append(
        (
            f"memory per pod (PSS of master + worker) at {large['tenants']} tenants/"
            f"{large['claims']} claims",
            "MiB",
            large.get("pss_mib"),
            "<=",
            CHART_MEMORY_LIMIT_MIB,
            "MiB",
        )
    )
    return rows


CHART_MEMORY_LIMIT_MIB = 768
"""The chart's memory limit of the dragate container (charts/dragate/values.yaml)."""


AUDIT_INTERVAL_S = 60
"""The background audit's default interval: a pass longer than it never rests."""


def _audit_targets(audit: list[dict[str, Any]]) -> list[Target]:
    """At the largest size, in each order of the claims: one pass within the interval."""
    if not audit:
        return []
    largest = max((r["tenants"], r["claims"]) for r in audit)
    return [
        (
            f"audit pass at {r['tenants']} tenants/{r['claims']} claims, {r['order']} order",
            "s",
            r["pass_s"],
            "<=",
            AUDIT_INTERVAL_S,
            "s",
        )
        for r in audit
        if (r["tenants"], r["claims"]) == largest
    ]


def _first(
    rows: list[dict[str, Any]], key: str, value: Any, near: int | None = None
) -> dict[str, Any] | None:
    if near is not None:
        return min(rows, key=lambda r: abs(r[key] - near), default=None)
    return next((r for r in rows if r.get(key) == value), None)


def _get(row: dict[str, Any] | None, key: str) -> Any:
    return None if row is None else row.get(key)


def _judge(row: Target) -> dict[str, Any]:
    name, _, measured, comparison, target, unit = row
    met = (
        None
        if measured is None
        else (measured <= target if comparison == "<=" else measured >= target)
    )
    return {
        "name": name,
        "measured": measured,
        "target": f"{comparison} {target:g} {unit}".strip(),
        "met": met,
    }


# ------------------------------------------------------------------------------ markdown


def _table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    head = "| " + " | ".join(columns) + " |\n|" + "---|" * len(columns) + "\n"
    return head + "".join(
        "| " + " | ".join(str(r.get(c, "")) for c in columns) + " |\n" for r in rows
    )


def markdown(results: dict[str, Any]) -> str:
    machine = results["machine"]
    parts = [
        "# dragate benchmarks\n",
        f"Machine: {machine['nproc']} CPUs ({machine['cpu_model']}), {machine['memory_gib']} GiB, "
        f"Python {machine['python']}, gunicorn {machine['gunicorn']}, {machine['wrk']}, "
        f"{machine['openssl']}; load average {machine.get('loadavg_start')} at start, "
        f"{machine.get('loadavg_end')} at end. Mode: {results['mode']}.\n",
        *(_runs(results["runs"]) if results.get("merged") else []),
        "## Targets\n",
        _table(
            [
                {**t, "met": {True: "met", False: "**missed**", None: "n/a"}[t["met"]]}
                for t in results["targets"]
            ],
            ["name", "measured", "target", "met"],
        ),
    ]
    http = results.get("http")
    if http:
        parts.append(
            "## HTTP: latency (µs) and throughput against keep-alive connections\n\n"
            f"Each cell: the median of {http.get('rounds', 1)} interleaved rounds of "
            f"{http.get('seconds_per_point')} s (rps_min / rps_max: the spread of its rounds); "
            "ratios to the no-op are taken within each round.\n"
        )
        rows = [{"target": t, **r} for t, curve in http["curves"].items() for r in curve]
        rows += [
            {"target": t, **r, "connections": "1, load generator on its own CPU"}
            for t, r in (http.get("apart") or {}).items()
        ]
        parts.append(
            _table(
                rows,
                [
                    "target",
                    "connections",
                    "rps",
                    "rps_min",
                    "rps_max",
                    "min_us",
                    "p50_us",
                    "p90_us",
                    "p99_us",
                    "max_us",
                    "non_2xx",
                    "client",
                ],
            )
        )
        ranges = {
            e: http.get("ratios", {}).get(f"{e}_rps_ratio_range_at_8")
            for e in ("validate", "mutate")
        }
        if all(ranges.values()):
            parts.append(
                "\nrps at 8 connections over the no-op's, lowest and highest round: "
                + ", ".join(f"{e} {r[0]} to {r[1]}" for e, r in ranges.items())
                + "\n"
            )
        parts.append(
            "\nMemory of each server after the run, PSS of master and worker and their sum "
            f"(MiB): {json.dumps(http['memory'])}\n"
        )
    parts += _profile(results.get("profile") or {})
    sections = {
        "engine": (
            "Engine alone per Pod review (µs) against CEL rules",
            ["cel_rules", "samples", "min_us", "p50_us", "p99_us", "max_us"],
        ),
        "inventory": (
            "Feasibility: 10 selectors against devices (ms)",
            ["devices", "groups", "build_ms", "cold_ms", "warm_ms", "rebuild_ms"],
        ),
        "migrate": (
            "`dragate migrate --write` against a ruamel.yaml round trip (and `--check` on the "
            "tree it wrote, `check` and `lint` on the corpus)",
            [
                "corpus",
                "documents",
                "migrate_docs_per_s",
                "ruamel_round_trip_docs_per_s",
                "ratio",
                "check_migrated_docs_per_s",
                "check_docs_per_s",
                "lint_docs_per_s",
                "repeats",
            ],
        ),
        "ledger": (
            "SQLite ledger: processes racing for one tenant",
            [
                "processes",
                "attempts",
                "quota",
                "granted",
                "unavailable",
                "overcommit",
                "admissions_per_s",
                "ms_per_admission",
            ],
        ),
    }
    for key, (title, columns) in sections.items():
        if results.get(key):
            parts += [f"\n## {title}\n", _table(results[key], columns)]
    if results.get("growth"):
        rows = [
            {
                "tenants": g["tenants"],
                "claims": g["claims"],
                "validate p50/p99 µs": f"{g['validate']['p50_us']} / {g['validate']['p99_us']}",
                "mutate p50/p99 µs": f"{g['mutate']['p50_us']} / {g['mutate']['p99_us']}",
                "pod PSS MiB (master + worker)": _pod(g),
                "worker rss MiB": g["rss_mib"],
                "seed s": g["seed_s"],
            }
            for g in results["growth"]
        ]
        parts += [
            "\n## Growth: pipeline.review and a pod's memory against tenants and claims\n",
            _table(rows, list(rows[0])),
        ]
    return "\n".join(
        parts
        + _audit_table(results.get("audit") or [])
        + _holders_table(results.get("holders") or [])
        + _gangs_table(results.get("gangs") or [])
        + _kube_ledger_tables(results.get("kube-ledger") or {})
        + _apiserver_tables(results.get("apiserver") or {})
    )


def _pod(row: dict[str, Any]) -> str:
    if "pss_mib" not in row:
        return ""
    return f"{row['pss_mib']} ({row['master_pss_mib']} + {row['worker_pss_mib']})"


def _runs(runs: dict[str, Any]) -> list[str]:
    """When each section was measured and the load around it (sections merged from runs)."""
    rows = [{"section": name, **run} for name, run in runs.items()]
    return [
        "Sections re-run since (`run.py --merge`); the others are from the run above:\n",
        _table(rows, ["section", "at", "machine", "loadavg_start", "loadavg_end"]),
    ]


def _profile(profile: dict[str, Any]) -> list[str]:
    """Instructions per review (tests/bench/instructions.py, callgrind): the profile behind the
    HTTP figures, given to run.py with `--profile FILE`. Only the counts are shown: what they
    mean for the targets and what comes next is docs/benchmarks.md's prose."""
    counts = profile.get("instructions") or {}
    if not counts:
        return []
    rows = [
        {
            "target": name,
            "instructions": f"{count:,}",
            "outside the pipeline": f"{count - counts[name.replace('route', 'pipeline')]:,}"
            if name.startswith("route")
            else "",
        }
        for name, count in counts.items()
    ]
    return [
        "\n### CPU per review in instructions (callgrind, the WSGI app in-process, no TLS; "
        "median of 20; `tests/bench/instructions.py`)\n",
        _table(rows, ["target", "instructions", "outside the pipeline"]),
    ]


def _apiserver_tables(api: dict[str, Any]) -> list[str]:
    if not api.get("rows"):
        return []
    rows = [
        {
            "variant": r["variant"],
            "kind": r["kind"],
            "p50_ms": _ms(r["sequential"]["p50_us"]),
            "p99_ms": _ms(r["sequential"]["p99_us"]),
            "creates_per_s": r["concurrent"]["creates_per_s"],
            f"p50_ms_at_{api['connections']}": _ms(r["concurrent"]["p50_us"]),
            f"p99_ms_at_{api['connections']}": _ms(r["concurrent"]["p99_us"]),
            "failed": r["sequential"]["failed"] + r["concurrent"]["failed"],
        }
        for r in api["rows"]
    ]
    reviews = [
        {
            "variant": r["variant"],
            "kind": r["kind"],
            "level": r.get("level", ""),
            "endpoint": r["endpoint"],
            "reviews": r["samples"],
            "p50_ms": _ms(r["p50_us"]),
            "p99_ms": _ms(r["p99_us"]),
        }
        for r in api.get("reviews", [])
    ]
    parts = [
        f"\n## Through a real kube-apiserver: create latency at 1 connection "
        f"({api['sequential_count']} creates) and creates/s at {api['connections']} "
        f"connections ({api['concurrent_count']} creates), every variant in each of "
        f"{api.get('rounds', 1)} interleaved rounds\n",
        _table(rows, list(rows[0])),
        "\n### Added over no admission, same run\n\nover_noop_p50_ms: dragate's p50 over the "
        "no-op webhook behind the same chart configurations (what dragate adds beyond the "
        "webhook round trip itself). over_patch_p50_ms: dragate's p50 over the no-op that "
        "answers each Pod with dragate's own patch (what dragate's reviews and ledger add "
        "beyond the API server's work on the rewritten Pod). mutate-map: dragate's "
        "webhooks behind the MutatingAdmissionPolicy `dragate rewrite-policy` generates, "
        "which rewrites the legacy Pod inside the API server, so its mutating webhook is "
        "skipped: one webhook round trip instead of two.\n",
        _table(
            api["added"],
            [
                "kind",
                "variant",
                "added_p50_ms",
                "added_p99_ms",
                "over_noop_p50_ms",
                "over_patch_p50_ms",
                "creates_per_s_ratio",
                "apiserver_cpu_added_ms",
                "cpu_added_ms",
                *P99_COLUMNS[: 2 if any(P99_COLUMNS[0] in r for r in api["added"]) else 0],
            ],
        ),
        *_cpu_table(api["rows"]),
        *role_tables(api, _table),
    ]
    if api.get("memory"):
        parts.append(
            "\nMemory of each server after the run, PSS of master and worker and their sum "
            f"(MiB; {_dragate_memory(api)}): {json.dumps(api['memory'])}\n"
        )
    if reviews:
        parts += [
            "\n### dragate's own time per review (its log's duration_ms)\n",
            _table(reviews, list(reviews[0])),
        ]
    return parts


def _dragate_memory(api: dict[str, Any]) -> str:
    if api.get("roles"):
        return "dragate's roles: the table above"
    return "dragate in cluster mode with its watch caches"


P99_COLUMNS = ("over_noop_p99_ms", "over_patch_p99_ms")
"""Shown once a run measured them."""
CPU_GROUPS = ("kube-apiserver", "etcd", "dragate", "no-op", "load generator", "total")


def _cpu_table(rows: list[dict[str, Any]]) -> list[str]:
    """CPU per sequential create by process (absent from runs before it was measured)."""
    cpu = [
        {"variant": r["variant"], "kind": r["kind"], **r["cpu_ms_per_create"]}
        for r in rows
        if r.get("cpu_ms_per_create")
    ]
    if not cpu:
        return []
    return [
        "\n### CPU per create at 1 connection (ms, each process's threads from /proc, "
        "sequential blocks with their warm-ups)\n\nOn this machine's shared CPUs all of "
        "it lands on the create's latency; the no-op and dragate columns are the webhook "
        "servers, master and worker (dragate's include its watches of the created claims).\n",
        _table(cpu, ["variant", "kind", *CPU_GROUPS]),
    ]


def _ms(us: float) -> float:
    return round(us / 1000, 2)


AUDIT_COLUMNS = ["tenants", "claims", "order", "pass_s", "seed_s", "audit_s", "reports_s"]
AUDIT_COLUMNS += ["claims_per_s", "results", "fail", "warn", "pass", "reports"]
AUDIT_COLUMNS += ["state_rss_mib", "peak_rss_mib"]


def _audit_table(rows: list[dict[str, Any]]) -> list[str]:
    if not rows:
        return []
    return [
        "\n## Background audit: one pass over the claims (seed the ledger, judge, make the "
        "PolicyReports), a fresh process per row\n",
        _table(rows, AUDIT_COLUMNS),
    ]


def _cell(summary: dict[str, Any] | None) -> str:
    """`p50 / p99` of a summary; empty for a report made before it was measured."""
    return f"{summary['p50_us']} / {summary['p99_us']}" if summary else ""


def _holders_table(levels: list[dict[str, Any]]) -> list[str]:
    if not levels:
        return []
    rows = [
        {
            "holders": level["holders"],
            "new Pod p50/p99 µs": _cell(level["new_pod"]),
            "re-admitted p50/p99 µs": _cell(level["readmitted"]),
            "new Pod p50 over the first level (x)": level["new_pod_p50_ratio"],
            "grant write p50/p99 µs": _cell(level.get("grant_write")),
            "grant write p50 over the first level (x)": level.get("grant_write_p50_ratio", ""),
        }
        for level in levels
    ]
    return [
        "\n## One tenant's holders: a new Pod's /validate review (SQLite ledger), and a grant"
        " write's own CPU (cluster ledger)\n",
        _table(rows, list(rows[0])),
    ]


def _gangs_table(rows: list[dict[str, Any]]) -> list[str]:
    if not rows:
        return []
    table = [
        {
            "ledger": row["ledger"],
            "gang Pods": row["gang_pods"],
            "gang's review p50/p99 µs": _cell(row["gang"]),
            "member Pod p50/p99 µs": _cell(row["member_pod"]),
            "ordinary Pod p50/p99 µs": _cell(row["ordinary_pod"]),
            "member / ordinary p50 (x)": row["member_over_ordinary_p50"],
            "gang / ordinary p50 (x)": row["gang_over_ordinary_p50"],
        }
        for row in rows
    ]
    return [
        "\n## Gangs: a Job's review and its Pods' draws against an ordinary Pod's (/validate)\n",
        _table(table, list(table[0])),
    ]


def _kube_ledger_tables(kube: dict[str, Any]) -> list[str]:
    parts = []
    if kube.get("races"):
        parts += [
            "\n## Cluster ledger: processes racing for one tenant on a real kube-apiserver\n",
            _table(
                kube["races"],
                [
                    "as",
                    "processes",
                    "threads_per_process",
                    "attempts",
                    "quota",
                    "granted",
                    "unavailable",
                    "overcommit",
                    "conflicts",
                    "orphaned",
                    "admissions_per_s",
                    "p50_ms",
                    "p99_ms",
                ],
            ),
        ]
    if kube.get("by_holders"):
        parts += [
            "\n## Cluster ledger: one uncontended reserve against holders stored\n",
            _table(
                kube["by_holders"],
                ["holders", "reserve_ms", "get_ms", "put_ms", "object_kib", "managed_fields_kib"],
            ),
        ]
    return parts


# ------------------------------------------------------------------------------ plot


def plot(results: dict[str, Any], path: Path) -> bool:
    """Latency percentiles and throughput against connections; False without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    curves = results["http"]["curves"]
    figure, (latency, throughput) = plt.subplots(1, 2, figsize=(11, 4.2))
    for target, curve in curves.items():
        x = [r["connections"] for r in curve]
        for key, style in (("p50_us", "-o"), ("p99_us", "--^")):
            latency.plot(x, [r[key] / 1000 for r in curve], style, label=f"{target} {key[:3]}")
        throughput.plot(x, [r["rps"] for r in curve], "-o", label=target)
    for axis, label in ((latency, "latency (ms, log)"), (throughput, "requests/s")):
        axis.set_xscale("log", base=2)
        axis.set_xlabel("keep-alive connections (closed loop)")
        axis.set_ylabel(label)
        axis.grid(True, alpha=0.3)
        axis.legend(fontsize=7)
    latency.set_yscale("log")
    machine = results["machine"]
    figure.suptitle(
        f"dragate serve vs a no-op Flask app, gunicorn gevent, one worker, TLS — "
        f"{machine['nproc']} "
        f"CPUs {machine['cpu_model']}, load generator on the same machine",
        fontsize=9,
    )
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)
    return True


def write(results: dict[str, Any], out: Path) -> dict[str, Path]:
    out.mkdir(parents=True, exist_ok=True)
    results["targets"] = targets(results)
    files = {"json": out / "report.json", "markdown": out / "report.md"}
    files["json"].write_text(json.dumps(results, indent=2) + "\n")
    files["markdown"].write_text(markdown(results))
    if results.get("http") and plot(results, out / "latency.png"):
        files["png"] = out / "latency.png"
    if results.get("apiserver") and plot_apiserver(results, out / "apiserver.png"):
        files["apiserver png"] = out / "apiserver.png"
    return files


def plot_apiserver(results: dict[str, Any], path: Path) -> bool:
    """Per kind and variant: p50/p99 at one connection, and creates/s; False without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    api = results["apiserver"]
    variants = list(dict.fromkeys(r["variant"] for r in api["rows"]))
    kinds = list(dict.fromkeys(r["kind"] for r in api["rows"]))
    figure, (latency, throughput) = plt.subplots(1, 2, figsize=(11, 4.2))
    width = 0.8 / len(kinds)
    for k, kind in enumerate(kinds):
        rows = {r["variant"]: r for r in api["rows"] if r["kind"] == kind}
        x = [i + k * width for i in range(len(variants))]
        p50 = [rows[v]["sequential"]["p50_us"] / 1000 for v in variants]
        p99 = [rows[v]["sequential"]["p99_us"] / 1000 for v in variants]
        color = f"C{k}"
        latency.bar(x, p99, width, color=color, alpha=0.35, label=f"{kind} p99")
        latency.bar(x, p50, width, color=color, label=f"{kind} p50")
        throughput.bar(
            x,
            [rows[v]["concurrent"]["creates_per_s"] for v in variants],
            width,
            color=color,
            label=kind,
        )
    for axis, label in (
        (latency, "create latency at 1 connection (ms)"),
        (throughput, f"creates/s at {api['connections']} connections"),
    ):
        axis.set_xticks([i + width * (len(kinds) - 1) / 2 for i in range(len(variants))])
        axis.set_xticklabels(variants, rotation=25, fontsize=8)
        axis.set_ylabel(label)
        axis.grid(True, axis="y", alpha=0.3)
        axis.legend(fontsize=7)
    figure.suptitle(
        "creates through kube-apiserver, same run: none / ValidatingAdmissionPolicy / no-op and "
        "dragate behind the chart's validating (+ mutating) webhooks (cluster mode)\n"
        "/ a MutatingAdmissionPolicy making dragate's patch + dragate's validating webhooks",
        fontsize=9,
    )
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)
    return True
