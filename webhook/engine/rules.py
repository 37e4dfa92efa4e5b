"""`DeviceClassPolicy.validations`: CEL rules evaluated once per normalized request.

Most rules read only `request` (and perhaps `tenant` and `operation`); their outcome depends
on nothing else, so it is memoized per (program, request, tenant, operation). Identical
requests are the common case — every replica of a workload uses the same template — which
keeps the steady-state cost of a rule near a dictionary lookup. When every rule of a policy is
of that kind, the policy's whole list of failures is remembered too, so a request the policy
has judged before costs one lookup, not one per rule. Rules that read the object or the
namespace are evaluated every time, with each variable converted to CEL at most once per
admission.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from webhook.engine.cel import GUARD_SECONDS, to_cel
from webhook.types import (
    Action,
    ClaimSpec,
    CompiledExpression,
    Deadline,
    DeviceRequest,
    EvalResult,
    FailurePolicy,
    PolicySet,
    Validation,
)
from webhook.types.lrutable import LruTable
from webhook.types.memos import Memos, Slot

MEMOIZABLE = frozenset({"request", "tenant", "operation"})


@dataclass(frozen=True)
class RuleFailure:
    """A rule that did not pass: false, not a bool, or an evaluation error."""

    validation: Validation
    detail: str = ""  # the error, when the rule could not be evaluated
    ignored: bool = False  # an error its policy's `failurePolicy: Ignore` turns into a warning

    @property
    def action(self) -> Action:
        return Action.WARN if self.ignored else self.validation.action

    def under(self, failure_policy: FailurePolicy) -> RuleFailure:
        """This failure as its policy's failurePolicy has it: Ignore skips a rule that could
        not be evaluated, leaving a warning; a rule that returned false always fails."""
        if not self.detail or failure_policy is FailurePolicy.FAIL:
            return self
        return RuleFailure(self.validation, self.detail, ignored=True)

    def describe(self) -> str:
        if self.ignored:
            return (
                f"{self.validation.message} (rule could not be evaluated, skipped by "
                f"failurePolicy Ignore: {self.detail})"
            )
        if self.detail:
            return f"{self.validation.message} (rule could not be evaluated: {self.detail})"
        return self.validation.message


@dataclass
class RuleInputs:
    """The CEL variables of one admission, converted lazily and at most once."""

    tenant: str
    operation: str
    sources: Mapping[str, Callable[[], Any]]
    memos: Memos  # the policy set's: rule results are remembered there (`RESULTS`)
    deadline: Deadline | None = None
    _converted: dict[str, Any] = field(default_factory=dict)
    _memos: dict[int, tuple[DeviceRequest, Memo]] = field(default_factory=dict)

    def memo_of(self, request: DeviceRequest) -> Memo:
        """The shared memo of `request` with this admission's tenant and operation, looked up
        once per request of the admission (every class policy asks; hashing it is not free)."""
        found = self._memos.get(id(request))
        if found is None or found[0] is not request:
            found = self._memos[id(request)] = (
                request,
                results_of(self.memos, request, self.tenant, self.operation),
            )
        return found[1]

    def near_deadline(self) -> bool:
        """Too little time left for a rule: every rule is evaluated, bounded, not remembered."""
        return near(self.deadline)

    def activation(self, names: frozenset[str], request: DeviceRequest) -> dict[str, Any]:
        values = {"request": to_cel(request_view(request))}
        for name in names - {"request"}:
            if name not in self._converted:
                self._converted[name] = to_cel(self._plain(name))
            values[name] = self._converted[name]
        return values

    def _plain(self, name: str) -> Any:
        if name == "tenant":
            return self.tenant
        if name == "operation":
            return self.operation
        source = self.sources.get(name)
        return source() if source is not None else None


def request_view(request: DeviceRequest) -> dict[str, Any]:
    """The `request` variable: field names as in the policy-file contract."""
    return {
        "name": request.name,
        "deviceClassName": request.device_class,
        "count": request.count,
        "allocationMode": request.allocation_mode.value,
        "adminAccess": request.admin_access,
        "selectors": list(request.selectors),
    }


def failed_rules(
    validations: tuple[Validation, ...], request: DeviceRequest, inputs: RuleInputs
) -> list[RuleFailure]:
    """The validations `request` fails, in policy order."""
    memo = inputs.memo_of(request)
    if inputs.near_deadline():
        return _failures(validations, request, inputs, memo)
    found = memo.failures.get(id(validations))
    if found is not None and found[0] is validations:  # an id is reused only once freed
        return list(found[1])
    failures = _failures(validations, request, inputs, memo)
    if memoizable(validations) and not inputs.near_deadline():  # none was cut short
        if len(memo.failures) >= MAX_POLICIES_PER_REQUEST:
            memo.failures.clear()
        memo.failures[id(validations)] = (validations, tuple(failures))
    return failures


def _failures(
    validations: tuple[Validation, ...], request: DeviceRequest, inputs: RuleInputs, memo: Memo
) -> list[RuleFailure]:
    failures = []
    for validation in validations:
        program = validation.program
        if program is None:
            continue
        result = _evaluate(program, request, inputs, memo.results)
        failure = _judge(validation, result)
        if failure is not None:
            failures.append(failure)
    return failures


def memoizable(validations: tuple[Validation, ...]) -> bool:
    """Whether every rule's result depends on the request, tenant and operation only."""
    return all(v.program is None or v.program.variables <= MEMOIZABLE for v in validations)


