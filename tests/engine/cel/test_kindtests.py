"""Which kind tests the checker decides, and which it leaves to run time."""

from __future__ import annotations

import pytest

from webhook.engine.cel.kindtests import static_kind_test
from webhook.engine.cel.syntax import parse
from webhook.engine.cel.types import CelType

CASES = {
    "equal-same-kind": ("object.kind == 'Pod'", "Pod", True),
    "equal-other-kind": ("object.kind == 'Pod'", "ResourceClaim", False),
    "not-equal": ("object.kind != 'Pod'", "Pod", False),
    "literal-first": ('"Pod" == object.kind', "Pod", True),
    "parenthesized": ("((object.kind == 'Pod'))", "ResourceClaim", False),
    "no-kind-known": ("object.kind == 'Pod'", "", None),
    "another-field": ("object.apiVersion == 'v1'", "Pod", None),
    "another-variable": ("oldObject.kind == 'Pod'", "Pod", None),
    "not-a-literal": ("object.kind == tenant", "Pod", None),
    "a-comparison-of-order": ("object.kind < 'Pod'", "Pod", None),
    "a-conjunction": ("object.kind == 'Pod' && true", "Pod", None),
}


@pytest.mark.parametrize(("expression", "kind", "value"), CASES.values(), ids=CASES)
def test_static_kind_test(expression: str, kind: str, value: bool | None) -> None:
    assert static_kind_test(parse(expression), kind, {}) is value


def test_a_rebound_object_is_not_the_object() -> None:
    scope: dict[str, CelType] = {"object": "dyn"}
    assert static_kind_test(parse("object.kind == 'Pod'"), "Pod", scope) is None
