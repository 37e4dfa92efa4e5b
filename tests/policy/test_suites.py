"""PolicyTestSuite documents: every field read, every mistake reported with its line, at once."""

from __future__ import annotations

import re
from pathlib import Path
from textwrap import dedent
from typing import Any

import pytest

from webhook.files.yamlio import parse_documents
from webhook.policy.schema import PolicyError
from webhook.policy.suites import (
    Case,
    Expect,
    is_suite,
    load_suites,
    lookup,
    suite_problems,
)
from webhook.types import API_VERSION, Operation, Source

HEAD = "apiVersion: dragate.io/v1alpha1\nkind: PolicyTestSuite\nmetadata: {name: s}\n"
POD = "{apiVersion: v1, kind: Pod, metadata: {name: p}}"


def write(tmp_path: Path, text: str, name: str = "tests/s.yaml") -> Path:
    file = tmp_path / name
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(text)
    return file


def problems(text: str) -> list[str]:
    """The problems of one suite text, as the user sees them, without the file name."""
    docs = parse_documents(dedent(text), "s.yaml")
    return [str(p).removeprefix("s.yaml") for p in suite_problems(docs)]


def test_every_field_is_read(tmp_path: Path) -> None:
    file = write(
        tmp_path,
        HEAD
        + dedent(f"""\
        spec:
          policies: ..
          state: [{{apiVersion: v1, kind: Namespace, metadata: {{name: a}}}}]
          cases:
          - name: everything
            object: {POD}
            state: [{{apiVersion: v1, kind: Namespace, metadata: {{name: b}}}}]
            operation: UPDATE
            namespace: team-a
            expect:
              allowed: true
              message: "quota \\\\d+"
              warnings: [mixed]
              patched:
                spec.containers[0].name: x
                metadata.labels: null
          - object: {POD}
            expect: {{allowed: false}}
        """),
        "policies/tests/s.yaml",
    )
    (suite,) = load_suites([str(file)])
    assert (suite.name, suite.source) == ("s", Source(str(file), 1))
    assert suite.policies_dir == tmp_path / "policies"
    assert [s["metadata"]["name"] for s in suite.state] == ["a"]
    first, second = suite.cases
    assert first == Case(
        name="everything",
        object={"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}},
        state=({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "b"}},),
        operation=Operation.UPDATE,
        namespace="team-a",
        expect=Expect(
            True,
            re.compile(r"quota \d+"),
            (re.compile("mixed"),),
            {"spec.containers[0].name": "x", "metadata.labels": None},
        ),
        source=Source(str(file), 8),
    )
    assert (second.name, second.operation, second.namespace) == ("case 1", Operation.CREATE, "")
    assert second.expect == Expect(False, None, (), {})


@pytest.mark.parametrize(
    ("location", "policies", "expected"),
    [
        ("p/tests/s.yaml", None, "p"),
        ("p/s.yaml", None, "p"),
        ("p/a/b/s.yaml", "../..", "p"),
        ("p/tests/s.yaml", "../../q", "q"),
        ("p/a/b/s.yaml", None, "p"),
        ("p/a/tests/s.yaml", None, "p"),
    ],
    ids=["above-tests", "same-folder", "named", "named-elsewhere", "nearest-above", "tests-above"],
)
def test_the_policy_directory(
    tmp_path: Path, location: str, policies: str | None, expected: str
) -> None:
    (tmp_path / "q").mkdir()
    write(
        tmp_path, f"apiVersion: {API_VERSION}\nkind: Settings\nmetadata: {{name: s}}\n", "p/s0.yaml"
    )
    field = f"  policies: {policies}\n" if policies else ""
    text = f"{HEAD}spec:\n{field}  cases:\n  - {{object: {POD}, expect: {{allowed: true}}}}\n"
    (suite,) = load_suites([str(write(tmp_path, text, location))])
    assert suite.policies_dir == tmp_path / expected


