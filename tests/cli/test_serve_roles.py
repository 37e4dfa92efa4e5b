"""`dragate serve --role webhook|controller|all` and `--probe-port`: each role reaches the
config, a controller needs a cluster, makes no certificate and checks its probe port, and
`all` in a cluster starts a controller child with the same cluster, policies and identity."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from click.testing import CliRunner

from webhook.admission.config import Role, ServeConfig
from webhook.cli import main, patches_gevent, roles, serve


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[ServeConfig]:
    """Captures the config `serve` would run instead of starting it."""
    configs: list[ServeConfig] = []
    monkeypatch.setattr(serve, "run", configs.append)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.delenv("POD_NAMESPACE", raising=False)
    return configs


@pytest.fixture
def kubeconfig(tmp_path: Path) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text("apiVersion: v1\nkind: Config\n")
    return path


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize(
    ("flags", "role", "probe_port", "cluster"),
    [
        pytest.param([], Role.ALL, 8081, False, id="default-all-offline"),
        pytest.param(["--role", "webhook"], Role.WEBHOOK, 8081, False, id="webhook-offline"),
        pytest.param(["--role", "webhook", "--kubeconfig", "{kc}"], Role.WEBHOOK, 8081, True,
                     id="webhook-in-cluster"),
        pytest.param(["--role", "controller", "--kubeconfig", "{kc}", "--probe-port", "0"],
                     Role.CONTROLLER, 0, True, id="controller-any-probe-port"),
        pytest.param(["--role", "all", "--kubeconfig", "{kc}", "--probe-port", "{free}"],
                     Role.ALL, None, True, id="all-in-cluster"),
    ],
)  # fmt: skip
def test_the_role_and_probe_port_reach_the_config(
    started: list[ServeConfig],
    kubeconfig: Path,
    flags: list[str],
    *,
    role: Role,
    probe_port: int | None,
    cluster: bool,
) -> None:
    free = _free_port()
    args = [f.format(kc=kubeconfig, free=free) for f in flags]
    result = CliRunner().invoke(main, ["serve", *args])
    assert result.exit_code == 0, result.output
    config = started[0]
    assert config.role is role and (config.cluster is not None) is cluster
    assert config.probe_port == (free if probe_port is None else probe_port)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        pytest.param(["--role", "controller"], "--role controller needs a cluster",
                     id="controller-offline"),
        pytest.param(["--role", "controller", "--state", "{state}"],
                     "--role controller needs a cluster", id="controller-with-a-snapshot"),
        pytest.param(["--role", "scheduler"], "Invalid value for '--role'", id="unknown-role"),
        pytest.param(["--probe-port", "70000"], "Invalid value for '--probe-port'",
                     id="probe-port-out-of-range"),
    ],
)  # fmt: skip
def test_bad_role_flags_exit_2(
    started: list[ServeConfig], tmp_path: Path, flags: list[str], message: str
) -> None:
    state = tmp_path / "state.yaml"
    state.write_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n")
    result = CliRunner().invoke(main, ["serve", *[f.format(state=state) for f in flags]])
    assert result.exit_code == 2
    assert message in result.output
    assert started == []


def test_a_controller_makes_no_certificate(
    started: list[ServeConfig], kubeconfig: Path, tmp_path: Path
) -> None:
    args = ["serve", "--role", "controller", "--kubeconfig", str(kubeconfig), "--probe-port", "0"]
    assert CliRunner().invoke(main, args).exit_code == 0
    assert not (tmp_path / "state" / "dragate" / "certs").exists()
    assert not started[0].tls.cert.exists()


@pytest.mark.parametrize("role", ["controller", "all"])
def test_a_taken_probe_port_exits_2_in_a_cluster(
    started: list[ServeConfig], kubeconfig: Path, role: str
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        args = ["serve", "--role", role, "--kubeconfig", str(kubeconfig), "--probe-port", port]
        result = CliRunner().invoke(main, args)
    assert result.exit_code == 2
    assert f"cannot listen on 127.0.0.1:{port}" in result.output
    assert started == []


@pytest.mark.parametrize(
    ("role", "cluster", "ports"),
    [
        pytest.param(Role.ALL, False, [8443], id="all-offline-webhook-alone"),
        pytest.param(Role.ALL, True, [8443, 8081], id="all-in-cluster-both"),
        pytest.param(Role.WEBHOOK, True, [8443], id="webhook"),
        pytest.param(Role.CONTROLLER, True, [8081], id="controller"),
    ],
)
def test_each_role_listens_on_its_ports(
    started: list[ServeConfig], kubeconfig: Path, role: Role, cluster: bool, ports: list[int]
) -> None:
    flags = ["--kubeconfig", str(kubeconfig)] if cluster else []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(serve, "check_address_free", lambda *_: None)
        CliRunner().invoke(main, ["serve", "--role", role.value, *flags])
    assert roles.listened_ports(started[0]) == ports


def test_the_controller_child_serves_the_same_cluster_and_policies(
    started: list[ServeConfig], kubeconfig: Path, tmp_path: Path
) -> None:
    """`all` in a cluster: the child's command line, parsed again, is the same controller."""
    policies = tmp_path / "tenants.yaml"
    policies.write_text(
        "apiVersion: dragate.io/v1alpha1\nkind: Tenant\nmetadata: {name: a}\n"
        "spec: {namespaces: [a], quota: [{deviceClassName: gpu, maxDevices: 1}]}\n"
    )
    args = ["serve", "--kubeconfig", str(kubeconfig), "--policies", str(policies),
            "--own-namespace", "gpu-system", "--own-service-account", "dragate",
            "--keep-rewrite-policy", "--no-policy-objects", "--kube-version", "1.36",
            "--probe-port", "0", "--reload-interval", "2.5", "--log-level", "debug"]  # fmt: skip
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    parent = started.pop()
    child_args = roles.controller_argv(parent)[3:]  # after `python -m webhook`
    assert child_args[:3] == ["serve", "--role", "controller"]
    assert CliRunner().invoke(main, child_args).exit_code == 0
    child = started.pop()
    assert child.role is Role.CONTROLLER
    assert (child.cluster, child.policy_dir, child.kube_version) == (
        parent.cluster, parent.policy_dir, parent.kube_version,
    )  # fmt: skip
    assert (child.host, child.probe_port, child.reload_interval, child.log_level) == (
        parent.host, parent.probe_port, parent.reload_interval, parent.log_level,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("args", "patched"),
    [
        pytest.param(["serve"], True, id="serve-all"),
        pytest.param(["serve", "--role", "webhook"], True, id="webhook"),
        pytest.param(["serve", "--kubeconfig", "k", "--role", "controller"], False,
                     id="controller"),
        pytest.param(["serve", "--role=controller"], False, id="controller-equals"),
        pytest.param(["check", "--role", "webhook"], False, id="not-serve"),
    ],
)  # fmt: skip
def test_only_a_process_that_serves_reviews_runs_on_gevent(args: list[str], patched: bool) -> None:
    assert patches_gevent(args) is patched
