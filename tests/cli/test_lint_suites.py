"""`dragate lint` reads PolicyTestSuite documents as strictly as `dragate test` does."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from webhook.cli import main

REPO = Path(__file__).resolve().parents[2]
HEADER = "apiVersion: dragate.io/v1alpha1\nkind: PolicyTestSuite\nmetadata: {name: s}\n"
CASE = "  - name: c\n    object: {apiVersion: v1, kind: Pod, metadata: {name: p}}\n"


def lint(*args: str, stdin: str | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["lint", *args], input=stdin)
    return result.exit_code, result.output


BAD_SUITES = [
    (
        "cases-typo",
        f"{HEADER}spec:\n  casess:\n{CASE}    expect: {{allowed: true}}\n",
        's.yaml:5: error policy: spec.casess: unknown field (did you mean "cases"?)',
    ),
    (
        "no-expect",
        f"{HEADER}spec:\n  cases:\n{CASE}",
        "s.yaml:6: error policy: spec.cases[0].expect: required field is missing",
    ),
    (
        "message-typo",
        f"{HEADER}spec:\n  cases:\n{CASE}    expect: {{mesage: x}}\n",
        "s.yaml:8: error policy: spec.cases[0].expect.mesage: unknown field "
        '(did you mean "message"?)',
    ),
    (
        "bad-regex",
        f"{HEADER}spec:\n  cases:\n{CASE}    expect: {{message: '('}}\n",
        "s.yaml:8: error policy: spec.cases[0].expect.message: not a valid regular expression: "
        "missing ), unterminated subpattern at position 0",
    ),
    (
        "no-cases",
        f"{HEADER}spec: {{cases: []}}\n",
        "s.yaml:4: error policy: spec.cases: a suite needs at least one case",
    ),
    (
        "wrong-apiversion",
        "apiVersion: v1\nkind: PolicyTestSuite\nmetadata: {name: s}\nspec: {}\n",
        's.yaml:1: error policy: apiVersion: expected dragate.io/v1alpha1, got "v1"',
    ),
]


@pytest.mark.parametrize(
    ("text", "finding"), [b[1:] for b in BAD_SUITES], ids=[b[0] for b in BAD_SUITES]
)
def test_a_directory_with_a_bad_suite_reports_it_at_its_line(
    tmp_path: Path, text: str, finding: str
) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "s.yaml").write_text(text)
    code, out = lint(str(tmp_path))
    assert code == 1, out
    assert f"{tmp_path / 'tests' / finding}" in out.splitlines()


def test_a_suite_on_stdin_is_read_too() -> None:
    code, out = lint("-", stdin=HEADER + "spec:\n  casess: []\n")
    assert code == 1 and "<stdin>:5: error policy: spec.casess: unknown field" in out


def test_the_repository_suites_have_no_policy_findings() -> None:
    code, out = lint(str(REPO / "policies"))
    assert code == 0 and " error " not in out, out


def test_a_misspelt_suite_kind_gets_the_did_you_mean_of_test(tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text(HEADER.replace("Suite", "Suit") + "spec: {}\n")
    code, out = lint(str(tmp_path / "s.yaml"))
    assert code == 1
    assert out.splitlines()[0].endswith(
        's.yaml:2: error policy: kind: expected PolicyTestSuite, got "PolicyTestSuit" '
        '(did you mean "PolicyTestSuite"?)'
    )
    assert "expected one of Tenant" not in out
