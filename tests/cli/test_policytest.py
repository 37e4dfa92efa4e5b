"""`dragate test`: suites read strictly, failures named at `file:line`, exit codes 0/1/2."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from webhook.cli import main

REPO = Path(__file__).resolve().parents[2]
HEADER = "apiVersion: dragate.io/v1alpha1\nkind: PolicyTestSuite\nmetadata: {name: s}\n"
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
    return suite_file(tmp_path, f"spec:\n  cases:\n{cases}").parent.parent


def suite_file(tmp_path: Path, body: str) -> Path:
    """`policies/tests/s.yaml` beside a copy of the example policies: HEADER (3 lines), `body`."""
    shutil.copytree(
        REPO / "policies", tmp_path / "policies", ignore=shutil.ignore_patterns("tests")
    )
    (tmp_path / "policies" / "tests").mkdir()
    (tmp_path / "policies" / "tests" / "s.yaml").write_text(HEADER + body)
    return tmp_path / "policies" / "tests" / "s.yaml"


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
def test_wrong_expectations_fail_at_the_case_line(
    tmp_path: Path, expect: str, failure: str
) -> None:
    policies = suite(tmp_path, f"  - name: wrong{CLAIM}    expect: {expect}\n")
    result = run(str(policies))
    assert result.exit_code == 1
    assert f"FAIL  {policies / 'tests' / 's.yaml'}:6: s: wrong\n" in result.output
    assert failure in result.output


def test_passing_cases_are_named_at_their_line(tmp_path: Path) -> None:
    second = f"  - name: fine{CLAIM}    expect: {{allowed: false}}\n"
    policies = suite(tmp_path, f"  - name: wrong{CLAIM}    expect: {{allowed: true}}\n{second}")
    result = run(str(policies))
    assert f"PASS  {policies / 'tests' / 's.yaml'}:15: s: fine\n" in result.output
    assert result.output.endswith("\n1 passed, 1 failed\n") and result.exit_code == 1


CASE = f"  - name: c{CLAIM}"
MALFORMED = [
    (
        "cases-typo",
        f"spec:\n  casess:\n{CASE}    expect: {{allowed: false}}\n",
        5,
        'spec.casess: unknown field (did you mean "cases"?)',
    ),
    ("cases-missing", "spec: {policies: ..}\n", 4, "spec.cases: required field is missing"),
    ("no-cases", "spec:\n  cases: []\n", 5, "spec.cases: a suite needs at least one case"),
    ("no-expect", f"spec:\n  cases:\n{CASE}", 6, "spec.cases[0].expect: required field is missing"),
    (
        "empty-expect",
        f"spec:\n  cases:\n{CASE}    expect: {{}}\n",
        14,
        "spec.cases[0].expect: states nothing to check",
    ),
    (
        "allowed-typo",
        f"spec:\n  cases:\n{CASE}    expect: {{alowed: false}}\n",
        14,
        'spec.cases[0].expect.alowed: unknown field (did you mean "allowed"?)',
    ),
    (
        "message-typo",
        f"spec:\n  cases:\n{CASE}    expect:\n      allowed: false\n      mesage: x\n",
        16,
        'spec.cases[0].expect.mesage: unknown field (did you mean "message"?)',
    ),
    (
        "bad-regex",
        f"spec:\n  cases:\n{CASE}    expect: {{message: 'limit (16'}}\n",
        14,
        "spec.cases[0].expect.message: not a valid regular expression: missing ), unterminated",
    ),
    (
        "case-typo",
        f"spec:\n  cases:\n{CASE}    expected: {{allowed: false}}\n",
        14,
        'spec.cases[0].expected: unknown field (did you mean "expect"?)',
    ),
    (
        "top-level-typo",
        f"specs:\n  cases:\n{CASE}    expect: {{allowed: false}}\n",
        4,
        'specs: unknown field (did you mean "spec"?)',
    ),
    (
        "no-object",
        "spec:\n  cases:\n  - name: c\n    expect: {allowed: true}\n",
        6,
        "spec.cases[0].object: required field is missing",
    ),
    (
        "operation-typo",
        f"spec:\n  cases:\n{CASE}    operation: UPDAET\n    expect: {{}}\n",
        14,
        'spec.cases[0].operation: expected one of CREATE, UPDATE, DELETE, CONNECT, got "UPDAET" '
        '(did you mean "UPDATE"?)',
    ),
    (
        "wrong-allowed",
        f"spec:\n  cases:\n{CASE}    expect: {{allowed: 'no'}}\n",
        14,
        'spec.cases[0].expect.allowed: expected true or false, got "no"',
    ),
]


@pytest.mark.parametrize(
    ("body", "line", "message"), [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED]
)
def test_a_malformed_suite_exits_2_naming_file_line_and_runs_nothing(
    tmp_path: Path, body: str, line: int, message: str
) -> None:
    file = suite_file(tmp_path, body)
    result = run(str(file.parent.parent))
    assert result.exit_code == 2, result.output
    assert f"{file}:{line}: {message}" in result.output
    assert "PASS" not in result.output and "FAIL" not in result.output


def test_every_problem_of_every_suite_is_listed(tmp_path: Path) -> None:
    file = suite_file(tmp_path, f"spec:\n  casess:\n{CASE}    expect: {{alowed: false}}\n")
    (file.parent / "t.yaml").write_text(HEADER + "spec:\n  cases: []\n")
    result = run(str(file.parent))
    assert result.exit_code == 2
    assert [line.strip().split(": ")[0] for line in result.output.splitlines()[1:]] == [
        f"{file}:4",
        f"{file}:5",
        f"{file.parent / 't.yaml'}:5",
    ]


def test_invalid_policies_exit_2_before_any_case_runs(tmp_path: Path) -> None:
    file = suite_file(tmp_path, f"spec:\n  cases:\n{CASE}    expect: {{allowed: false}}\n")
    (file.parent.parent / "broken.yaml").write_text(
        "apiVersion: dragate.io/v1alpha1\nkind: Tenant\nmetadata: {name: b}\nspec: {quota: 1}\n"
    )
    result = run(str(file))
    assert result.exit_code == 2 and "PASS" not in result.output
    assert f"{file.parent.parent / 'broken.yaml'}:4: spec.quota: expected a list" in result.output


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


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no PolicyTestSuite found"),
        ("a: [1\n", "not valid YAML"),
        (
            "apiVersion: v1\nkind: PolicyTestSuite\nmetadata: {name: x}\n",
            'apiVersion: expected dragate.io/v1alpha1, got "v1"',
        ),
        (
            HEADER.replace("Suite", "Suit") + "spec: {}\n",
            'kind: expected PolicyTestSuite, got "PolicyTestSuit" '
            '(did you mean "PolicyTestSuite"?)',
        ),
    ],
    ids=["none", "broken-yaml", "wrong-apiversion", "kind-typo"],
)
def test_errors_exit_two(tmp_path: Path, content: str | None, message: str) -> None:
    if content is not None:
        (tmp_path / "x.yaml").write_text(content)
    result = run(str(tmp_path))
    assert result.exit_code == 2 and message in result.output


LEGACY_JOB = """
    object:
      apiVersion: batch/v1
      kind: Job
      metadata: {name: train, namespace: ml-research}
      spec:
        parallelism: %d
        template:
          spec:
            containers:
            - name: c
              image: i
              resources: {limits: {nvidia.com/gpu: 2}}