def request_only(specs: Sequence[ClaimSpec], policies: PolicySet) -> bool:
    """Whether every rule that applies to a request of `specs` reads only the request (and
    the tenant and operation): what a judgment remembered for alike Pods or claims needs."""
    return all(
        memoizable(policy.validations)
        for spec in specs
        for request in spec.requests
        for leaf in request.leaves()
        for policy in policies.class_policies
        if policy.applies_to(leaf.device_class)
    )


def near(deadline: Deadline | None) -> bool:
    """Less than one evaluation's allowance left: each rule then goes by `_evaluate_near`, and
    nothing a rule decides is remembered or answered from memory."""
    return deadline is not None and deadline.at - deadline.clock() < GUARD_SECONDS


def _evaluate(
    program: CompiledExpression, request: DeviceRequest, inputs: RuleInputs, memo: Results
) -> EvalResult:
    deadline = inputs.deadline
    if deadline is not None and near(deadline):  # (`is not None` for the type checker)
        return _evaluate_near(program, request, inputs, deadline)
    if not program.variables <= MEMOIZABLE:
        return program.evaluate(inputs.activation(program.variables, request))
    result = memo.get(program)
    if result is None:
        activation = _request_activation(request, inputs.tenant, inputs.operation)
        result = memo[program] = program.evaluate(activation)
    return result


def _evaluate_near(
    program: CompiledExpression, request: DeviceRequest, inputs: RuleInputs, deadline: Deadline
) -> EvalResult:
    """With less than one evaluation's allowance left before the review's deadline.

    The deadline bounds the evaluation itself and its result is not memoized (cut short by
    this review's time, it says nothing about the next review's). Past the deadline, before or
    after, DeadlineExceeded: the review is answered as a timeout, not as a failing rule.
    """
    deadline.check("evaluating policy rules")
    until = time.monotonic() + deadline.remaining()
    result = program.evaluate(_activation(program, request, inputs), until)
    deadline.check("judging a policy rule")
    return result


def _activation(
    program: CompiledExpression, request: DeviceRequest, inputs: RuleInputs
) -> dict[str, Any]:
    if program.variables <= MEMOIZABLE:
        return _request_activation(request, inputs.tenant, inputs.operation)
    return inputs.activation(program.variables, request)


Results = dict[CompiledExpression, EvalResult]
MAX_POLICIES_PER_REQUEST = 64
"""Policies whose failures one request's memo keeps; past this (reloads leave old policies
behind) it starts over."""


@dataclass
class Memo:
    """What is known of one (request, tenant, operation): each request-only rule's result, and
    per policy whose rules are all request-only, its failures (keyed by the validations
    tuple's id, with the tuple kept, so an entry is never mistaken for another policy's)."""

    results: Results = field(default_factory=dict)
    failures: dict[int, tuple[tuple[Validation, ...], tuple[RuleFailure, ...]]] = field(
        default_factory=dict
    )
    findings: dict[Any, Any] = field(default_factory=dict)  # `requests.check_request`'s


MAX_REQUESTS = 4096
"""(request, tenant, operation) memos one policy set keeps; the least recently used goes."""
RESULTS: Slot[LruTable[tuple[DeviceRequest, str, str], Memo]] = Slot(
    "rule results", lambda: LruTable[tuple[DeviceRequest, str, str], Memo](MAX_REQUESTS)
)


def results_of(memos: Memos, request: DeviceRequest, tenant: str, operation: str) -> Memo:
    """The memo of these inputs under the policy set that owns `memos`, filled as rules are
    evaluated.

    A rule's result depends on nothing else, so every review of the same request under one set
    shares the table (dicts: filling them from several threads at once at worst evaluates a
    rule twice; two threads that make the memo at once keep the later one).
    """
    table = memos.of(RESULTS)
    key = (request, tenant, operation)
    found = table.get(key)
    if found is None:
        found = Memo()
        table.put(key, found)
    return found


def _request_activation(request: DeviceRequest, tenant: str, operation: str) -> dict[str, Any]:
    return {
        "request": to_cel(request_view(request)),
        "tenant": to_cel(tenant),
        "operation": to_cel(operation),
    }


def _judge(validation: Validation, result: EvalResult) -> RuleFailure | None:
    if result.error is not None:
        return RuleFailure(validation, result.error)
    if result.value is True:
        return None
    if result.value is False:
        return RuleFailure(validation)
    return RuleFailure(validation, f"returned {result.value!r}, not a bool")
