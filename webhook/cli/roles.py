"""`dragate serve --role`: which ports a role listens on, what it says at start, and the
controller child that `--role all` starts beside the webhook in a cluster.

The child is `dragate serve --role controller` with the same cluster, policies and identity,
a plain Python process (no gevent: the webhook's worker never runs a cluster-wide walk). It
is asked to stop (SIGTERM) when the gunicorn master exits, and by the kernel when the master
dies without exiting (`PR_SET_PDEATHSIG` on Linux).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import signal
import subprocess
import sys

from webhook.admission.config import Role, ServeConfig

PR_SET_PDEATHSIG = 1
CHILD_STOP_SECONDS = 10.0


def listened_ports(config: ServeConfig) -> list[int]:
    """The HTTPS port of the webhook, the probe port of a controller (0 picks one: no check)."""
    webhook = [] if config.role is Role.CONTROLLER else [config.port]
    controls = config.role is Role.CONTROLLER or (
        config.role is Role.ALL and config.cluster is not None
    )
    return webhook + ([config.probe_port] if controls and config.probe_port else [])


def serving_line(config: ServeConfig, policies: str) -> str:
    """What `dragate serve` says once its inputs are checked."""
    probes = f"http://{config.host}:{config.probe_port}"
    if config.role is Role.CONTROLLER:
        return f"controller for the cluster (policies {policies}), probes on {probes}"
    line = (
        f"serving https://{config.host}:{config.port} "
        f"(policies {policies}, certificate {config.tls.cert})"
    )
    if config.role is Role.ALL and config.cluster is not None:
        line += f", with a controller child (probes on {probes})"
    return line


def controller_argv(config: ServeConfig) -> list[str]:
    """`dragate serve --role controller` for the same cluster, policies and identity."""
    cluster = config.cluster
    if cluster is None:
        raise ValueError("a controller needs a cluster")
    argv = [sys.executable, "-m", "webhook", "serve", "--role", "controller"]
    argv += ["--in-cluster"] if cluster.in_cluster else ["--kubeconfig", str(cluster.kubeconfig)]
    if config.policy_dir is not None:
        argv += ["--policies", str(config.policy_dir)]
    own = cluster.own
    argv += [
        "--host", config.host, "--probe-port", str(config.probe_port),
        "--own-namespace", own.namespace, "--own-service-account", own.service_account,
        "--reload-interval", str(config.reload_interval), "--log-level", config.log_level,
        "--kube-version", config.kube_version,
        "--policy-objects" if cluster.policy_objects else "--no-policy-objects",
    ]  # fmt: skip
    return argv + (["--keep-rewrite-policy"] if cluster.keep_rewrite_policy else [])


def start_controller_child(config: ServeConfig) -> subprocess.Popen[bytes]:
    """Start the controller beside this (master) process, stopped when it exits."""
    argv = controller_argv(config)
    child = subprocess.Popen(argv, preexec_fn=_die_with_parent)  # noqa: PLW1509  (no thread yet)
    master = os.getpid()

    def stop() -> None:
        if os.getpid() != master:  # a forked gunicorn worker exiting: not the child's owner
            return
        child.send_signal(signal.SIGTERM)
        try:
            child.wait(CHILD_STOP_SECONDS)
        except subprocess.TimeoutExpired:
            child.kill()

    atexit.register(stop)
    return child


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the parent dies (Linux; elsewhere nothing)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
