"""`spec.enforcement` on Tenant and DeviceClassPolicy: read, defaulted, passed to the rules."""

from __future__ import annotations

from textwrap import dedent

import pytest

from webhook.policy.loading import PolicyError, parse_policies
from webhook.types import Action

TENANT = """
apiVersion: dragate.io/v1alpha1
kind: Tenant
metadata: {{name: team-a}}
spec:
  namespaces: [team-a]
  {enforcement}
"""
CLASS_POLICY = """
apiVersion: dragate.io/v1alpha1
kind: DeviceClassPolicy
metadata: {{name: gpu}}
spec:
  {enforcement}
  validations:
  - expression: "request.count < 4"
  - expression: "request.count < 8"
    action: Deny
  - expression: "request.count < 2"
    action: Warn
"""

MODES = [
    pytest.param("", Action.DENY, id="default-deny"),
    pytest.param("enforcement: Deny", Action.DENY, id="deny"),
    pytest.param("enforcement: Warn", Action.WARN, id="warn"),
    pytest.param("enforcement: Audit", Action.AUDIT, id="audit"),
]


@pytest.mark.parametrize(("line", "mode"), MODES)
def test_tenant_enforcement(line: str, mode: Action) -> None:
    (tenant,) = parse_policies(TENANT.format(enforcement=line), "t.yaml").tenants
    assert tenant.enforcement is mode


@pytest.mark.parametrize(("line", "mode"), MODES)
def test_class_policy_enforcement_reaches_validations_without_their_own_action(
    line: str, mode: Action
) -> None:
    (policy,) = parse_policies(CLASS_POLICY.format(enforcement=line), "t.yaml").class_policies
    assert policy.enforcement is mode
    assert [v.action for v in policy.validations] == [mode, Action.DENY, Action.WARN]


@pytest.mark.parametrize(
    "text",
    [
        TENANT.format(enforcement="enforcement: Dryrun"),
        CLASS_POLICY.format(enforcement="enforcement: deny"),
    ],
    ids=["tenant", "class-policy"],
)
def test_an_unknown_mode_is_refused_with_its_line(text: str) -> None:
    with pytest.raises(PolicyError) as caught:
        parse_policies(dedent(text), "t.yaml")
    (problem,) = (str(p) for p in caught.value.problems)
    assert problem.startswith("t.yaml:") and "spec.enforcement" in problem
    assert "Deny" in problem and "Warn" in problem and "Audit" in problem
