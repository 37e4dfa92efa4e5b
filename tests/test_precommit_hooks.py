"""`.pre-commit-hooks.yaml`: each hook names a real `dragate` command and options it takes."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import click
import pytest
import yaml

from webhook.cli import main

REPO = Path(__file__).resolve().parent.parent
HOOKS: list[dict[str, Any]] = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
EXPECTED = {
    "dragate-lint": ["dragate", "lint"],
    "dragate-test": ["dragate", "test"],
    "dragate-migrate": ["dragate", "migrate", "--check"],
}
REQUIRED = {"id", "name", "entry", "language"}


def test_the_hooks_are_the_ones_documented() -> None:
    assert {hook["id"]: shlex.split(hook["entry"]) for hook in HOOKS} == EXPECTED


@pytest.mark.parametrize("hook", HOOKS, ids=[h["id"] for h in HOOKS])
def test_each_hook_runs_a_command_that_exists_with_options_it_takes(hook: dict[str, Any]) -> None:
    assert set(hook) >= REQUIRED
    assert hook["language"] == "python"  # installed from this repository's pyproject.toml
    program, name, *flags = shlex.split(hook["entry"])
    assert program in _scripts()
    command = main.get_command(click.Context(main), name)
    assert command is not None, f"dragate has no command {name!r}"
    taken = {opt for param in command.params for opt in param.opts}
    assert set(flags) <= taken
    assert all(not arg.startswith("-") or arg in taken for arg in hook.get("args", []))
    assert hook["pass_filenames"] is False  # a directory is walked; named files are refused
    assert re.compile(hook["files"]).search("deploy/claim.yaml")


def _scripts() -> set[str]:
    text = (REPO / "pyproject.toml").read_text()
    scripts = text.split("[project.scripts]", 1)[1].split("\n[", 1)[0]
    return {line.split("=")[0].strip() for line in scripts.splitlines() if "=" in line}
