"""PolicyReports from audit results: one per namespace, failures first, capped with the
summary counting all, written only when they change, removed when their namespace has no
results left, and only by the leader. (Against a real API server: tests/e2e.)"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, cast

import pytest

from webhook.kube.api import ApiError, KubeApi
from webhook.kube.policyreports import (
    GROUP,
    PolicyReportWriter,
    by_namespace,
    report_of,
    report_path,
)
from webhook.types import AuditResult, FactsUnavailable


def result(name: str, outcome: str, namespace: str = "team-a", **extra: Any) -> AuditResult:
    return AuditResult(namespace, "resource.k8s.io/v1", "ResourceClaim", name, f"uid-{name}",
                       "Tenant/team-a" if outcome != "pass" else "dragate", outcome,
                       f"{name} {outcome}", tenant="team-a",
                       rule="quota" if outcome != "pass" else "admission", **extra)  # fmt: skip


def test_one_report_per_namespace_failures_first_and_capped() -> None:
    found = [result("a", "pass"), result("b", "fail", properties={"used": "3"}),
             result("c", "warn"), result("d", "pass", namespace="team-b")]  # fmt: skip
    grouped = by_namespace(found)
    assert set(grouped) == {"team-a", "team-b"}
    report = report_of("team-a", grouped["team-a"], 1700000000, max_results=2)
    assert (report["kind"], report["metadata"]["namespace"]) == ("PolicyReport", "team-a")
    assert report["summary"] == {"pass": 1, "fail": 1, "warn": 1, "error": 0, "skip": 0}
    assert [r["result"] for r in report["results"]] == ["fail", "warn"]
    first = report["results"][0]
    assert first["resources"] == [{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                                   "name": "b", "namespace": "team-a", "uid": "uid-b"}]  # fmt: skip
    assert first["properties"] == {"tenant": "team-a", "used": "3"}
    assert first["timestamp"] == {"seconds": 1700000000, "nanos": 0}
    assert first["source"] == "dragate"
    assert (first["policy"], first["rule"]) == ("Tenant/team-a", "quota")


def test_cluster_scoped_results_go_to_the_cluster_report() -> None:
    ((namespace, found),) = by_namespace([result("x", "fail", namespace="")]).items()
    report = report_of(namespace, found, 1)
    assert report["kind"] == "ClusterPolicyReport" and "namespace" not in report["metadata"]
    assert report_path("") == "/apis/wgpolicyk8s.io/v1alpha2/clusterpolicyreports/dragate"


class Api:
    """Reports by path; lists by label as the API server would."""

    def __init__(self, installed: bool = True) -> None:
        self.stored: dict[str, Mapping[str, Any]] = {}
        self.writes: list[str] = []
        self.installed = installed

    def request(self, method: str, path: str, *, query: Any = None, body: Any = None,
                content_type: str = "", **_: Any) -> dict[str, Any]:  # fmt: skip
        if method == "PATCH":
            assert content_type == "application/apply-patch+yaml" and query["force"] == "true"
            self.stored[path] = body
            self.writes.append(path)
            return dict(body)
        if method == "DELETE":
            if path not in self.stored:
                raise ApiError(404, "not found")
            return dict(self.stored.pop(path))
        if path == GROUP:
            if not self.installed:
                raise ApiError(404, "the server could not find the requested resource")
            return {"resources": [{"name": "policyreports"}, {"name": "clusterpolicyreports"}]}
        cluster_wide = path.endswith("clusterpolicyreports")
        items = [
            b for b in self.stored.values() if (b["kind"] == "ClusterPolicyReport") == cluster_wide
        ]
        return {"items": items, "metadata": {}}


def writer(api: Api, results: list[AuditResult] | None, leading: list[bool]) -> PolicyReportWriter:
    def audit() -> list[AuditResult]:
        if results is None:
            raise FactsUnavailable("caches not synced")
        return list(results)

    return PolicyReportWriter(cast(KubeApi, api), audit, leading=lambda: leading[0],
                              writes_per_second=1000)  # fmt: skip


def test_reports_follow_the_results_and_only_the_leader_writes() -> None:
    api, leading = Api(), [False]
    results = [result("a", "pass"), result("b", "fail", namespace="team-b")]
    reports = writer(api, results, leading)
    assert reports.run_once() == 0 and api.stored == {}
    leading[0] = True
    assert reports.run_once() == 2
    assert reports.run_once() == 0  # nothing changed: no write
    results[:] = [result("a", "fail")]  # team-b's claim deleted, team-a's now failing
    assert reports.run_once() == 1
    assert set(api.stored) == {report_path("team-a")}
    assert api.stored[report_path("team-a")]["summary"]["fail"] == 1


@pytest.mark.parametrize("leading", [True, False], ids=["leader", "follower"])
def test_no_facts_no_writes(leading: bool) -> None:
    api = Api()
    assert writer(api, None, [leading]).run_once() == 0 and api.writes == []


def test_without_the_report_crds_results_still_reach_the_metrics() -> None:
    api, seen = Api(installed=False), []
    reports = PolicyReportWriter(cast(KubeApi, api), lambda: [result("a", "fail")],
                                 observe=seen.append, writes_per_second=1000)  # fmt: skip
    assert reports.run_once() == 0 and api.writes == []
    assert [len(s) for s in seen] == [1]
    api.installed = True
    assert reports.run_once() == 1


def test_the_last_successful_pass_is_timed() -> None:
    api, results = Api(), [result("a", "fail")]
    reports = writer(api, results, [True])
    assert (reports.last_success, reports.last_duration) == (None, None)
    before = time.time()
    reports.run_once()
    assert reports.last_success is not None and before <= reports.last_success <= time.time()
    assert reports.last_duration is not None and reports.last_duration >= 0
    failing = writer(api, None, [True])
    failing.run_once()
    assert failing.last_success is None  # no facts: no pass


def test_a_new_namespace_s_first_report_is_written_before_the_rewrites() -> None:
    api = Api()
    results = [result(f"c{i}", "pass", namespace=f"team-{i:02}") for i in range(5)]
    reports = writer(api, results, [True])
    reports.run_once()
    api.writes.clear()
    results[:] = [result(f"c{i}", "fail", namespace=f"team-{i:02}") for i in range(5)]
    results.append(result("new", "fail", namespace="team-99"))  # a policy change's pass
    assert reports.run_once() == 6
    assert api.writes[0] == report_path("team-99")
