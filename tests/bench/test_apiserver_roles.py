"""The apiserver benchmark's two roles, on figures given here (no cluster): the audit load
option, its Tenants and claims, the chart's limits per role, the controller's audit passes
read from /metrics, and the report's targets and tables for them."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import apiserver_load
import apiserver_roles
import report
import roles_report
import run
from apiserver_load import AuditLoad, parse_audit_load


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("10000,100000", AuditLoad(10_000, 100_000)),
        ("200, 2000", AuditLoad(200, 2_000)),
        ("10_000,100_000", AuditLoad(10_000, 100_000)),
        ("none", AuditLoad(0, 0)),
        ("0,0", AuditLoad(0, 0)),
        ("5,0", AuditLoad(5, 0)),
    ],
    ids=["full", "spaces", "underscores", "none", "zero", "tenants-alone"],
)
def test_audit_load_is_tenants_and_claims(text: str, expected: AuditLoad) -> None:
    assert parse_audit_load(text) == expected


@pytest.mark.parametrize(
    "text",
    ["10000", "10000,100000,5", "a,b", "-1,10", "0,10", ""],
    ids=["one-number", "three-numbers", "words", "negative", "claims-without-tenants", "empty"],
)
def test_an_audit_load_that_is_not_two_counts_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="--audit-load"):
        parse_audit_load(text)


@pytest.mark.parametrize(
    ("quick", "given", "expected"),
    [
        (False, None, "10000,100000"),
        (True, None, "20,200"),
        (True, "200,2000", "200,2000"),
        (False, "none", "none"),
    ],
    ids=["full-default", "quick-default", "quick-given", "full-none"],
)
def test_run_takes_the_modes_audit_load_unless_given(
    quick: bool, given: str | None, expected: str
) -> None:
    sizes = run.chosen_sizes(quick, given, _refuse)
    assert sizes.apiserver_audit_load == expected
    assert sizes.apiserver_counts == (run.QUICK if quick else run.FULL).apiserver_counts


def test_run_refuses_a_malformed_audit_load() -> None:
    with pytest.raises(SystemExit, match="TENANTS,CLAIMS"):
        run.chosen_sizes(False, "lots", _refuse)


def _refuse(message: str) -> Any:
    raise SystemExit(message)


@pytest.mark.parametrize(
    ("load", "per_tenant"),
    [(AuditLoad(4, 10), [3, 3, 2, 2]), (AuditLoad(3, 3), [1, 1, 1]), (AuditLoad(2, 0), [0, 0])],
    ids=["uneven", "one-each", "no-claims"],
)
def test_claims_are_spread_over_every_tenant_and_each_has_its_namespace(
    load: AuditLoad, per_tenant: list[int]
) -> None:
    namespaces, claims = apiserver_load.creates(load)
    assert [n["metadata"]["name"] for _, n in namespaces] == [
        apiserver_load.namespace_of(i) for i in range(load.tenants)
    ]
    counted = [sum(1 for url, _ in claims if f"/{ns}/" in url) for ns in
               (apiserver_load.namespace_of(i) for i in range(load.tenants))]  # fmt: skip
    assert counted == per_tenant == [apiserver_load.claims_of(load, i) for i in range(load.tenants)]


@pytest.mark.parametrize(
    ("index", "claims", "max_devices"),
    [(0, 10, 5), (1, 10, 110), (10, 10, 5), (0, 1, 101)],
    ids=["every-tenth-broken", "others-fit", "tenth-again", "one-claim-fits"],
)
def test_every_tenth_tenants_quota_is_below_what_it_holds(
    index: int, claims: int, max_devices: int
) -> None:
    spec = apiserver_load.tenant(index, claims)["spec"]
    assert spec["namespaces"] == [apiserver_load.namespace_of(index)]
    assert spec["quota"][0]["maxDevices"] == max_devices


def test_the_tenants_file_holds_one_tenant_per_namespace(tmp_path: Path) -> None:
    from webhook.policy.loading import load_policies

    assert apiserver_load.write_tenants(tmp_path, AuditLoad(0, 0)) is None
    written = apiserver_load.write_tenants(tmp_path, AuditLoad(12, 30))
    assert written is not None
    tenants = load_policies([str(tmp_path)]).tenants
    assert sorted(t.name for t in tenants) == [apiserver_load.namespace_of(i) for i in range(12)]


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (
            {
                "webhook": {"resources": {"limits": {"memory": "1Gi"}}},
                "controller": {"resources": {"limits": {"memory": "512Mi"}}},
            },
            {
                "webhook": (1024.0, "webhook.resources.limits.memory"),
                "controller": (512.0, "controller.resources.limits.memory"),
            },
        ),
    ],
    ids=["each-role-its-own"],
)
def test_each_roles_limit_comes_from_the_charts_values(
    values: dict[str, Any], expected: dict[str, tuple[float, str]]
) -> None:
    limits = apiserver_roles.chart_limits(values)
    assert {r: (v["limit_mib"], v["from"]) for r, v in limits.items()} == expected


def test_the_charts_values_name_each_roles_limit() -> None:
    limits = apiserver_roles.read_chart_limits()
    assert limits["webhook"]["limit_mib"] > 0 and limits["controller"]["limit_mib"] > 0


def test_a_chart_without_a_roles_limit_is_an_error() -> None:
    with pytest.raises(RuntimeError, match=r"controller\.resources\.limits\.memory"):
        apiserver_roles.chart_limits({"webhook": {"resources": {"limits": {"memory": "1Gi"}}}})


METRICS = """# HELP dragate_audit_duration_seconds Seconds this process's last pass took.
# TYPE dragate_audit_duration_seconds gauge
dragate_audit_duration_seconds 12.5
dragate_audit_last_success_timestamp_seconds 1.7e+09
dragate_audit_violations{tenant="a"} 3.0
"""


def _requests(webhook: str | None, controller: str | None) -> dict[str, Any]:
    roles = {"webhook": webhook, "controller": controller}
    return {r: {"resources": {"requests": {"cpu": c}}} for r, c in roles.items() if c}


@pytest.mark.parametrize(
    ("webhook", "controller", "nice"),
    [
        ("250m", "100m", 4),
        ("500m", "500m", 0),
        ("1", "250m", 6),
        ("100m", "1", 0),
        ("4", "10m", 19),
    ],
    ids=["chart-default", "equal", "cores", "controller-larger", "clamped"],
)
def test_the_controller_runs_at_the_nice_level_of_its_cpu_request(
    webhook: str, controller: str, nice: int
) -> None:
    assert apiserver_roles.controller_niceness(_requests(webhook, controller)) == nice


def test_the_charts_requests_give_the_controller_less_cpu_than_the_webhook() -> None:
    """The audit yields the CPU to reviews on a busy node: a positive nice level."""
    assert 0 < apiserver_roles.read_controller_niceness() <= 19


def test_a_chart_without_a_roles_cpu_request_is_an_error() -> None:
    with pytest.raises(RuntimeError, match="CPU request"):
        apiserver_roles.controller_niceness(_requests("250m", None))


@pytest.mark.parametrize(
    ("text", "expected"),
    [(METRICS, (1.7e9, 12.5)), ("dragate_audit_violations 1.0\n", None), ("", None)],
    ids=["a-pass", "no-pass-yet", "empty"],
)
def test_an_audit_pass_is_read_from_the_controllers_metrics(
    text: str, expected: tuple[float, float] | None
) -> None:
    assert apiserver_roles.audit_pass(text) == expected


@pytest.mark.parametrize(
    ("passes", "expected"),
    [
        ({950.0: 10.0}, []),  # ended before the rounds began
        ({1005.0: 10.0}, [{"began_s": -5.0, "ended_s": 5.0, "pass_s": 10.0}]),
        ({1050.0: 20.0}, [{"began_s": 30.0, "ended_s": 50.0, "pass_s": 20.0}]),
        ({1130.0: 20.0}, [{"began_s": 110.0, "ended_s": 130.0, "pass_s": 20.0}]),
        ({1150.0: 20.0}, []),  # began after the rounds ended
    ],
    ids=["before", "across-the-start", "inside", "across-the-end", "after"],
)
def test_passes_that_overlap_the_rounds_are_the_ones_during(
    passes: dict[float, float], expected: list[dict[str, float]]
) -> None:
    assert apiserver_roles.during(passes, 1000.0, 1120.0) == expected


def test_the_rounds_begin_just_before_the_next_pass_is_due() -> None:
    slept: list[float] = []
    passes = {2000.0: 30.0}  # began at 1970: the next is due one interval and a tick later
    due = apiserver_roles.next_pass_start(passes)
    assert due == 1970.0 + apiserver_roles.AUDIT_INTERVAL_S + apiserver_roles.AUDIT_TICK_S
    assert apiserver_roles.align({1.0: 0.5}, sleep=slept.append) == 0.0  # long overdue
    assert slept == [0.0]


def _judged(kind: str, variants: list[str], estimate: float, high: float) -> dict[str, Any]:
    what = "the no-op webhook" if kind == "claim" else "the no-op webhooks answering with its patch"
    return {
        "kind": kind, "quantile": "p99", "variants": variants, "baselines": ["noop"],
        "what": what, "estimate_ms": estimate, "low_ms": -1.0, "high_ms": high,
        "cycles": 120, "samples": 1920,
    }  # fmt: skip


API = {
    "judged": [
        _judged("claim", ["validate", "mutate"], 0.5, 1.5),
        _judged("pod", ["mutate"], 1.0, 2.5),
    ],
    "audit_load": {"tenants": 200, "claims": 2000, "populate_s": 4.2},
    "roles": {
        "webhook": {
            "pss_peak_mib": 300.0,
            "pss_end_mib": 280.0,
            "rss_hwm_mib": 350.0,
            "limit_mib": 768.0,
            "limit_from": "webhook.resources.limits.memory",
        },
        "controller": {
            "pss_peak_mib": 800.0,
            "pss_end_mib": 700.0,
            "rss_hwm_mib": 900.0,
            "limit_mib": 768.0,
            "limit_from": "controller.resources.limits.memory",
        },
    },
    "audit": {
        "passes_during": [{"began_s": 2.0, "ended_s": 14.0, "pass_s": 12.0}],
        "window_s": 120.0,
        "aligned_wait_s": 40.0,
        "controller_cpu_s": 15.0,
    },
}


@pytest.mark.parametrize(
    ("starts", "measured", "met"),
    [
        (
            "apiserver create p99 at 1 conn, dragate (validate + mutate) over the no-op webhook,",
            1.5,
            True,
        ),
        ("apiserver create p99 at 1 conn, dragate (mutate) over the no-op webhooks", 2.5, False),
        ("apiserver bench: webhook role's peak memory (PSS) with 200 tenants", 300.0, True),
        ("apiserver bench: controller role's peak memory (PSS) with 200", 800.0, False),
        ("apiserver bench: controller audit passes during the measured rounds", 1, True),
        ("apiserver bench: controller audit pass during the rounds", 12.0, True),
    ],
    ids=["validate-p99", "mutate-p99", "webhook-memory", "controller-memory", "passes", "pass-s"],
)
def test_the_roles_targets_are_judged_in_the_report(
    starts: str, measured: float, met: bool
) -> None:
    judged = [t for t in report.targets({"apiserver": API}) if t["name"].startswith(starts)]
    assert [(t["measured"], t["met"]) for t in judged] == [(measured, met)]


def test_no_pass_during_the_rounds_is_a_miss_and_its_seconds_not_measured() -> None:
    api = {**API, "audit": {**API["audit"], "passes_during": []}}  # type: ignore[dict-item]
    judged = {t["name"].split(",")[0]: (t["measured"], t["met"]) for t in report.targets(
        {"apiserver": api}) if "audit pass" in t["name"]}  # fmt: skip
    assert judged == {
        "apiserver bench: controller audit passes during the measured rounds": (0, False),
        "apiserver bench: controller audit pass during the rounds": (None, None),
    }


def test_the_roles_table_shows_each_roles_memory_and_the_passes() -> None:
    text = "\n".join(roles_report.role_tables(API, report._table))
    webhook = "| webhook | 300.0 | 280.0 | 350.0 | 768.0 | webhook.resources.limits.memory |"
    assert webhook in text
    assert "| controller | 800.0 | 700.0 | 900.0 | 768.0 |" in text
    assert "| 2.0 | 14.0 | 12.0 |" in text
    assert "200 tenants / 2000 claims (created in 4.2 s" in text


@pytest.mark.parametrize(
    ("api", "expected"),
    [
        (
            API,
            [
                ("+0.50 [-1.00, +1.50] / +1.00 [-1.00, +2.50] ms", "**missed**"),
                ("300 of 768 / 800 of 768 MiB", "met / **missed**"),
                ("12.0 s", "met"),
            ],
        ),
        ({k: v for k, v in API.items() if k != "roles"}, []),
    ],
    ids=["roles-measured", "a-run-from-before-the-roles"],
)
def test_the_documents_table_shows_the_roles_once_measured(
    api: dict[str, Any], expected: list[tuple[str, str]]
) -> None:
    results = {"apiserver": api}
    rows = roles_report.summary_rows(results, report.targets(results))
    assert [(r.measured, r.verdict) for r in rows] == expected


def _measured(p99s: dict[str, float]) -> dict[tuple[str, str], Any]:
    """Each variant's claim creates: 99 samples of 1 ms and one at its p99's value."""
    import apiserver_bench

    return {
        (variant, "claim"): apiserver_bench.Measured(sequential=[1000.0] * 98 + [ms * 1000] * 2)
        for variant, ms in p99s.items()
    }


def test_a_claims_twin_variants_are_pooled_and_their_spread_shown() -> None:
    import apiserver_bench

    twins = apiserver_bench.claim_twins(
        _measured({"validate": 9.0, "mutate": 5.0, "noop-validate": 4.0, "noop-mutate": 6.0})
    )
    pair = twins["pairs"]["validate"]
    assert (pair["twin"], pair["p99_ms"], pair["twin_p99_ms"], pair["samples"]) == (
        "mutate", 9.0, 5.0, 200,
    )  # fmt: skip
    assert pair["pooled_p99_ms"] == 5.0  # the 198th of 200: the twins' lower tail
    assert apiserver_bench.claim_twins(_measured({"validate": 9.0})) == {}


def test_the_roles_tables_show_the_judged_intervals_and_the_twins() -> None:
    api = {**API, "claim_twins": {"pairs": {"validate": {"twin": "mutate", "p99_ms": 9.0}}}}
    text = "\n".join(roles_report.role_tables(api, report._table))
    assert "| claim | p99 | validate + mutate | noop | 0.5 | -1.0 | 1.5 | 120 | 1920 |" in text
    assert "| validate | mutate | 9.0 |" in text
