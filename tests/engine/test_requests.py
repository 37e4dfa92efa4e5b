"""A request's remembered findings are the ones its checks give, whatever was asked before.

`check_request` remembers a leaf's findings in the leaf's rules memo; every answer here is
compared with the first, cold one (the memo emptied), and everything the findings read besides
the memo's key is changed once: the tenant, the class policies (a reload), the namespace's
admin-access label, the prefix, the object a rule reads, and the time left.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from typing import Any

import pytest

from webhook.engine import rules
from webhook.engine.cel import compile_expression
from webhook.engine.requests import MAX_FINDINGS_PER_REQUEST, check_request
from webhook.engine.rules import RuleInputs
from webhook.policy.celspec import VALIDATION_VARIABLES
from webhook.types import (
    ADMIN_ACCESS_LABEL,
    Action,
    AllocationMode,
    Deadline,
    DeadlineExceeded,
    DeviceClassPolicy,
    DeviceRequest,
    PolicySet,
    Tenant,
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


def rule(expression: str, message: str, action: Action = Action.DENY) -> Validation:
    return Validation(
        expression, message, action, compile_expression(expression, variables=VARIABLES)
    )


def policies(limit: int = 2, all_mode: bool = False, *extra: Validation) -> PolicySet:
    guard = DeviceClassPolicy(
        "guard",
        frozenset({"gpu.nvidia.com"}),
        max_count_per_request=limit,
        allow_allocation_mode_all=all_mode,
        validations=(rule("request.count != 3", "never three"), *extra),
    )
    warn = DeviceClassPolicy(
        "warn", frozenset(), validations=(rule("tenant != 'b'", "tenant b", Action.WARN),)
    )
    return PolicySet(class_policies=(guard, warn))


TENANTS = {
    "a": Tenant("a", allowed_device_classes=frozenset({"gpu.nvidia.com"}), admin_access=True),
    "b": Tenant("b", allowed_device_classes=None),
    "a-without-admin": Tenant("a", allowed_device_classes=frozenset({"mig.nvidia.com"})),
    "none": None,
}
LEAVES = {
    "one": DeviceRequest("gpu", "gpu.nvidia.com", 1),
    "three": DeviceRequest("gpu", "gpu.nvidia.com", 3),
    "five": DeviceRequest("gpu", "gpu.nvidia.com", 5),
    "all": DeviceRequest("gpu", "gpu.nvidia.com", 0, AllocationMode.ALL),
    "admin": DeviceRequest("gpu", "gpu.nvidia.com", 1, admin_access=True),
    "mig": DeviceRequest("gpu", "mig.nvidia.com", 1),
    "either": DeviceRequest(
        "gpu",
        alternatives=(
            DeviceRequest("gpu/a", "gpu.nvidia.com", 3),
            DeviceRequest("gpu/b", "mig.nvidia.com", 1),
        ),
    ),
}
LABELS = {"labelled": {ADMIN_ACCESS_LABEL: "true"}, "unlabelled": {}}


def inputs(tenant: Tenant | None, obj: Any = None, deadline: Deadline | None = None) -> Any:
    return RuleInputs(
        tenant=tenant.name if tenant else "",
        operation="CREATE",
        sources={"object": lambda: obj},
        memos=MEMOS,
        deadline=deadline,
    )


def judged(leaf: str, tenant: str, labels: str, policy: PolicySet, **more: Any) -> list[str]:
    found = check_request(
        LEAVES[leaf],
        policies=policy,
        tenant=TENANTS[tenant],
        namespace_labels=LABELS[labels],
        inputs=more.pop("given", None) or inputs(TENANTS[tenant]),
        **more,
    )
    return [f"{f.action}: {f.reason}" for f in found]


CASES = list(itertools.product(LEAVES, TENANTS, LABELS))


def test_every_answer_is_the_cold_one_in_any_order() -> None:
    policy = policies()
    cold = {}
    for case in CASES:
        MEMOS.forget()
        cold[case] = judged(*case, policy)
    MEMOS.forget()
    for case in [*CASES, *reversed(CASES), *CASES]:
        assert judged(*case, policy) == cold[case], case


@pytest.mark.parametrize("leaf", LEAVES, ids=list(LEAVES))
def test_a_reloaded_policy_set_is_judged_by_its_own_policies(leaf: str) -> None:
    before, after = policies(limit=2), policies(limit=8, all_mode=True)
    judged(leaf, "a", "labelled", before)
    expected = judged(leaf, "a", "labelled", after)
    MEMOS.forget()
    assert judged(leaf, "a", "labelled", after) == expected
    changed = judged(leaf, "a", "labelled", before) != expected  # the limits changed
    assert changed is (leaf in {"three", "five", "all", "either"})


def test_another_tenant_of_the_same_name_is_judged_as_itself() -> None:
    policy = policies()
    with_gpus = judged("one", "a", "labelled", policy)
    without = judged("one", "a-without-admin", "labelled", policy)
    assert with_gpus != without and "may not use device class" in " ".join(without)


def test_the_prefix_and_the_admin_label_are_read() -> None:
    policy = policies()
    assert judged("admin", "a", "labelled", policy) == []
    assert "requires the label" in " ".join(judged("admin", "a", "unlabelled", policy))
    first = judged("three", "a", "labelled", policy, prefix="pod claim 'x', ")
    assert all("pod claim 'x'" in f for f in first)
    assert all(
        "pod claim 'y'" in f
        for f in judged("three", "a", "labelled", policy, prefix="pod claim 'y', ")
    )


def test_a_rule_reading_the_object_is_evaluated_every_time() -> None:
    policy = policies(2, False, rule("object.metadata.name != 'bad'", "bad name"))
    good, bad = {"metadata": {"name": "good"}}, {"metadata": {"name": "bad"}}
    tenant = TENANTS["a"]
    assert judged("one", "a", "labelled", policy, given=inputs(tenant, good)) == []
    assert judged("one", "a", "labelled", policy, given=inputs(tenant, bad)) != []
    assert judged("one", "a", "labelled", policy, given=inputs(tenant, good)) == []


def test_past_the_deadline_nothing_is_answered_from_memory() -> None:
    policy = policies()
    judged("three", "a", "labelled", policy)
    late = inputs(TENANTS["a"], deadline=Deadline(time.monotonic() - 1))
    with pytest.raises(DeadlineExceeded):
        judged("three", "a", "labelled", policy, given=late)


def test_findings_one_request_remembers_stay_bounded() -> None:
    policy = policies()
    for i in range(MAX_FINDINGS_PER_REQUEST + 10):
        judged("three", "a", "labelled", policy, prefix=f"pod claim 'c{i}', ")
        memo = rules.results_of(MEMOS, LEAVES["three"], "a", "CREATE")
        assert len(memo.findings) <= MAX_FINDINGS_PER_REQUEST
