"""`--kube-version`: the Kubernetes minor rules are typed for, on every command that reads
policies; an unsupported one is a usage error (exit 2) naming the supported minors."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from webhook.admission.config import ServeConfig
from webhook.cli import exits, main, serve
from webhook.policy.target import kube_version

COMMANDS = {
    "check": ["check", "claim.yaml"],
    "lint": ["lint", "claim.yaml"],
    "test": ["test", "suite.yaml"],
    "migrate": ["migrate", "claim.yaml"],
    "serve": ["serve"],
}
UNSUPPORTED = {"too-old": "1.34", "too-new": "1.38", "garbage": "latest"}


@pytest.mark.parametrize("command", COMMANDS.values(), ids=COMMANDS)
@pytest.mark.parametrize("version", UNSUPPORTED.values(), ids=UNSUPPORTED)
def test_an_unsupported_version_is_a_usage_error_naming_the_supported_ones(
    command: list[str], version: str
) -> None:
    result = CliRunner().invoke(main, [command[0], "--kube-version", version, *command[1:]])
    assert result.exit_code == exits.BAD_INPUT
    assert "supported: 1.35, 1.36, 1.37" in result.output
    assert f"Kubernetes {version} is not supported" in result.output


POLICY = """\
apiVersion: dragate.io/v1alpha1
kind: DeviceClassPolicy
metadata: {name: groups}
spec:
  deviceClassNames: [gpu.example.com]
  validations:
  - expression: "object.kind != 'Pod' || has(object.spec.schedulingGroup)"
"""
CLAIM = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: c, namespace: default}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.example.com}
"""
TARGETS = {
    # id: (args, target minor, exit code, text in the output)
    "default-is-newest": ([], "1.37", exits.OK, ""),
    "1-37": (["--kube-version", "1.37"], "1.37", exits.OK, ""),
    "1-36-with-patch": (["--kube-version", "v1.36.3"], "1.36", exits.OK, ""),
    "1-35-lacks-the-field": (
        ["--kube-version", "1.35"],
        "1.35",
        exits.BAD_INPUT,
        "field spec.schedulingGroup needs Kubernetes 1.36 (target 1.35)",
    ),
}


@pytest.mark.parametrize(("args", "minor", "code", "text"), TARGETS.values(), ids=TARGETS)
def test_check_types_rules_for_the_target_minor(
    tmp_path: Path, args: list[str], minor: str, code: int, text: str
) -> None:
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "p.yaml").write_text(POLICY)
    (tmp_path / "claim.yaml").write_text(CLAIM)
    policies = ["--policies", str(tmp_path / "policies")]
    result = CliRunner().invoke(main, ["check", *args, *policies, str(tmp_path / "claim.yaml")])
    assert result.exit_code == code, result.output
    assert text in result.output
    assert kube_version() == minor


@pytest.mark.parametrize(("args", "minor", "code", "text"), TARGETS.values(), ids=TARGETS)
def test_lint_names_the_minor_a_rule_field_needs(
    tmp_path: Path, args: list[str], minor: str, code: int, text: str
) -> None:
    (tmp_path / "p.yaml").write_text(POLICY)
    result = CliRunner().invoke(main, ["lint", *args, str(tmp_path / "p.yaml")])
    assert text in result.output
    assert (result.exit_code == exits.OK) == (code == exits.OK), result.output
    assert kube_version() == minor


def _live(version: tuple[str, str] | Exception) -> Callable[[], tuple[str, str]]:
    def live() -> tuple[str, str]:
        if isinstance(version, Exception):
            raise version
        return version

    return live


SERVED = {
    # id: (--kube-version, cluster?, the live /version, target, warning)
    "offline-default": (None, False, ("1", "35"), "1.37", None),
    "offline-given": ("1.36", False, ("1", "35"), "1.36", None),
    "cluster-live": (None, True, ("1", "35"), "1.35", None),
    "cluster-live-plus": (None, True, ("1", "36+"), "1.36", None),
    "cluster-flag-wins": ("1.37", True, ("1", "35"), "1.37", None),
    "cluster-too-old": (None, True, ("1", "33"), "1.35", "Kubernetes 1.33 is not supported"),
    "cluster-too-new": (None, True, ("1", "40"), "1.37", "Kubernetes 1.40 is not supported"),
    "cluster-unreachable": (
        None,
        True,
        OSError("connection refused"),
        "1.37",
        "the API server's version is unknown",
    ),
}


@pytest.mark.parametrize(
    ("flag", "cluster", "live", "target", "warning"), SERVED.values(), ids=SERVED
)
def test_serve_targets_the_flag_else_the_live_api_server(
    flag: str | None,
    cluster: bool,
    live: tuple[str, str] | Exception,
    target: str,
    warning: str | None,
) -> None:
    warned: list[str] = []
    chosen = serve.serving_kube_version(flag, cluster, _live(live), warned.append)
    assert chosen == target
    if warning is None:
        assert not warned
    else:
        assert len(warned) == 1 and warning in warned[0]


def test_serve_reads_kube_version_into_its_config(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    configs: list[ServeConfig] = []
    monkeypatch.setattr(serve, "run", configs.append)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    result = CliRunner().invoke(main, ["serve", "--kube-version", "1.35"])
    assert result.exit_code == exits.OK, result.output
    assert configs[0].kube_version == "1.35"
    assert kube_version() == "1.35"
