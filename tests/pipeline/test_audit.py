"""The background audit's judgment: existing objects re-judged as dry-run CREATEs of
themselves against the policies in force, each object counted once against its own usage."""

from __future__ import annotations

from typing import Any

import pytest
from builders import claim, exact, namespace, pod, request, template

from webhook.admission.review import short_warning
from webhook.kube.snapshot import SnapshotState
from webhook.ledger.memory import MemoryLedger
from webhook.ledger.usage import existing_holds
from webhook.pipeline import Context
from webhook.pipeline.audit import asks_for_devices, audit, results_of, tenant_results
from webhook.policy.loading import parse_policies
from webhook.types import (
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    Action,
    ClassUsage,
    Decision,
    Reason,
    Verdict,
    Violation,
)

GPU = "gpu.nvidia.com"


def policies(limit: int, enforcement: str = "Deny") -> Any:
    return parse_policies(f"""
apiVersion: dragate.io/v1alpha1
kind: Tenant
metadata: {{name: team-a}}
spec:
  namespaces: [team-a]
  enforcement: {enforcement}
  quota: [{{deviceClassName: {GPU}, maxDevices: {limit}}}]
""")


def held(name: str, count: int, uid: str = "") -> dict[str, Any]:
    made = claim(request(exact("gpu", GPU, count)), name=name)
    made["metadata"]["uid"] = uid or f"uid-{name}"
    return made


def judged(
    limit: int, objects: list[dict[str, Any]], enforcement: str = "Deny"
) -> list[tuple[str, str, str]]:
    state = SnapshotState([namespace("team-a"), *objects])
    current = policies(limit, enforcement)
    context = Context(
        policies=lambda: current, state=state, ledger=MemoryLedger(existing_holds(current, state))
    )
    return [(r.name, r.policy, r.result) for r in audit(objects, context)]


CASES = [
    pytest.param(4, [held("a", 2), held("b", 1)],
                 [("a", "dragate", "pass"), ("b", "dragate", "pass")], id="within-quota"),
    pytest.param(2, [held("a", 2), held("b", 1)],
                 [("a", "Tenant/team-a", "fail"), ("b", "Tenant/team-a", "fail")],
                 id="quota-lowered-below-usage"),
    pytest.param(3, [held("a", 2), held("b", 1)],
                 [("a", "dragate", "pass"), ("b", "dragate", "pass")],
                 id="exactly-at-the-limit-counts-each-claim-once"),
    pytest.param(4, [template(request(exact("gpu", GPU, 9)), name="big")],
                 [("big", "dragate", "pass")], id="template-outside-per-claim-rules"),
    pytest.param(4, [{"apiVersion": "v1", "kind": "ConfigMap",
                      "metadata": {"name": "c", "namespace": "team-a"}}], [], id="not-audited"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("enforcement", "result"), [("Audit", "fail"), ("Warn", "warn")], ids=["audit", "warn"]
)
def test_a_rollout_mode_admits_but_the_audit_still_reports(enforcement: str, result: str) -> None:
    found = judged(2, [held("a", 2), held("b", 1)], enforcement)
    assert found == [("a", "Tenant/team-a", result), ("b", "Tenant/team-a", result)]


@pytest.mark.parametrize(("limit", "objects", "expected"), CASES)
def test_existing_objects_are_judged_against_the_policies_in_force(
    limit: int, objects: list[dict[str, Any]], expected: list[tuple[str, str, str]]
) -> None:
    assert judged(limit, objects) == expected


def test_a_failure_carries_the_numbers() -> None:
    state = SnapshotState([namespace("team-a"), held("a", 3)])
    current = policies(2)
    ledger = MemoryLedger(existing_holds(current, state))
    context = Context(policies=lambda: current, state=state, ledger=ledger)
    (result,) = audit([held("a", 3)], context)
    assert result.properties == {"deviceClassName": GPU, "used": "0", "limit": "2",
                                 "requested": "3"}  # fmt: skip
    assert (result.tenant, result.uid, result.namespace) == ("team-a", "uid-a", "team-a")


@pytest.mark.parametrize(
    ("obj", "asks"),
    [
        pytest.param(pod(), False, id="cpu-only"),
        pytest.param(pod(claims={"g": "tmpl"}), True, id="template-claims"),
        pytest.param(
            {"spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": 2}}}]}},
            True,
            id="legacy-gpu",
        ),
        pytest.param(
            {"spec": {"resourceClaims": [{"name": "g"}], "containers": []}}, True, id="claims"
        ),
        pytest.param(
            {"spec": {"containers": [{"resources": {"limits": {"hugepages-2Mi": "1Gi"}}}]}},
            False,
            id="hugepages",
        ),
    ],
)
def test_which_pods_the_audit_reads(obj: dict[str, Any], asks: bool) -> None:
    assert asks_for_devices(obj) is asks


