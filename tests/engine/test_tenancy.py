"""Tenant resolution: names first, then label selectors, with Kubernetes selector semantics."""

from __future__ import annotations

import pytest

from webhook.engine.tenancy import resolve_tenant, selector_matches
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
