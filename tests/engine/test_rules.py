"""A policy's remembered failures are the failures its rules give, and only where they can be.

The first answer for a request is the uncached one (the memo starts empty); every later answer
must equal it, a rule that reads the object must still be evaluated each time, a reloaded
policy is judged by its own rules, and a review near or past its deadline is not answered
from memory.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from typing import Any

import pytest

from webhook.engine import rules
from webhook.engine.cel import compile_expression
from webhook.engine.rules import MAX_POLICIES_PER_REQUEST, RuleInputs, failed_rules
from webhook.policy.celspec import VALIDATION_VARIABLES
from webhook.types import (
    Action,
    AllocationMode,
    Deadline,
    DeadlineExceeded,
    DeviceRequest,
    Validation,
)
from webhook.types.memos import Memos

VARIABLES = VALIDATION_VARIABLES
MEMOS = Memos()  # the tables of a policy set, shared by this module's tests


@pytest.fixture(autouse=True)
def _cold_rule_memos() -> Iterator[None]:
    """Rule results start and end unremembered, so a test sees its own evaluations."""
    MEMOS.forget()
    yield
    MEMOS.forget()


def rule(expression: str, message: str = "", action: Action = Action.DENY) -> Validation:
    program = compile_expression(expression, variables=VARIABLES, expect_bool=False)
    return Validation(expression, message or expression, action, program)


def inputs(obj: Any = None, *, tenant: str = "team-a", deadline: Deadline | None = None) -> Any:
    return RuleInputs(
        tenant=tenant,
        operation="CREATE",
        sources={"object": lambda: obj, "namespace": lambda: None},
        memos=MEMOS,
        deadline=deadline,
    )


def _seen(failures: list[rules.RuleFailure]) -> list[tuple[str, str, Action]]:
    return [(f.validation.message, f.detail, f.action) for f in failures]


REQUESTS = {
    "one": DeviceRequest("gpu", "gpu.nvidia.com", 1),
    "four": DeviceRequest("gpu", "gpu.nvidia.com", 4),
    "all": DeviceRequest("gpu", "gpu.nvidia.com", 0, AllocationMode.ALL),
    "pinned": DeviceRequest("gpu", "gpu.nvidia.com", 1, selectors=("device.attributes.uuid",)),
}
POLICIES = {
    "request-only": (
        rule("request.count <= 2", "at most two"),
        rule("request.selectors.all(s, !s.contains('uuid'))", "no pinning", Action.WARN),
        rule("tenant != 'team-a'", "team-a", Action.AUDIT),
        rule("operation == 'CREATE'"),
    ),
    "errors-and-non-bools": (
        rule("request.count / 0 == 1", "divides by zero"),
        rule("request.count", "not a bool"),
        rule("request.allocationMode == 'All'", "all only"),
    ),
    "without-programs": (Validation("x", "never compiled", Action.DENY), rule("false")),
    "empty": (),
}


@pytest.mark.parametrize("policy", POLICIES, ids=list(POLICIES))
@pytest.mark.parametrize("request_name", REQUESTS, ids=list(REQUESTS))
@pytest.mark.parametrize("tenant", ["team-a", "team-b"])
def test_remembered_failures_are_the_rules_own(policy: str, request_name: str, tenant: str) -> None:
    validations, request = POLICIES[policy], REQUESTS[request_name]
    cold = _seen(failed_rules(validations, request, inputs(tenant=tenant)))  # an empty memo
    for _ in range(2):
        assert _seen(failed_rules(validations, request, inputs(tenant=tenant))) == cold


def test_a_rule_reading_the_object_is_evaluated_every_time() -> None:
    validations = (rule("request.count <= 2"), rule("object.metadata.name != 'bad'", "bad name"))
    request = REQUESTS["one"]
    good, bad = {"metadata": {"name": "good"}}, {"metadata": {"name": "bad"}}
    assert _seen(failed_rules(validations, request, inputs(good))) == []
    assert _seen(failed_rules(validations, request, inputs(bad))) == [("bad name", "", Action.DENY)]
    assert _seen(failed_rules(validations, request, inputs(good))) == []


def test_a_reloaded_policy_is_judged_by_its_own_rules() -> None:
    """Reloading compiles a new tuple: the old one's remembered failures never answer for it."""
    request = REQUESTS["four"]
    old = (rule("request.count <= 2", "old message"),)
    new = (rule("request.count <= 2", "new message"),)
    assert _seen(failed_rules(old, request, inputs())) == [("old message", "", Action.DENY)]
    assert _seen(failed_rules(new, request, inputs())) == [("new message", "", Action.DENY)]
    stricter = (rule("request.count <= 8", "old message"),)
    assert _seen(failed_rules(stricter, request, inputs())) == []


def test_a_review_past_its_deadline_is_not_answered_from_memory() -> None:
    validations, request = POLICIES["request-only"], REQUESTS["four"]
    failed_rules(validations, request, inputs())
    with pytest.raises(DeadlineExceeded):
        failed_rules(validations, request, inputs(deadline=Deadline(time.monotonic() - 1)))


def test_failures_judged_near_the_deadline_are_not_remembered() -> None:
    validations, request = POLICIES["request-only"], REQUESTS["four"]
    near = Deadline(time.monotonic() + 1.0)  # under GUARD_SECONDS: each rule bounded by it
    expected = _seen(failed_rules(validations, request, inputs(deadline=near)))
    assert rules.results_of(MEMOS, request, "team-a", "CREATE").failures == {}
    assert _seen(failed_rules(validations, request, inputs())) == expected


def test_the_policies_one_request_remembers_stay_bounded() -> None:
    request = REQUESTS["one"]
    kept = [(rule(f"request.count < {i}"),) for i in range(MAX_POLICIES_PER_REQUEST + 10)]
    for validations, _ in itertools.product(kept, range(2)):
        failed_rules(validations, request, inputs())
        memo = rules.results_of(MEMOS, request, "team-a", "CREATE")
        assert len(memo.failures) <= MAX_POLICIES_PER_REQUEST