def test_each_tenant_s_usage_is_judged_against_its_quota() -> None:
    current = policies(2)
    usage = {"gpu.nvidia.com": ClassUsage(3)}
    (result,) = tenant_results(current, lambda name: usage if name == "team-a" else {})
    assert (result.kind, result.name, result.namespace, result.result) == (
        "Tenant",
        "team-a",
        "",
        "fail",
    )
    assert result.properties == {"deviceClassName": GPU, "used": "3", "limit": "2"}
    (within,) = tenant_results(policies(4), lambda name: usage)
    assert within.result == "pass"


def test_a_warning_goes_whole_into_the_report_where_kubectl_shows_120_characters() -> None:
    long = "dragate: request 'gpu' needs 2 gpu.nvidia.com devices, 0 in the cluster match; " * 3
    verdict = Verdict(Decision(warnings=(long,)))
    (result,) = results_of(pod("p", namespace="team-a"), verdict)
    assert (result.result, result.message) == ("warn", long.removeprefix("dragate: "))
    assert len(short_warning(long)) <= 120


RULE_POLICIES = """
apiVersion: dragate.io/v1alpha1
kind: DeviceClassPolicy
metadata: {name: gpu-rules}
spec:
  deviceClassNames: [gpu.nvidia.com]
  enforcement: Audit
  validations:
  - {expression: "true", message: always}
  - {expression: "request.count <= 1", message: one at most}
"""


def test_a_broken_validation_is_reported_under_its_index_as_the_rule() -> None:
    objects = [held("a", 2)]
    state = SnapshotState([namespace("team-a"), *objects])
    current = parse_policies(RULE_POLICIES)
    context = Context(policies=lambda: current, state=state, ledger=MemoryLedger({}))
    (found,) = audit(objects, context)
    assert (found.policy, found.rule, found.result) == (
        "DeviceClassPolicy/gpu-rules",
        "validations[1]",
        "fail",
    )


def verdict_of(reason: Reason, mode: Action | None = None) -> Verdict:
    if mode is None:
        return Verdict(Decision(allowed=False, reasons=(reason,)))
    return Verdict(Decision(violations=(Violation(mode, reason),)))


RULES = [
    pytest.param(verdict_of(Reason("Tenant/team-a", "over", rule="quota")), "quota",
                 id="quota"),
    pytest.param(verdict_of(Reason("feasibility", "no node"), Action.WARN), "feasibility",
                 id="feasibility"),
    pytest.param(verdict_of(Reason("Tenant/team-a", "class", rule="allowedDeviceClasses"),
                            Action.AUDIT), "allowedDeviceClasses", id="tenant-check"),
    pytest.param(Verdict(Decision(warnings=("dragate: binds late (binding)",))), "binding",
                 id="plain-warning"),
    pytest.param(Verdict(Decision()), "admission", id="pass"),
]  # fmt: skip


