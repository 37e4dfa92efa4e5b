"""A Pod's shape remembered: the second of two judgments is the judgment made cold.

Each case judges a first Pod (warming the memo), then a second Pod that shares its shape key
or differs in one thing the shape reads; the second answer must equal the answer the engine
gives with every memo empty, and where the case changes something the shape reads, that
cold answer must differ from the first one (so the case tests what it names).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from builders import exact, namespace, pod, request, template
from shape_support import (
    DENIES_EVERY_COUNT,
    DENY_UNKNOWN,
    NO_CAPACITY,
    READS_OBJECT,
    REQUEST_ONLY,
    TEAM,
    feasible,
    forget,
    infeasible,
)

from webhook.engine import evaluate, podshapes, rules
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
    Operation,
    PolicySet,
    Tenant,
)

ONE = template(request(exact(count=1)), name="gpu")
TWO = template(request(exact(count=2)), name="gpu")
ADMIN = template(request(exact(admin=True)), name="gpu")


@dataclass(frozen=True)
class Judgment:
    """One `evaluate` call's inputs."""

    obj: dict[str, Any]
    policies: PolicySet = REQUEST_ONLY
    templates: dict[str, Any] = field(default_factory=lambda: {"gpu": ONE})
    labels: dict[str, str] = field(default_factory=dict)
    feasibility: Callable[[ClaimSpec], Sequence[str]] = feasible
    usage: dict[str, ClassUsage] = field(default_factory=dict)
    tenant: Tenant | None = TEAM

    def request(self) -> AdmissionRequest:
        meta = self.obj["metadata"]
        return AdmissionRequest(
            uid=meta.get("uid", "review"),
            kind="Pod",
            group="",
            version="v1",
            resource="pods",
            operation=Operation.CREATE,
            namespace=meta["namespace"],
            name=meta["name"],
            object=self.obj,
        )

    def facts(self) -> Facts:
        ns = self.obj["metadata"]["namespace"]
        return Facts(
            namespace=namespace(ns, **self.labels),
            tenant=self.tenant,
            templates=self.templates,
            feasibility=self.feasibility,
            class_capacity=NO_CAPACITY,
            usage=self.usage,
        )

    def judge(self, deadline: Deadline | None = None) -> Decision:
        return evaluate(self.request(), self.policies, self.facts(), deadline)


def _pod(name: str = "web-1", uid: str = "uid-1", ns: str = "team-a") -> dict[str, Any]:
    return pod(name, ns, claims={"gpu": "gpu"}, uid=uid)


FIRST = Judgment(_pod())
CASES = [  # id, second judgment, whether its cold answer differs from FIRST's
    ("the same pod again", FIRST, False),
    ("another uid: its own holders", Judgment(_pod("web-2", "uid-2")), True),
    ("a template of the same name, other content", replace(FIRST, templates={"gpu": TWO}), True),
    ("the template gone", replace(FIRST, templates={}), True),
    ("another namespace of the tenant", Judgment(_pod(ns="team-a-2")), False),
    ("other policies, the same tenant", replace(FIRST, policies=DENIES_EVERY_COUNT), True),
    ("a rule that reads the object", replace(FIRST, policies=READS_OBJECT), False),
    ("another feasibility", replace(FIRST, feasibility=infeasible), True),
    (
        "the tenant's usage moved: quota is per Pod",
        replace(FIRST, usage={"gpu.nvidia.com": ClassUsage(4, (Holder("other", 4),))}),
        True,
    ),
]
ADMIN_FIRST = Judgment(_pod(), templates={"gpu": ADMIN}, labels={ADMIN_ACCESS_LABEL: "true"})
ADMIN_CASES = [
    ("the admin-access label removed", replace(ADMIN_FIRST, labels={}), True),
    ("the admin-access label kept", ADMIN_FIRST, False),
]
LOST_FIRST = Judgment(_pod(ns="lost-1"), policies=DENY_UNKNOWN, tenant=None)
LOST_CASES = [  # the denial names the namespace
    ("another namespace of no tenant", replace(LOST_FIRST, obj=_pod(ns="lost-2")), True),
]


@pytest.fixture(autouse=True)
def _cold() -> Iterator[None]:
    forget()
    yield
    forget()


def _cold_answer(judgment: Judgment) -> Decision:
    forget()
    return _judged(judgment)


def _judged(judgment: Judgment) -> Decision:
    """The judgment, without the Pod's name its holders carry (the Pod's own, as its uid)."""
    return replace(judgment.judge(), names={})


@pytest.mark.parametrize(
    ("first", "second", "differs"),
    [(FIRST, second, differs) for _, second, differs in CASES]
    + [(ADMIN_FIRST, second, differs) for _, second, differs in ADMIN_CASES]
    + [(LOST_FIRST, second, differs) for _, second, differs in LOST_CASES],
    ids=[name for name, _, _ in CASES + ADMIN_CASES + LOST_CASES],
)
def test_a_remembered_shape_answers_as_a_cold_judgment(
    first: Judgment, second: Judgment, differs: bool
) -> None:
    expected = _cold_answer(second)
    assert (expected != _cold_answer(first)) is differs
    forget()
    first.judge()
    assert podshapes.remembered(first.policies.memos) == 1
    assert _judged(second) == expected


def test_the_holders_are_the_pods_own() -> None:
    FIRST.judge()
    second = Judgment(_pod("web-2", "uid-2")).judge()
    assert list(second.holds) == ["pod:uid-2/gpu"]
    assert podshapes.remembered(REQUEST_ONLY.memos) == 1


def test_a_shape_is_not_remembered_when_a_rule_reads_the_object() -> None:
    forbidden = Judgment(_pod("forbidden", "uid-f"), policies=READS_OBJECT)
    Judgment(_pod(), policies=READS_OBJECT).judge()
    assert podshapes.remembered(READS_OBJECT.memos) == 0
    assert not forbidden.judge().allowed


def test_a_pod_of_the_same_shape_is_judged_without_its_rules() -> None:
    """The point of the memo: the second Pod's rules are not evaluated again."""
    FIRST.judge()
    REQUEST_ONLY.memos.of(rules.RESULTS).clear()
    Judgment(_pod("web-2", "uid-2")).judge()
    assert len(REQUEST_ONLY.memos.of(rules.RESULTS)) == 0


def test_near_the_deadline_nothing_is_remembered_or_answered_from_memory() -> None:
    near = Deadline(at=GUARD_SECONDS / 2, clock=lambda: 0.0)
    assert FIRST.judge(near).allowed  # rules evaluated under the deadline's bound
    assert podshapes.remembered(REQUEST_ONLY.memos) == 0
    past = Deadline(at=0.0, clock=lambda: 0.0)
    FIRST.judge()
    assert podshapes.remembered(REQUEST_ONLY.memos) == 1
    with pytest.raises(DeadlineExceeded):
        FIRST.judge(past)  # a remembered shape does not let a late review through