"""
HELD = """
    state:
    - apiVersion: resource.k8s.io/v1
      kind: ResourceClaim
      metadata: {name: held, namespace: ml-research}
      spec:
        devices:
          requests: [{name: gpu, exactly: {deviceClassName: gpu.nvidia.com, count: 10}}]
"""


@pytest.mark.parametrize(
    ("pods", "state", "expect"),
    [
        (8, "", "{allowed: true}"),
        (9, "", "{allowed: false, message: 'gang ml-research/train needs 18 gpu.nvidia.com; "
         "tenant ml-research has 16 free'}"),
        (4, HELD, "{allowed: false, message: 'gang ml-research/train needs 8 gpu.nvidia.com; "
         "tenant ml-research has 6 free \\(held by claim:ml-research/held \\(10\\)\\)'}"),
    ],
    ids=["fits-whole", "larger-than-the-quota", "past-what-the-state-holds"],
)  # fmt: skip
def test_a_suite_asserts_a_gangs_verdict(
    tmp_path: Path, pods: int, state: str, expect: str
) -> None:
    case = f"  - name: gang{LEGACY_JOB % pods}{state}    expect: {expect}\n"
    result = run(str(suite(tmp_path, case)))
    assert result.exit_code == 0, result.output


DENIED = f"  - name: nine{CLAIM}    expect: {{allowed: false}}\n"


@pytest.mark.parametrize(
    "where", ["policies/s.yaml", "policies/suites/more/s.yaml"], ids=["beside", "below"]
)
def test_a_suite_outside_tests_is_judged_against_the_nearest_policies_above_it(
    tmp_path: Path, where: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    policies = suite(tmp_path, DENIED)
    (policies / "tests" / "s.yaml").rename(tmp_path / "s.yaml")
    (policies / "tests").rmdir()
    (tmp_path / where).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / "s.yaml").rename(tmp_path / where)
    monkeypatch.chdir(tmp_path)
    result = run(str(tmp_path / where))
    assert result.exit_code == 0, result.output
    assert f"SUITE {where}:1: s: policies from policies\n" in result.output
    assert f"PASS  {where}:6: s: nine\n" in result.output


def test_a_suite_with_no_policies_at_or_above_it_exits_2(tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text(f"{HEADER}spec:\n  cases:\n{DENIED}")
    result = run(str(tmp_path / "s.yaml"))
    assert result.exit_code == 2
    assert f"s.yaml:4: spec: no policy files in {tmp_path} or above it" in result.output


def test_output_names_the_policies_and_paths_relative_to_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    suite(tmp_path, DENIED)
    monkeypatch.chdir(tmp_path)
    result = run(str(tmp_path / "policies"))
    assert result.output.startswith(
        "SUITE policies/tests/s.yaml:1: s: policies from policies\n"
        "PASS  policies/tests/s.yaml:6: s: nine\n"
    )


@pytest.mark.parametrize(
    ("path", "message"),
    [
        (
            "spec.resourcess.claims[0].name",
            "ResourceClaim.spec has no field resourcess in Kubernetes 1.37",
        ),
        ("spec.devices.requests[0].exactly.count", None),
        ("metadata.annotations.x", None),
    ],
    ids=["typo", "real", "free-form-map"],
)
def test_a_patched_path_the_schema_cannot_hold_is_an_error(
    tmp_path: Path, path: str, message: str | None
) -> None:
    expect = f"{{allowed: false, patched: {{'{path}': 1}}}}"
    result = run(str(suite(tmp_path, f"  - name: c{CLAIM}    expect: {expect}\n")))
    if message is None:
        assert result.exit_code == 1, result.output  # the case runs, and its value differs
    else:
        assert result.exit_code == 2
        assert f'expect.patched["{path}"]: cannot exist: {message}\n' in result.output
