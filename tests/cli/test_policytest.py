"""`dragate test`: suites found beside policies, failures reported, exit codes 0/1/2."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from webhook.cli import main
from webhook.cli.policytest import lookup

REPO = Path(__file__).resolve().parents[2]
CLAIM = """
    object:
      apiVersion: resource.k8s.io/v1
      kind: ResourceClaim
      metadata: {name: c, namespace: ml-research}
      spec:
        devices:
          requests: [{name: gpu, exactly: {deviceClassName: gpu.nvidia.com, count: 9}}]
"""


def run(*paths: str) -> Result:
    return CliRunner().invoke(main, ["test", *paths], catch_exceptions=False)


def suite(tmp_path: Path, cases: str) -> Path:
    """A copy of the example policies with one suite of `cases` in its tests/ folder."""
    shutil.copytree(
        REPO / "policies", tmp_path / "policies", ignore=shutil.ignore_patterns("tests")
    )
    (tmp_path / "policies" / "tests").mkdir()
    header = "apiVersion: dragate.io/v1alpha1\nkind: PolicyTestSuite\nmetadata: {name: s}\n"
    (tmp_path / "policies" / "tests" / "s.yaml").write_text(f"{header}spec:\n  cases:\n{cases}")
    return tmp_path / "policies"


def test_the_repository_suites_pass() -> None:
    result = run(str(REPO / "policies"))
    assert result.exit_code == 0, result.output
    assert "0 failed" in result.output


@pytest.mark.parametrize(
    ("expect", "failure"),
    [
        ("{allowed: true}", "expected allowed=True, got False"),
        ("{allowed: false, message: 'nothing like this'}", "no reason matches /nothing like this/"),
        ("{warnings: ['never warned']}", "no warning matches /never warned/"),
        ("{audit: ['never audited']}", "no audited violation matches /never audited/"),
        ("{patched: {metadata.name: other}}", "metadata.name: expected 'other', got 'c'"),
    ],
    ids=["allowed", "message", "warning", "audit", "patched"],
)
def test_wrong_expectations_fail_with_a_reason(tmp_path: Path, expect: str, failure: str) -> None:
    policies = suite(tmp_path, f"  - name: wrong{CLAIM}    expect: {expect}\n")
    result = run(str(policies))
    assert result.exit_code == 1
    assert "FAIL  s: wrong" in result.output and failure in result.output


AUDITED = """
    object:
      apiVersion: resource.k8s.io/v1
      kind: ResourceClaim
      metadata: {name: c, namespace: gpu-operator}
      spec:
        devices:
          requests: [{name: gpu, exactly: {deviceClassName: gpu.nvidia.com, adminAccess: true}}]
    state:
    - apiVersion: v1
      kind: Namespace
      metadata: {name: gpu-operator, labels: {resource.kubernetes.io/admin-access: "true"}}
"""


def test_audited_violations_are_matched(tmp_path: Path) -> None:
    expect = "{allowed: true, audit: ['gpu-guardrails.*admin access to GPUs in use']}"
    result = run(str(suite(tmp_path, f"  - name: audited{AUDITED}    expect: {expect}\n")))
    assert result.exit_code == 0, result.output


def test_a_case_without_object_fails(tmp_path: Path) -> None:
    result = run(str(suite(tmp_path, "  - name: empty\n    expect: {allowed: true}\n")))
    assert result.exit_code == 1 and "case has no `object`" in result.output


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no PolicyTestSuite found"),
        ("a: [1\n", "not valid YAML"),
        ("apiVersion: v1\nkind: PolicyTestSuite\nmetadata: {name: x}\n", "needs apiVersion"),
    ],
    ids=["none", "broken-yaml", "wrong-apiversion"],
)
def test_errors_exit_two(tmp_path: Path, content: str | None, message: str) -> None:
    if content is not None:
        (tmp_path / "x.yaml").write_text(content)
    result = run(str(tmp_path))
    assert result.exit_code == 2 and message in result.output


DOC: dict[str, Any] = {"spec": {"items": [{"name": "a"}, {"name": "b", "n": None}]}}


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("spec.items[1].name", "b"),
        ("spec.items[5].name", None),
        ("spec.missing.deeper", None),
        ("spec.items[0]", {"name": "a"}),
    ],
    ids=["index", "out-of-range", "missing", "object"],
)
def test_lookup(path: str, expected: Any) -> None:
    assert lookup(DOC, path) == expected
