"""What the tests of remembered judgments share (tests/engine/test_podshapes.py and
test_claimshapes.py): a tenant, policy sets whose rules read only the request or also the
object, and the feasibility answers a case swaps."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType

from webhook.engine.cel import compile_expression
from webhook.types import (
    Action,
    ClaimSpec,
    DeviceClassPolicy,
    PolicySet,
    QuotaLimit,
    Settings,
    Tenant,
    Validation,
)

VARIABLES = ("request", "object", "oldObject", "namespace", "tenant", "operation", "userInfo")
TEAM = Tenant(
    "team-a",
    namespaces=frozenset({"team-a", "team-a-2"}),
    admin_access=True,
    quota=(QuotaLimit("gpu.nvidia.com", max_devices=4, max_devices_per_claim=2),),
)
OTHER_TEAM = replace(TEAM, name="team-b", namespaces=frozenset({"team-b"}))


def rule(expression: str, message: str) -> Validation:
    program = compile_expression(expression, variables=VARIABLES)
    return Validation(expression, message, Action.DENY, program)


def class_policy(*validations: Validation) -> DeviceClassPolicy:
    return DeviceClassPolicy("rules", frozenset({"gpu.nvidia.com"}), validations=validations)


SETTINGS = Settings(feasibility=Action.DENY)
REQUEST_ONLY = PolicySet(
    tenants=(TEAM, OTHER_TEAM),
    class_policies=(class_policy(rule("request.count <= 1", "one GPU")),),
    settings=SETTINGS,
)
READS_OBJECT = PolicySet(
    tenants=(TEAM,),
    class_policies=(class_policy(rule("object.metadata.name != 'forbidden'", "name")),),
    settings=SETTINGS,
)
DENIES_EVERY_COUNT = replace(
    REQUEST_ONLY, class_policies=(class_policy(rule("request.count < 1", "no GPU")),)
)  # the same tenant objects, other class policies
DENY_UNKNOWN = replace(REQUEST_ONLY, settings=replace(SETTINGS, deny_unknown_namespaces=True))
NO_FEASIBILITY = replace(REQUEST_ONLY, settings=replace(SETTINGS, feasibility=None))
ALL_SETS = (REQUEST_ONLY, READS_OBJECT, DENIES_EVERY_COUNT, DENY_UNKNOWN, NO_FEASIBILITY)
NO_CAPACITY: Mapping[str, int] = MappingProxyType({})


def infeasible(spec: ClaimSpec) -> Sequence[str]:
    return ("no node has such a GPU",)


def feasible(spec: ClaimSpec) -> Sequence[str]:
    return ()


def forget() -> None:
    """Empty what every policy set above remembers: each judgment of a case starts cold."""
    for policies in ALL_SETS:
        policies.memos.forget()
