"""CEL in policy files runs as the target Kubernetes minor's API server runs it: a rule loaded
for 1.35 or 1.36 gets their cel-go's functions, one loaded for 1.37 gets 1.37's."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from webhook.policy.celspec import VALIDATION_VARIABLES, compile_cel
from webhook.policy.loading import parse_policies
from webhook.policy.target import use_kube_version
from webhook.types.kubeversions import NEWEST

EMPTY_NEEDLE = 'object.metadata.name.indexOf("", 5) == 3'
"""cel-go 0.29 (Kubernetes 1.37) clamps an empty needle's offset to the string's length; the
cel-go of 1.35 and 1.36 does not find it past the end."""
OBJECT = {"object": {"metadata": {"name": "abc"}}}
PER_MINOR = [("1.35", False), ("1.36", False), ("1.37", True)]


@pytest.fixture
def target() -> Iterator[None]:
    yield
    use_kube_version(NEWEST)


@pytest.mark.parametrize(("minor", "expected"), PER_MINOR, ids=[m for m, _ in PER_MINOR])
@pytest.mark.usefixtures("target")
def test_a_rule_compiles_for_the_target_minor(minor: str, expected: bool) -> None:
    use_kube_version(minor)
    program, error = compile_cel(EMPTY_NEEDLE, VALIDATION_VARIABLES)
    assert error is None and program is not None
    assert program.evaluate(OBJECT).value is expected


@pytest.mark.parametrize(("minor", "expected"), PER_MINOR, ids=[m for m, _ in PER_MINOR])
@pytest.mark.usefixtures("target")
def test_a_policy_file_s_rule_runs_as_the_target_minor(minor: str, expected: bool) -> None:
    use_kube_version(minor)
    text = (
        "apiVersion: dragate.io/v1alpha1\nkind: DeviceClassPolicy\n"
        "metadata: {name: p}\nspec:\n  deviceClassNames: [gpu.example.com]\n"
        f"  validations:\n  - expression: {json.dumps(EMPTY_NEEDLE)}\n    message: m\n"
    )
    (policy,) = parse_policies(text, "p.yaml").class_policies
    (validation,) = policy.validations
    assert validation.program is not None
    assert validation.program.evaluate(OBJECT).value is expected


@pytest.mark.usefixtures("target")
def test_a_named_minor_wins_over_the_target() -> None:
    use_kube_version("1.35")
    program, _ = compile_cel(EMPTY_NEEDLE, VALIDATION_VARIABLES, minor="1.37")
    assert program is not None and program.evaluate(OBJECT).value is True
