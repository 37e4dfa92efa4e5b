"""A claim's findings remembered: the second of two judgments is the judgment made cold.

Each case judges a first claim (warming the memo), then a second claim that shares its key or
differs in one thing the findings read; the second answer must equal the answer the engine
gives with every memo empty, and where the case changes something the findings read, that
cold answer must differ from the first one (so the case tests what it names).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from builders import V1BETA1, claim, exact, namespace, request, template
from shape_support import (
    DENIES_EVERY_COUNT,
    DENY_UNKNOWN,
    NO_CAPACITY,
    NO_FEASIBILITY,
    OTHER_TEAM,
    READS_OBJECT,
    REQUEST_ONLY,
    TEAM,
    feasible,
    forget,
    infeasible,
)

from webhook.engine import claimshapes, contentmemo, evaluate, rules
from webhook.engine.cel import GUARD_SECONDS
from webhook.types import (
    ADMIN_ACCESS_LABEL,
    AdmissionRequest,
    ClaimSpec,
    ClassUsage,
    Deadline,
    DeadlineExceeded,
    Decision,
    Facts,
    Holder,
    Object,
    Operation,
    PolicySet,
    Tenant,
)

GPU_CLASS = {"gpu.nvidia.com": {"metadata": {"name": "gpu.nvidia.com"}}}
OTHER_CLASS = {"tpu.example.com": {"metadata": {"name": "tpu.example.com"}}}


@dataclass(frozen=True)
class Judgment:
    """One `evaluate` call's inputs."""

    obj: Object
    policies: PolicySet = REQUEST_ONLY
    labels: dict[str, str] = field(default_factory=dict)
    feasibility: Callable[[ClaimSpec], Sequence[str]] | None = feasible
    usage: dict[str, ClassUsage] = field(default_factory=dict)
    tenant: Tenant | None = TEAM
    classes: Mapping[str, Object] = field(default_factory=lambda: GPU_CLASS)

    def request(self) -> AdmissionRequest:
        meta = self.obj["metadata"]
        return AdmissionRequest(
            uid="review",
            kind=self.obj["kind"],
            group="resource.k8s.io",
            version=self.obj["apiVersion"].rpartition("/")[2],
            resource="resourceclaims",
            operation=Operation.CREATE,
            namespace=meta["namespace"],
            name=meta["name"],
            object=self.obj,
        )

    def facts(self) -> Facts:
        return Facts(
            namespace=namespace(self.obj["metadata"]["namespace"], **self.labels),
            tenant=self.tenant,
            device_classes=self.classes,
            feasibility=self.feasibility,
            class_capacity=NO_CAPACITY,
            usage=self.usage,
        )

    def judge(self, deadline: Deadline | None = None) -> Decision:
        return evaluate(self.request(), self.policies, self.facts(), deadline)


def _claim(name: str = "c-1", ns: str = "team-a", count: Any = 1, **kw: Any) -> Object:
    return claim(request(exact(count=count, **kw)), name=name, namespace=ns)


def _flat_claim(name: str = "c-1") -> Object:
    return claim(request(exact(count=1), V1BETA1), name=name, version=V1BETA1)


