"""`.pre-commit-hooks.yaml`: each hook names a real `dragate` command and options it takes."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import click
import pytest
import yaml
from click.testing import CliRunner
from repo_tree import FOREIGN, write

from webhook.cli import main

REPO = Path(__file__).resolve().parent.parent
HOOKS: list[dict[str, Any]] = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
EXPECTED = {
    "dragate-lint": ["dragate", "lint", "--skip-foreign"],
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
    assert hook["pass_filenames"] is (hook["id"] == "dragate-lint")  # the others walk a folder
    assert re.compile(hook["files"]).search("deploy/claim.yaml")


def _scripts() -> set[str]:
    text = (REPO / "pyproject.toml").read_text()
    scripts = text.split("[project.scripts]", 1)[1].split("\n[", 1)[0]
    return {line.split("=")[0].strip() for line in scripts.splitlines() if "=" in line}


TENANT = """\
apiVersion: dragate.io/v1alpha1
kind: Tenant
metadata:
  name: ml
spec:
  namespaces: [ml]
"""


@pytest.mark.parametrize(
    ("changed", "code"),
    [
        (["clusters/east/policies/tenants.yaml", *FOREIGN], 0),
        (["clusters/west/policies/tenants.yaml", "clusters/west/policies/more.yaml"], 1),
        (["charts/gpu/values.yaml", "clusters/west/policies/tenants.yaml"], 1),
    ],
    ids=["a-cluster-and-foreign-files", "a-duplicate", "its-set-from-disk"],
)
def test_the_lint_hook_lints_the_changed_files_of_a_gitops_repository(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, changed: list[str], code: int
) -> None:
    (hook,) = [h for h in HOOKS if h["id"] == "dragate-lint"]
    policies = {f"clusters/{c}/policies/tenants.yaml": TENANT for c in ("east", "west")}
    write(tmp_path, {**FOREIGN, **policies, "clusters/west/policies/more.yaml": TENANT})
    monkeypatch.chdir(tmp_path)
    args = [*shlex.split(hook["entry"])[1:], *hook.get("args", []), *changed]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == code, result.output
