"""docs/cli.md's CI snippets run as written: every command of the GitHub Actions job, the
GitLab CI job and the pre-commit hooks exits 0 in a small policy repository.

The repository holds the example policies and their test suite twice (`policies/`, which the
CI jobs name, and `my-policies/`, which the pre-commit snippet names), a cluster snapshot,
a deployment folder and the snippets themselves as files. Each command runs in bash with `-e`
(as a GitHub `run:` step does), with `dragate` the console command of this checkout. The
install line is not run: it needs the network (test_install_pins.py checks its pin). Steps
that are actions (`uses:`) are not commands. A pre-commit hook runs as pre-commit would run it
with `--all-files`: its `entry` from .pre-commit-hooks.yaml, the snippet's `args` or the
hook's own, then, when it takes filenames, every file matching `files` and not `exclude`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from docs_support import REPO, blocks, section

SECTION = section(
    (REPO / "docs" / "cli.md").read_text(), "CI: GitHub Actions, GitLab CI, pre-commit"
)
HOOKS = {h["id"]: h for h in yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())}
STATE = """apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Namespace
  metadata: {name: ml-research}
- apiVersion: resource.k8s.io/v1
  kind: DeviceClass
  metadata: {name: gpu.nvidia.com}
  spec:
    selectors:
    - cel: {expression: "device.driver == 'gpu.nvidia.com'"}
"""
CLAIM = """apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: train, namespace: ml-research}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.nvidia.com, count: 2}
"""
INSTALL = re.compile(r"^pip install 'dragate @ git\+https://")


def snippets() -> dict[str, Any]:
    """The section's YAML blocks, by the file their first line names."""
    found = [b.text for b in blocks(SECTION) if b.lang == "yaml"]
    return {text.splitlines()[0].removeprefix("# ").strip(): text for text in found}


def github_commands() -> list[str]:
    steps = yaml.safe_load(snippets()[".github/workflows/dragate.yml"])["jobs"]["dragate"]["steps"]
    return [s["run"] for s in steps if "run" in s]


def gitlab_commands() -> list[str]:
    return list(yaml.safe_load(snippets()[".gitlab-ci.yml"])["dragate"]["script"])


def without_install(commands: list[str]) -> list[str]:
    """The commands but the install line (the network is not here), which must be first."""
    assert INSTALL.match(commands[0]), commands[0]
    return commands[1:]


def precommit_hooks() -> list[dict[str, Any]]:
    config = yaml.safe_load(snippets()[".pre-commit-config.yaml"])
    (repo,) = config["repos"]
    assert repo["repo"] == "https://github.com/dragate/dragate"
    return list(repo["hooks"])


def precommit_command(hook: dict[str, Any], root: Path) -> list[str]:
    """The argv pre-commit runs for `hook` with `--all-files` in `root`."""
    defined = HOOKS[hook["id"]]
    argv = [*defined["entry"].split(), *hook.get("args", defined.get("args", []))]
    if not defined.get("pass_filenames", True):
        return argv
    files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    wanted = re.compile(hook.get("files", defined.get("files", "")))
    unwanted = re.compile(hook["exclude"]) if "exclude" in hook else None
    return argv + [f for f in files if wanted.search(f) and not (unwanted and unwanted.search(f))]


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(REPO / "policies", root / "policies")
    shutil.copytree(REPO / "policies", root / "my-policies")
    (root / "cluster-state.yaml").write_text(STATE)
    (root / "deploy").mkdir()
    (root / "deploy" / "train.yaml").write_text(CLAIM)
    for name, text in snippets().items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """PATH with a `dragate` console script running this checkout's `webhook.cli:entry`."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "dragate"
    script.write_text(
        f"#!{sys.executable}\nimport sys\nfrom webhook.cli import entry\nsys.exit(entry())\n"
    )
    script.chmod(0o755)
    return {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(REPO),
    }


def run(
    command: str | list[str], root: Path, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """A snippet's shell line in bash -e (a GitHub `run:` step's shell), or an argv as is."""
    argv = ["bash", "-e", "-o", "pipefail", "-c", command] if isinstance(command, str) else command
    return subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True, check=False)


def test_the_console_script_is_this_checkouts(repository: Path, env: dict[str, str]) -> None:
    found = run("command -v dragate && python3 -c 'import webhook; print(webhook.__file__)'",
                repository, env)  # fmt: skip
    assert found.stdout.splitlines()[1].startswith(str(REPO / "webhook")), found.stdout


@pytest.mark.parametrize(
    "commands", [github_commands(), gitlab_commands()], ids=["github-actions", "gitlab-ci"]
)
def test_each_ci_command_exits_0(
    repository: Path, env: dict[str, str], commands: list[str]
) -> None:
    for command in without_install(commands):
        done = run(command, repository, env)
        assert done.returncode == 0, f"{command}: exit {done.returncode}\n{done.stderr}"
    checked = (repository / "check.xml").read_text()
    assert '<testsuite name="dragate check" tests="1" failures="0">' in checked


def test_the_sarif_upload_gets_a_sarif_log(repository: Path, env: dict[str, str]) -> None:
    (lint,) = [c for c in github_commands() if "-o sarif" in c]
    assert run(lint, repository, env).returncode == 0
    log = json.loads((repository / "dragate.sarif").read_text())
    assert log["version"] == "2.1.0" and log["runs"][0]["tool"]["driver"]["name"] == "dragate"


@pytest.mark.parametrize("hook", precommit_hooks(), ids=[h["id"] for h in precommit_hooks()])
def test_each_precommit_hook_exits_0(
    repository: Path, env: dict[str, str], hook: dict[str, Any]
) -> None:
    argv = precommit_command(hook, repository)
    done = run(argv, repository, env)
    assert done.returncode == 0, f"{argv}: exit {done.returncode}\n{done.stderr}"


def test_the_gates_can_fail(repository: Path, env: dict[str, str]) -> None:
    """A legacy request in deploy/ fails the migrate step of both jobs and its hook."""
    legacy = "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ml-research}\n"
    legacy += (
        "spec:\n  containers:\n  - {name: c, image: i, resources: {limits: {nvidia.com/gpu: 1}}}\n"
    )
    (repository / "deploy" / "legacy.yaml").write_text(legacy)
    for command in [c for c in github_commands() + gitlab_commands() if "migrate" in c]:
        assert run(command, repository, env).returncode == 1, command
    (hook,) = [h for h in precommit_hooks() if h["id"] == "dragate-migrate"]
    argv = precommit_command(hook, repository)
    assert run(argv, repository, env).returncode == 1
