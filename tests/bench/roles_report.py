"""The apiserver benchmark's report on dragate's two roles: targets for what the webhook
adds to a create's p50 and p99 over the no-op (judged on the upper end of each difference's
bootstrap interval), each role's memory against the chart's limit, and the controller's
audit passes during the measured rounds; and the tables behind them."""

from __future__ import annotations

from typing import Any

Target = tuple[str, str, float | None, str, float, str]

P99_OVER_NOOP_MS = 2.0
"""What dragate may add to a create's p99 at one connection over the no-op's."""
AUDIT_INTERVAL_S = 60
JUDGED_COLUMNS = [
    "kind", "quantile", "variants", "baselines", "estimate_ms", "low_ms", "high_ms", "cycles",
    "samples",
]  # fmt: skip
MEMORY_COLUMNS = ["pss_peak_mib", "pss_end_mib", "rss_hwm_mib", "limit_mib", "limit_from"]


def role_targets(api: dict[str, Any]) -> list[Target]:
    """p99 over the no-op, each role's peak memory, the audit during the rounds."""
    return (
        over_noop_targets(api, "p99", P99_OVER_NOOP_MS) + _memory_targets(api) + _audit_targets(api)
    )


def judged(api: dict[str, Any], quantile: str) -> list[dict[str, Any]]:
    """The run's judged differences of one quantile (apiserver_bench.judged), by kind."""
    return [j for j in api.get("judged", []) if j["quantile"] == quantile]


def over_noop_targets(api: dict[str, Any], quantile: str, limit: float) -> list[Target]:
    """What dragate adds to the quantile at one connection over the no-op, judged on the
    upper end of its 95% interval: met only when the run vouches for it."""
    return [
        (
            f"apiserver create {quantile} at 1 conn, dragate ({' + '.join(j['variants'])}) "
            f"over {j['what']}, {j['kind']}: upper end of the 95% interval (estimate "
            f"{j['estimate_ms']:+.2f} ms, from {j['low_ms']:+.2f})",
            "ms",
            j["high_ms"],
            "<=",
            limit,
            "ms",
        )
        for j in judged(api, quantile)
    ]


def shown(entry: dict[str, Any] | None) -> str:
    """A judged difference as the documents show it: estimate [low, high] in ms."""
    if entry is None:
        return "n/a"
    return f"{entry['estimate_ms']:+.2f} [{entry['low_ms']:+.2f}, {entry['high_ms']:+.2f}]"


def _load(api: dict[str, Any]) -> str:
    load = api.get("audit_load") or {}
    return f"{load.get('tenants', 0)} tenants / {load.get('claims', 0)} claims"


def _memory_targets(api: dict[str, Any]) -> list[Target]:
    return [
        (
            f"apiserver bench: {role} role's peak memory (PSS) with {_load(api)} "
            f"(limit: {memory['limit_from']})",
            "MiB",
            memory.get("pss_peak_mib"),
            "<=",
            memory["limit_mib"],
            "MiB",
        )
        for role, memory in (api.get("roles") or {}).items()
    ]


def _audit_targets(api: dict[str, Any]) -> list[Target]:
    audit = api.get("audit")
    if audit is None:
        return []
    passes = audit.get("passes_during", [])
    longest = max((p["pass_s"] for p in passes), default=None)
    return [
        (
            f"apiserver bench: controller audit passes during the measured rounds, {_load(api)}",
            "passes",
            len(passes),
            ">=",
            1,
            "",
        ),
        (
            f"apiserver bench: controller audit pass during the rounds, {_load(api)}",
            "s",
            longest,
            "<=",
            AUDIT_INTERVAL_S,
            "s",
        ),
    ]