WRONG = [
    (
        "unknown-top",
        "specs: {}",
        ["1: spec: required field is missing", '4: specs: unknown field (did you mean "spec"?)'],
    ),
    (
        "unknown-spec",
        "spec: {cases: [], polices: x}",
        ['4: spec.polices: unknown field (did you mean "policies"?)'],
    ),
    (
        "missing-dir",
        "spec: {policies: nowhere, cases: [{object: {kind: Pod}, expect: {}}]}",
        [
            "4: spec.policies: no policy directory {here}/nowhere",
            "4: spec.cases[0].object.apiVersion: required field is missing",
            "4: spec.cases[0].expect: states nothing to check; give allowed, message, warnings, "
            "audit or patched",
        ],
    ),
    (
        "only-empty-expectations",
        f"spec: {{cases: [{{object: {POD}, expect: {{warnings: [], patched: {{}}}}}}]}}",
        [
            "4: spec.cases[0].expect: states nothing to check; give allowed, message, warnings, "
            "audit or patched"
        ],
    ),
    (
        "object-not-a-mapping",
        "spec: {cases: [{object: [], expect: {allowed: true}}]}",
        [
            "4: spec.cases[0].object: expected a Kubernetes object (a mapping with apiVersion and "
            "kind), got a list"
        ],
    ),
    (
        "state-not-a-list",
        f"spec: {{state: {POD}, cases: [{{object: {POD}, expect: {{}}}}]}}",
        [
            "4: spec.state: expected a list of Kubernetes objects, got a mapping",
            "4: spec.cases[0].expect: states nothing to check; give allowed, message, warnings, "
            "audit or patched",
        ],
    ),
    (
        "bad-warning",
        f"spec: {{cases: [{{object: {POD}, expect: {{warnings: ['[']}}}}]}}",
        [
            "4: spec.cases[0].expect.warnings[0]: not a valid regular expression: unterminated "
            "character set at position 0"
        ],
    ),
    (
        "bad-patched-path",
        f"spec: {{cases: [{{object: {POD}, expect: {{patched: {{'a[x]': 1}}}}}}]}}",
        ['4: spec.cases[0].expect.patched["a[x]"]: expected a field path like spec.items[0].name'],
    ),
    (
        "repeated-name",
        f"spec:\n  cases:\n  - {{name: a, object: {POD}, expect: {{}}}}\n"
        f"  - {{name: a, object: {POD}, expect: {{allowed: true}}}}",
        [
            "6: spec.cases[0].expect: states nothing to check; give allowed, message, warnings, "
            "audit or patched",
            '7: spec.cases[1].name: "a" is listed twice (first at spec.cases[0].name, line 6)',
        ],
    ),
]


@pytest.mark.parametrize(("body", "expected"), [w[1:] for w in WRONG], ids=[w[0] for w in WRONG])
def test_every_mistake_is_reported_with_its_line(
    body: str, expected: list[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    found = sorted(problems(HEAD + body), key=lambda p: int(p.split(":")[1]))
    assert found == [f":{e.format(here=tmp_path)}" for e in expected]


def test_metadata_is_read_as_for_policies() -> None:
    assert problems(HEAD.replace("name: s", "nam: s") + "spec: {cases: []}") == [
        ':3: metadata.nam: unknown field (did you mean "name"?)',
        ":3: metadata.name: required field is missing",
        ":4: spec.cases: a suite needs at least one case",
    ]


def test_a_load_lists_the_problems_of_every_file_and_keeps_going_past_bad_yaml(
    tmp_path: Path,
) -> None:
    write(tmp_path, "a: [1\n", "tests/a.yaml")
    write(tmp_path, f"{HEAD}spec: {{casess: []}}\n", "tests/b.yaml")
    with pytest.raises(PolicyError) as caught:
        load_suites([str(tmp_path)])
    assert [(Path(p.source.file).name, p.source.line) for p in caught.value.problems] == [
        ("a.yaml", 2),
        ("b.yaml", 4),
        ("b.yaml", 4),
    ]


@pytest.mark.parametrize(
    ("data", "near", "expected"),
    [
        ({"kind": "PolicyTestSuite"}, False, True),
        ({"kind": "PolicyTestSuit"}, False, False),
        ({"kind": "PolicyTestSuit"}, True, True),
        ({"kind": "policytestsuite"}, True, True),
        ({"kind": "Tenant"}, True, False),
        ({"kind": ["PolicyTestSuite"]}, True, False),
        ("PolicyTestSuite", True, False),
    ],
    ids=["exact", "typo", "typo-near", "case-near", "policy-kind", "not-a-string", "scalar"],
)
def test_what_counts_as_a_suite(data: Any, near: bool, expected: bool) -> None:
    assert is_suite(data, near) is expected


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