@pytest.mark.parametrize(("verdict", "rule"), RULES)
def test_every_result_names_its_rule(verdict: Verdict, rule: str) -> None:
    (result,) = results_of(pod("p", namespace="team-a"), verdict)
    assert result.rule == rule


def test_each_tenant_quota_result_names_its_rule() -> None:
    (result,) = tenant_results(policies(2), lambda name: {})
    assert result.rule == "maxDevices"


MESSAGES = [
    pytest.param("dragate: no node fits the claim (feasibility)", "no node fits the claim",
                 id="feasibility-warning"),
    pytest.param("dragate: rule broken (policy)", "rule broken", id="policy-warning"),
    pytest.param("dragate: pod claim 'g' (x), binds late", "pod claim 'g' (x), binds late",
                 id="no-suffix"),
]  # fmt: skip


@pytest.mark.parametrize(("warning", "message"), MESSAGES)
def test_a_report_message_has_no_kubectl_decoration(warning: str, message: str) -> None:
    (result,) = results_of(pod("p", namespace="team-a"), Verdict(Decision(warnings=(warning,))))
    assert result.message == message


def test_dragate_s_own_templates_are_not_reported() -> None:
    own = template(request(exact("gpu", GPU, 9)), name="dragate-legacy-gpu")
    own["metadata"]["labels"] = {MANAGED_BY_LABEL: MANAGED_BY_VALUE}
    assert judged(4, [own, template(request(exact("gpu", GPU, 1)), name="mine")]) == [
        ("mine", "dragate", "pass")
    ]


def test_a_claim_over_quota_is_not_named_among_what_holds_it() -> None:
    objects = [held("a", 2), held("b", 2)]
    state = SnapshotState([namespace("team-a"), *objects])
    current = policies(3)
    context = Context(
        policies=lambda: current, state=state, ledger=MemoryLedger(existing_holds(current, state))
    )
    first = next(r for r in audit(objects, context) if r.name == "a")
    assert "claim:team-a/b (2)" in first.message
    assert "claim:team-a/a" not in first.message
    assert first.properties["used"] == "2"


def _audited_with_streamed_pods(cached: list[dict[str, Any]], pods: Any) -> Any:
    names = ("team-a", "team-b", "team-a-x")
    state = SnapshotState([*map(namespace, names), template(
        request(exact("gpu", GPU, 1)), name="tmpl")])  # fmt: skip
    current = policies(100)
    context = Context(policies=lambda: current, state=state, ledger=MemoryLedger())
    return audit(cached, context, streamed=pods)


def test_streamed_pods_are_judged_as_they_are_read_never_held_all_at_once() -> None:
    read = 0

    def pages() -> Any:
        nonlocal read
        for i in range(1000):
            read += 1
            yield pod(f"p{i:04}", claims={"g": "tmpl"}, uid=f"uid-p{i}")

    results = _audited_with_streamed_pods([], pages())
    first = next(results)
    assert (first.kind, first.name, read) == ("Pod", "p0000", 1)
    assert sum(1 for _ in results) == 999
    assert read == 1000


@pytest.mark.parametrize(
    ("first", "second"),
    [("team-a", "team-b"), ("team-a-x", "team-a")],
    ids=["by-namespace", "bytewise-as-the-storage-keys"],
)
def test_cached_objects_are_sorted_and_streamed_pods_merged_in_the_listed_order(
    first: str, second: str
) -> None:
    cached = [held("second-claim", 1), held("first-claim", 1)]
    cached[0]["metadata"]["namespace"], cached[1]["metadata"]["namespace"] = second, first
    streamed = [pod("first-pod", first, claims={"g": "tmpl"}),
                pod("second-pod", second, claims={"g": "tmpl"})]  # fmt: skip
    found = [(r.namespace, r.name) for r in _audited_with_streamed_pods(cached, iter(streamed))]
    assert found == [(first, "first-claim"), (first, "first-pod"),
                     (second, "second-claim"), (second, "second-pod")]  # fmt: skip
