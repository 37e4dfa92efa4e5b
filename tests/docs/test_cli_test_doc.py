"""docs/cli.md's `dragate test` section is true: its suite passes, its transcripts are real.

The suite example is written beside README's first policy (`my-policies/`), each console
block is replayed after the edit its prose describes, and the output must be the lines shown.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner
from docs_support import REPO, blocks, section

from webhook.cli import main

SECTION = section((REPO / "docs" / "cli.md").read_text(), "`dragate test`")
README = (REPO / "README.md").read_text()
SUITE = "my-policies/tests/quota.yaml"
TENANT = "my-policies/team-a.yaml"
EDITS: list[tuple[str, dict[str, list[tuple[str, str]]]]] = [
    ("typos", {SUITE: [("allowed: false", "alowed: false"), ("message:", "mesage:")]}),
    ("quota-raised", {TENANT: [("maxDevices: 4 ", "maxDevices: 8 ")]}),
]
"""The edit before each console block of the section, in order, as its prose describes it."""


def named_files() -> dict[str, str]:
    """README's `my-policies/` files and the section's suite, by the name on their first line."""
    found = [b for b in blocks(README) + blocks(SECTION) if b.lang == "yaml"]
    return {
        b.text.splitlines()[0][2:].strip(): b.text
        for b in found
        if b.text.startswith("# my-policies/")
    }


def transcripts() -> list[tuple[str, str]]:
    """(command, output) of each console block of the section."""
    found = [b.text.removeprefix("$ ") for b in blocks(SECTION) if b.lang == "console"]
    return [(text.partition("\n")[0], text.partition("\n")[2]) for text in found]


def write_files(root: Path, edits: dict[str, list[tuple[str, str]]]) -> None:
    for name, original in named_files().items():
        text = original
        for old, new in edits.get(name, []):
            assert old in text, f"{name} no longer holds {old!r}"
            text = text.replace(old, new, 1)
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def test_the_suite_example_passes_against_readmes_first_policy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert {SUITE, TENANT} <= set(named_files())
    write_files(tmp_path, {})
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["test", "my-policies"])
    assert result.exit_code == 0, result.output
    assert result.output.endswith("\n2 passed, 0 failed\n")


@pytest.mark.parametrize(
    ("edits", "transcript"),
    list(zip([e for _, e in EDITS], transcripts(), strict=True)),
    ids=[name for name, _ in EDITS],
)
def test_the_transcripts_are_real(
    edits: dict[str, list[tuple[str, str]]],
    transcript: tuple[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    command, output = transcript
    write_files(tmp_path, edits)
    monkeypatch.chdir(tmp_path)
    program, *args = shlex.split(command)
    assert program == "dragate"
    assert CliRunner().invoke(main, args).output == output
