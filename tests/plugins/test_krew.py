"""plugins/krew/dragate.yaml is a krew Plugin manifest krew accepts, for the command the
package installs: its fields, its name against the console script, and its sha256 against
the archive of the launcher kept in git."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import tomllib
import zipfile
from io import BytesIO
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
KREW = REPO / "plugins" / "krew"
MANIFEST: dict[str, Any] = yaml.safe_load((KREW / "dragate.yaml").read_text())
SCRIPTS = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]


def archive_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("krew_archive", KREW / "archive.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_manifest_has_every_field_krew_requires() -> None:
    assert MANIFEST["apiVersion"] == "krew.googlecontainertools.github.com/v1alpha2"
    assert MANIFEST["kind"] == "Plugin"
    spec = MANIFEST["spec"]
    assert re.fullmatch(r"v\d+\.\d+\.\d+", spec["version"])
    assert spec["homepage"].startswith("https://")
    assert spec["shortDescription"] and len(spec["shortDescription"]) <= 50
    assert spec["description"].strip()
    for platform in spec["platforms"]:
        assert platform["selector"]["matchExpressions"]
        assert platform["uri"].startswith("https://") and platform["uri"].endswith(".zip")
        assert spec["version"] in platform["uri"]
        assert re.fullmatch(r"[0-9a-f]{64}", platform["sha256"])
        assert platform["files"] and platform["bin"]


def test_the_command_is_the_console_script_the_package_installs() -> None:
    """krew's `dragate` and pip's `kubectl-dragate` are the same `kubectl dragate`."""
    name = MANIFEST["metadata"]["name"]
    assert f"kubectl-{name}" in SCRIPTS
    assert SCRIPTS[f"kubectl-{name}"] == "webhook.cli.kubectlplugin:entry"
    assert {p["bin"] for p in MANIFEST["spec"]["platforms"]} == {f"kubectl-{name}"}
    assert spec_version() == MANIFEST["spec"]["version"].removeprefix("v")


def spec_version() -> str:
    return str(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"])


def test_the_sha256_is_that_of_the_launcher_archive() -> None:
    module = archive_module()
    assert {p["sha256"] for p in MANIFEST["spec"]["platforms"]} == {module.sha256()}
    with zipfile.ZipFile(BytesIO(module.archive())) as zipped:
        (member,) = zipped.infolist()
        assert member.filename == MANIFEST["spec"]["platforms"][0]["bin"]
        assert member.external_attr >> 16 & 0o111, "the launcher must be executable"


def test_the_launcher_runs_the_plugin(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}  # the python3 tests run with, on PATH
    done = subprocess.run([str(KREW / "kubectl-dragate"), "--help"], capture_output=True,
                          text=True, env=env, cwd=tmp_path, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "usage" in done.stdout and "why" in done.stdout
