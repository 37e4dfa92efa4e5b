"""Tenant resolution: names first, then label selectors, with Kubernetes selector semantics."""

from __future__ import annotations

import pytest

from webhook.engine.tenancy import resolve_tenant, selector_matches, tenant_index
from webhook.types import LabelRequirement, LabelSelector, PolicySet, Tenant

BY_LABEL = Tenant("by-label", namespace_selector=LabelSelector({"team": "a"}))
BY_NAME = Tenant("by-name", namespaces=frozenset({"ns-1"}))
POLICIES = PolicySet(tenants=(BY_LABEL, BY_NAME))


@pytest.mark.parametrize(
    ("namespace", "labels", "expected"),
    [
        ("ns-1", {"team": "a"}, "by-name"),
        ("ns-2", {"team": "a"}, "by-label"),
        ("ns-3", {"team": "b"}, None),
    ],
    ids=["name-wins-over-selector", "selector", "none"],
)
def test_resolve_tenant(namespace: str, labels: dict[str, str], expected: str | None) -> None:
    tenant = resolve_tenant(POLICIES, namespace, labels)
    assert (tenant.name if tenant else None) == expected


@pytest.mark.parametrize(
    ("requirement", "labels", "expected"),
    [
        (LabelRequirement("k", "In", ("a", "b")), {"k": "b"}, True),
        (LabelRequirement("k", "In", ("a",)), {}, False),
        (LabelRequirement("k", "NotIn", ("a",)), {"k": "b"}, True),
        (LabelRequirement("k", "NotIn", ("a",)), {}, True),
        (LabelRequirement("k", "NotIn", ("a",)), {"k": "a"}, False),
        (LabelRequirement("k", "Exists"), {"k": ""}, True),
        (LabelRequirement("k", "DoesNotExist"), {"k": ""}, False),
    ],
    ids=["in", "in-missing", "notin", "notin-missing", "notin-hit", "exists", "doesnotexist"],
)
def test_match_expressions(
    requirement: LabelRequirement, labels: dict[str, str], expected: bool
) -> None:
    assert selector_matches(LabelSelector(match_expressions=(requirement,)), labels) is expected


def test_empty_selector_matches_everything() -> None:
    assert selector_matches(LabelSelector(), {})


def _scan(policies: PolicySet, namespace: str, labels: dict[str, str]) -> Tenant | None:
    """The definition the index must agree with: names first, then selectors in order."""
    named = [t for t in policies.tenants if namespace in t.namespaces]
    if named:
        return named[0]
    selected = (
        t
        for t in policies.tenants
        if t.namespace_selector is not None and selector_matches(t.namespace_selector, labels)
    )
    return next(selected, None)


def _many_tenants() -> PolicySet:
    tenants = [
        Tenant(
            f"t-{i}",
            namespaces=frozenset({f"ns-{i}"}) if i % 3 else frozenset(),
            namespace_selector=LabelSelector({"team": f"team-{i % 7}"}) if i % 2 else None,
        )
        for i in range(200)
    ]
    tenants.insert(
        50,
        Tenant(
            "env-prod",
            namespace_selector=LabelSelector(
                match_expressions=(LabelRequirement("env", "In", ("prod",)),)
            ),
        ),
    )
    tenants.insert(
        5,
        Tenant("two-labels", namespace_selector=LabelSelector({"team": "team-3", "tier": "gold"})),
    )
    return PolicySet(tenants=tuple(tenants))


@pytest.mark.parametrize(
    ("namespace", "labels"),
    [
        ("ns-4", {"team": "team-1"}),
        ("ns-999", {"team": "team-1"}),
        ("ns-999", {"team": "team-3", "tier": "gold"}),
        ("ns-999", {"team": "team-3"}),
        ("ns-999", {"env": "prod", "team": "team-5"}),
        ("ns-999", {"env": "prod"}),
        ("ns-999", {}),
    ],
)
def test_index_agrees_with_a_scan(namespace: str, labels: dict[str, str]) -> None:
    policies = _many_tenants()
    assert resolve_tenant(policies, namespace, labels) == _scan(policies, namespace, labels)


def test_index_is_built_once_per_policy_set() -> None:
    first = _many_tenants()
    again = _many_tenants()
    assert tenant_index(first) is tenant_index(first)
    assert tenant_index(again) is not tenant_index(first)
    assert resolve_tenant(PolicySet(), "ns-4", {}) is None