FIRST = Judgment(_claim())
CASES = [  # id, second judgment, whether its cold answer differs from FIRST's
    ("the same claim again", FIRST, False),
    ("another claim alike: its own holder", Judgment(_claim("c-2")), True),
    ("another count", Judgment(_claim(count=2)), True),
    ("the same request in v1beta1's flat shape", Judgment(_flat_claim()), False),
    ("a template of the same spec", Judgment(template(request(exact()), name="c-1")), True),
    ("another namespace of the tenant", Judgment(_claim(ns="team-a-2")), True),
    ("another tenant", Judgment(_claim(ns="team-b"), tenant=OTHER_TEAM), True),
    ("other policies, the same tenant", replace(FIRST, policies=DENIES_EVERY_COUNT), True),
    ("a rule that reads the object", replace(FIRST, policies=READS_OBJECT), False),
    ("another feasibility", replace(FIRST, feasibility=infeasible), True),
    (
        "the tenant's usage moved: quota is per claim",
        replace(FIRST, usage={"gpu.nvidia.com": ClassUsage(4, (Holder("other", 4),))}),
        True,
    ),
    ("a malformed claim", Judgment(_claim(count="two")), True),
]
ADMIN_FIRST = Judgment(_claim(admin=True), labels={ADMIN_ACCESS_LABEL: "true"})
ADMIN_CASES = [
    ("the admin-access label removed", replace(ADMIN_FIRST, labels={}), True),
    ("the admin-access label kept", ADMIN_FIRST, False),
]
LOST_FIRST = Judgment(_claim(ns="lost-1"), policies=DENY_UNKNOWN, tenant=None)
LOST_CASES = [  # the denial names the namespace
    ("another namespace of no tenant", replace(LOST_FIRST, obj=_claim(ns="lost-2")), True),
]
CLASSES_FIRST = Judgment(_claim(), policies=NO_FEASIBILITY, feasibility=None)
CLASSES_CASES = [  # without a feasibility check, a class the cluster lacks is named
    ("the DeviceClass replaced by another", replace(CLASSES_FIRST, classes=OTHER_CLASS), True),
]
MALFORMED_FIRST = Judgment(_claim(count="two"))
MALFORMED_CASES = [("the same malformed content again", MALFORMED_FIRST, False)]
ALL_CASES = CASES + ADMIN_CASES + LOST_CASES + CLASSES_CASES + MALFORMED_CASES
FIRSTS = (
    [FIRST] * len(CASES)
    + [ADMIN_FIRST] * len(ADMIN_CASES)
    + [LOST_FIRST] * len(LOST_CASES)
    + [CLASSES_FIRST] * len(CLASSES_CASES)
    + [MALFORMED_FIRST] * len(MALFORMED_CASES)
)


@pytest.fixture(autouse=True)
def _cold() -> Iterator[None]:
    forget()
    yield
    forget()


def _cold_answer(judgment: Judgment) -> Decision:
    forget()
    return judgment.judge()


@pytest.mark.parametrize(
    ("first", "second", "differs"),
    [
        (first, second, differs)
        for first, (_, second, differs) in zip(FIRSTS, ALL_CASES, strict=True)
    ],
    ids=[name for name, _, _ in ALL_CASES],
)
def test_remembered_findings_answer_as_a_cold_judgment(
    first: Judgment, second: Judgment, differs: bool
) -> None:
    expected = _cold_answer(second)
    assert (expected != _cold_answer(first)) is differs
    forget()
    first.judge()
    assert claimshapes.remembered(first.policies.memos) == (first is not MALFORMED_FIRST)
    assert second.judge() == expected


def test_alike_claims_share_one_spec_and_one_entry() -> None:
    for i in range(5):
        assert list(Judgment(_claim(f"c-{i}")).judge().holds) == [f"claim:team-a/c-{i}"]
    assert claimshapes.remembered(REQUEST_ONLY.memos) == 1
    assert contentmemo.remembered(REQUEST_ONLY.memos, contentmemo.CLAIM_SPECS) == 1


def test_findings_are_not_remembered_when_a_rule_reads_the_object() -> None:
    forbidden = Judgment(_claim("forbidden"), policies=READS_OBJECT)
    Judgment(_claim(), policies=READS_OBJECT).judge()
    assert claimshapes.remembered(READS_OBJECT.memos) == 0
    assert not forbidden.judge().allowed


def test_an_alike_claim_is_judged_without_its_rules() -> None:
    """The point of the memo: the second claim's rules are not evaluated again."""
    FIRST.judge()
    REQUEST_ONLY.memos.of(rules.RESULTS).clear()
    Judgment(_claim("c-2")).judge()
    assert len(REQUEST_ONLY.memos.of(rules.RESULTS)) == 0


def test_near_the_deadline_nothing_is_remembered_or_answered_from_memory() -> None:
    near = Deadline(at=GUARD_SECONDS / 2, clock=lambda: 0.0)
    assert FIRST.judge(near).allowed  # rules evaluated under the deadline's bound
    assert claimshapes.remembered(REQUEST_ONLY.memos) == 0
    past = Deadline(at=0.0, clock=lambda: 0.0)
    FIRST.judge()
    assert claimshapes.remembered(REQUEST_ONLY.memos) == 1
    with pytest.raises(DeadlineExceeded):
        FIRST.judge(past)  # remembered findings do not let a late review through