def role_tables(api: dict[str, Any], table: Any) -> list[str]:
    """Each role's memory, and the audit load and passes (`table`: report._table)."""
    roles = api.get("roles")
    if not roles:
        return []
    rows = [{"role": role, **memory} for role, memory in roles.items()]
    audit, load = api.get("audit") or {}, api.get("audit_load") or {}
    passes = audit.get("passes_during", [])
    parts = [
        "\n### dragate's roles: memory (MiB) and the controller's audit during the rounds\n",
        "PSS sampled every second from when both roles are ready to the end of the rounds; "
        "rss_hwm_mib: the resident high-water mark of the role's processes over their lives "
        "(their start-up lists included).\n",
        f"The cluster holds {_load(api)} (created in {load.get('populate_s', 'n/a')} s before "
        f"dragate started); the rounds ran {audit.get('window_s', 'n/a')} s, begun "
        f"{audit.get('aligned_wait_s', 'n/a')} s after the controller's steady state so that "
        "its next audit pass falls inside them; the controller ran "
        f"{audit.get('controller_cpu_s', 'n/a')} s of CPU during the rounds.\n",
        table(rows, ["role", *MEMORY_COLUMNS]),
    ]
    parts += judged_table(api, table) + twin_table(api, table)
    if passes:
        parts += [
            "\nAudit passes that overlapped the rounds (seconds from the rounds' start):\n",
            table(passes, ["began_s", "ended_s", "pass_s"]),
        ]
    return parts


def judged_table(api: dict[str, Any], table: Any) -> list[str]:
    """What dragate adds to the p50 and p99 over the no-op, with the intervals judged."""
    rows = [
        {**j, "variants": " + ".join(j["variants"]), "baselines": " + ".join(j["baselines"])}
        for j in api.get("judged", [])
    ]
    if not rows:
        return []
    return [
        "\nWhat dragate adds at one connection over the no-op, ms, with the 95% interval of a "
        "bootstrap over the measuring cycles (each cycle a short block of every variant in "
        "turn); a target is met when the interval's upper end is within it.\n",
        table(rows, JUDGED_COLUMNS),
    ]


def twin_table(api: dict[str, Any], table: Any) -> list[str]:
    """A claim's p99 in twin variants (the same webhooks): how finely one p99 resolves."""
    pairs = (api.get("claim_twins") or {}).get("pairs")
    if not pairs:
        return []
    rows = [{"variant": variant, **pair} for variant, pair in pairs.items()]
    return [
        "\nThe same claim create in twin variants (the mutating webhooks match only legacy "
        "Pods), p99 at one connection in ms: the twins' difference is the resolution of one "
        "variant's p99 on this machine; the claim's targets are judged on each pair pooled.\n",
        table(rows, ["variant", "twin", "p99_ms", "twin_p99_ms", "pooled_p99_ms", "samples"]),
    ]


def summary_rows(results: dict[str, Any], targets: list[dict[str, Any]]) -> list[Any]:
    """The documents' results table: what each role takes under the audit load, the p99 the
    webhook adds over the no-op, and the controller's audit during the rounds (a run from
    before the roles were measured gives none)."""
    from summary import Row, verdict  # summary lists this function among its sections

    api = results.get("apiserver") or {}
    roles, audit = api.get("roles"), api.get("audit") or {}
    if not roles:
        return []
    p99 = {j["kind"]: j for j in judged(api, "p99")}
    memory = " / ".join(
        f"{roles[r]['pss_peak_mib']:.0f} of {roles[r]['limit_mib']:.0f}" for r in roles
    )
    longest = max((p["pass_s"] for p in audit.get("passes_during", [])), default=None)
    return [
        Row(
            f"creates through kube-apiserver under {_load(api)}, p99 dragate adds over the "
            "no-op at one connection, with its 95% interval: claim (validating) / legacy Pod "
            "(validating + mutating)",
            " / ".join(shown(p99.get(kind)) for kind in ("claim", "pod")) + " ms",
            f"≤ {P99_OVER_NOOP_MS:g} ms",
            verdict(targets, "apiserver create p99 at 1 conn"),
        ),
        Row(
            f"peak memory (PSS) of the webhook / controller role under {_load(api)}",
            f"{memory} MiB",
            "≤ the chart's limit",
            verdict(targets, *(f"apiserver bench: {role} role's" for role in roles)),
            brief=False,
        ),
        Row(
            f"the controller's audit pass during the measured creates, {_load(api)}",
            "none ran" if longest is None else f"{longest:.1f} s",
            f"≤ {AUDIT_INTERVAL_S} s",
            verdict(targets, "apiserver bench: controller audit pass"),
            brief=False,
        ),
    ]
