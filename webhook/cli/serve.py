"""`dragate serve`: the webhook over HTTPS, with nothing to set up on a fresh machine.

With no flags it serves the example policies shipped in the package, offline state and a
self-signed localhost certificate made on first start under the state directory, on
https://127.0.0.1:8443. Everything is checked in the master before the worker starts, so a
bad policy file or state file fails fast with exit code 2 instead of a worker boot loop.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import click

from webhook import certificates
from webhook.admission.config import (
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_PROBE_PORT,
    AdmissionOptions,
    Role,
    ServeConfig,
    TimeoutOutcome,
    TlsFiles,
    own_namespace_default,
)
from webhook.assembly import ClusterTarget, cluster_api, seed_ledger_file
from webhook.cli import exits
from webhook.cli.certs import BadInput, state_dir
from webhook.cli.inputs import KUBE_VERSION_HELP
from webhook.cli.roles import listened_ports, serving_line, start_controller_child
from webhook.files.yamlio import YamlError
from webhook.kube.snapshot import SnapshotState, load_state
from webhook.ledger.sqlite import LedgerFileError, LedgerUnavailable
from webhook.pipeline.scope import Identity
from webhook.policy.loading import PolicyError, default_policy_dir, load_policies
from webhook.policy.target import use_kube_version
from webhook.types import PolicySet
from webhook.types.kubeversions import (
    NEWEST,
    UnsupportedKubeVersion,
    nearest_supported,
    supported_minor,
)


def prepare_certs(cert_dir: Path | None, dns_names: Sequence[str]) -> certificates.CertDir:
    """A given directory holding tls.crt/tls.key is used as is (a mounted Secret); otherwise
    a dev CA and localhost certificate are made (or re-issued near expiry) there."""
    if cert_dir is not None and certificates.CertDir(cert_dir).has_serving_pair():
        return certificates.CertDir(cert_dir)
    return certificates.ensure_dev(cert_dir or state_dir() / "certs", dns_names)


def check_inputs(config: ServeConfig) -> None:
    """Load policies and state once in the master; raise click errors with exit code 2."""
    if config.cluster is not None and config.state_file is not None:
        raise BadInput("--state is for offline serving; with a cluster, facts come from the API")
    for port in listened_ports(config):
        try:
            check_address_free(config.host, port)
        except OSError as err:
            problem = err.strerror or err
            raise BadInput(f"cannot listen on {config.host}:{port}: {problem}") from None
    try:
        policies = load_policies([config.policy_dir]) if config.policy_dir else PolicySet()
        state = load_state(str(config.state_file)) if config.state_file else SnapshotState()
        if config.ledger_file is not None and config.cluster is None:
            seed_ledger_file(config.ledger_file, policies, state)
    except PolicyError as err:
        problems = "\n".join(f"  {p}" for p in err.problems)
        raise BadInput(f"invalid policies in {config.policy_dir}:\n{problems}") from None
    except YamlError as err:
        raise BadInput(f"invalid state file: {err}") from None
    except (LedgerFileError, LedgerUnavailable) as err:
        raise BadInput(f"ledger {config.ledger_file}: {err}") from None
    except OSError as err:  # no writable state directory (a read-only root filesystem)
        raise BadInput(
            f"ledger {config.ledger_file}: cannot create it ({err.strerror or err}); "
            "pass --ledger FILE on a writable volume, or set XDG_STATE_HOME"
        ) from None


def check_address_free(host: str, port: int) -> None:
    """Raise OSError when nothing could listen on host:port (taken, or no such address)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind((host, port))


def master_policies(config: ServeConfig) -> PolicySet | None:
    """The policy set loaded in the master, inherited by the worker through fork: what a
    worker booting while the files are broken or gone serves (stale) instead of failing to
    boot, which would make gunicorn stop the whole server. Best effort: `check_inputs` has
    already reported real problems, so None (the worker loads its own) whatever goes wrong."""
    try:
        if config.policy_dir is None:
            return None  # the cluster's policy objects alone: the worker reads them
        return load_policies([config.policy_dir])
    except Exception:
        return None


def serving_kube_version(
    flag: str | None,
    cluster: bool,
    live: Callable[[], tuple[str, str]],
    warn: Callable[[str], None],
) -> str:
    """The minor rules are typed for: `--kube-version`, else in a cluster the API server's own
    (`/version`; one outside the supported range is served as the nearest), else the newest."""
    if flag is not None or not cluster:
        return flag or NEWEST
    try:
        major, minor = live()
    except Exception as err:
        warn(f"the API server's version is unknown ({err}); typing rules for {NEWEST}")
        return NEWEST
    chosen = nearest_supported(major, minor)
    try:
        supported_minor(f"{major}.{minor.rstrip('+')}")
    except UnsupportedKubeVersion as err:
        warn(f"{err}; typing rules for the nearest, {chosen}")
    return chosen


def _warn(message: str) -> None:
    click.echo(f"dragate: warning: {message}", err=True)


def _check_kube_version(
    _ctx: click.Context, _param: click.Parameter, value: str | None
) -> str | None:
    try:
        return None if value is None else supported_minor(value)
    except UnsupportedKubeVersion as err:
        raise click.BadParameter(str(err)) from None


def run(config: ServeConfig) -> None:
    """Serve until SIGTERM/SIGINT; gunicorn exits the process (0 on a clean shutdown). The
    controller role is a plain process instead; `all` in a cluster starts one as a child."""
    if config.role is Role.CONTROLLER:
        from webhook.admission.controlprocess import run_controller  # noqa: PLC0415

        sys.exit(run_controller(config))
    from webhook.admission.server import DragateServer  # noqa: PLC0415  (serve only)

    if config.role is Role.ALL and config.cluster is not None:
        start_controller_child(config)
    server = DragateServer(config)
    server.policies = master_policies(config)
    server.run()


@click.command("serve")
@click.option(
    "--policies",
    "policy_dir",
    type=click.Path(path_type=Path, exists=True),
    help="Policy directory or file (default: the example policies; in a cluster, the "
    "dragate.io policy objects alone). In a cluster, files and objects are enforced together.",
)
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8443, show_default=True, type=click.IntRange(1, 65535))
@click.option(
    "--cert-dir",
    type=click.Path(path_type=Path, file_okay=False),
    help="tls.crt/tls.key to serve; made here if absent (default: state dir/certs).",
)
@click.option(
    "--state",
    "state_file",
    type=click.Path(path_type=Path, exists=True, dir_okay=False),
    help="Snapshot of cluster objects (Namespaces, claims, classes) to judge against.",
)
@click.option(
    "--ledger",
    "ledger_file",
    type=click.Path(path_type=Path, dir_okay=False),
    help="SQLite file holding quota reservations offline "
    "[default: $XDG_STATE_HOME/dragate/ledger.sqlite3].",
)
@click.option("--dns-name", "dns_names", multiple=True, help="Extra SAN for a generated cert.")
@click.option(
    "--max-connections",
    default=10240,
    show_default=True,
    type=click.IntRange(16, 1_000_000),
    help="Open connections served at once, idle ones included; more wait to be accepted.",
)
@click.option(
    "--max-body-bytes", default=DEFAULT_MAX_BODY_BYTES, show_default=True, type=click.IntRange(1024)
)
@click.option(
    "--client-ca",
    type=click.Path(path_type=Path, exists=True, dir_okay=False),
    help="Require client certificates signed by this CA (mTLS).",
)
@click.option(
    "--client-name",
    "client_names",
    multiple=True,
    help="With --client-ca: a client identity allowed to send reviews (a DNS name of its "
    "certificate, or its Common Name), e.g. the API server's client certificate name. "
    "Repeatable; without it, any certificate the CA signed is allowed.",
)
@click.option(
    "--on-timeout",
    type=click.Choice([t.value for t in TimeoutOutcome]),
    default=TimeoutOutcome.DENY.value,
    show_default=True,
    help="/validate answer when a review outlives the apiserver's ?timeout=.",
)
@click.option(
    "--own-namespace",
    default=own_namespace_default,
    show_default="$POD_NAMESPACE",
    help="Requests in this namespace pass unevaluated (no deadlock).",
)
@click.option(
    "--own-service-account",
    default=lambda: os.environ.get("POD_SERVICE_ACCOUNT", ""),
    show_default="$POD_SERVICE_ACCOUNT",
    help="This service account's requests pass (system:serviceaccount:NS:NAME or NAME).",
)
@click.option(
    "--reload-interval",
    default=1.0,
    show_default=True,
    type=click.FloatRange(0.05, 60),
    help="Seconds between checks of the policy files for changes.",
)
@click.option("--graceful-timeout", default=25, show_default=True, type=click.IntRange(1, 600))
@click.option(
    "--log-level",
    default="info",
    show_default=True,
    type=click.Choice(["debug", "info", "warning", "error"]),
)
@click.option(
    "--kubeconfig",
    type=click.Path(exists=True, dir_okay=False),
    help="Cluster mode: watch caches and the TenantUsage ledger through this kubeconfig.",
)
@click.option("--in-cluster", is_flag=True, help="Cluster mode with the pod's service account.")
@click.option(
    "--kube-version",
    metavar="MINOR",
    callback=_check_kube_version,
    help=f"{KUBE_VERSION_HELP} In a cluster the default is the API server's own minor.",
)
@click.option(
    "--quota-grants/--no-quota-grants",
    default=True,
    show_default=True,
    help="Cluster mode: each replica admits from its grant of a tenant's quota and writes the "
    "holders moments later; off, every admission waits for its TenantUsage write.",
)
@click.option(
    "--keep-rewrite-policy",
    is_flag=True,
    help="Cluster mode: keep the legacy rewrite's MutatingAdmissionPolicy, its binding and "
    "templates applied as the policies and namespaces change (see `dragate rewrite-policy`).",
)
@click.option(
    "--policy-objects/--no-policy-objects",
    default=True,
    show_default=True,
    help="Cluster mode: enforce the cluster's dragate.io policy objects (Tenant, "
    "DeviceClassPolicy, ...), beside the --policies files when given.",
)
@click.option(
    "--role",
    type=click.Choice([r.value for r in Role]),
    default=Role.ALL.value,
    show_default=True,
    help="webhook: answer reviews over HTTPS, no cluster-wide loop and no Lease. controller: "
    "cluster mode only; hold the Lease and run the reconciler, keepers, policy status, audit "
    "and PolicyReports, with probes over plain HTTP on --probe-port. all: both (offline, the "
    "webhook alone; in a cluster, a controller child process beside the webhook).",
)
@click.option(
    "--probe-port",
    default=DEFAULT_PROBE_PORT,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="The controller's /healthz, /readyz and /metrics over plain HTTP, on --host "
    "(0: any free port).",
)
def command(kube_version: str | None, **flags: object) -> None:
    """Serve /validate and /mutate over HTTPS (gunicorn, one gevent worker)."""
    config = build_config(**flags)  # type: ignore[arg-type]
    cluster = config.cluster
    live = (lambda: cluster_api(cluster).server_version()) if cluster else _offline
    minor = serving_kube_version(kube_version, cluster is not None, live, _warn)
    use_kube_version(minor)
    config = dataclasses.replace(config, kube_version=minor)
    check_inputs(config)
    click.echo(f"dragate: {serving_line(config, _policy_origin(config))}", err=True)
    run(config)
    sys.exit(exits.OK)


def _offline() -> tuple[str, str]:
    raise AssertionError("no API server to ask offline")


def _policy_origin(config: ServeConfig) -> str:
    if config.cluster is None:
        return str(config.policy_dir)
    objects = "the cluster's dragate.io policy objects"
    return f"{config.policy_dir} and {objects}" if config.policy_dir else objects


def build_config(
    *,
    policy_dir: Path | None,
    host: str,
    port: int,
    cert_dir: Path | None,
    state_file: Path | None,
    ledger_file: Path | None,
    dns_names: tuple[str, ...],
    max_connections: int,
    max_body_bytes: int,
    client_ca: Path | None,
    client_names: tuple[str, ...],
    on_timeout: str,
    own_namespace: str,
    own_service_account: str,
    reload_interval: float,
    graceful_timeout: int,
    log_level: str,
    kubeconfig: str | None,
    in_cluster: bool,
    quota_grants: bool,
    keep_rewrite_policy: bool = False,
    policy_objects: bool = True,
    role: str = Role.ALL.value,
    probe_port: int = DEFAULT_PROBE_PORT,
) -> ServeConfig:
    """Flags to a ServeConfig; makes the dev certificate when needed."""
    _check_combinations(role, kubeconfig, in_cluster, client_ca, client_names)
    own = Identity(own_namespace, own_service_account)
    target = ClusterTarget(
        kubeconfig, in_cluster, quota_grants, keep_rewrite_policy, own, policy_objects
    )
    cluster = target if kubeconfig or in_cluster else None
    if keep_rewrite_policy and cluster is None:
        raise BadInput("--keep-rewrite-policy needs a cluster: --kubeconfig or --in-cluster")
    tls = serving_tls(Role(role), cert_dir, dns_names, client_ca)
    options = AdmissionOptions(
        max_body_bytes=max_body_bytes,
        on_timeout=TimeoutOutcome(on_timeout),
        own_namespace=own_namespace,
        own_service_account=own_service_account,
        require_client_cert=client_ca is not None,
        client_names=frozenset(client_names),
    )
    if policy_dir is None and (cluster is None or not policy_objects):
        policy_dir = default_policy_dir()
    return ServeConfig(
        policy_dir=policy_dir, tls=tls, host=host, port=port,
        state_file=state_file, cluster=cluster,
        ledger_file=ledger_file or state_dir() / "ledger.sqlite3", max_connections=max_connections,
        graceful_timeout=graceful_timeout, log_level=log_level, admission=options,
        reload_interval=reload_interval, role=Role(role), probe_port=probe_port,
    )  # fmt: skip


def _check_combinations(
    role: str,
    kubeconfig: str | None,
    in_cluster: bool,
    client_ca: Path | None,
    client_names: tuple[str, ...],
) -> None:
    """Flags that only make sense together: refused before anything is built."""
    if role == Role.CONTROLLER and not (kubeconfig or in_cluster):
        raise BadInput(
            "--role controller needs a cluster: --kubeconfig or --in-cluster "
            "(offline, `dragate serve` alone runs everything)"
        )
    if client_names and client_ca is None:
        raise BadInput("--client-name needs --client-ca: names are read from verified certificates")


def serving_tls(
    role: Role, cert_dir: Path | None, dns_names: Sequence[str], client_ca: Path | None
) -> TlsFiles:
    """The certificate the webhook serves; the controller serves no TLS and makes none."""
    if role is Role.CONTROLLER:
        where = certificates.CertDir(cert_dir or state_dir() / "certs")
        return TlsFiles(where.file(certificates.TLS_CERT), where.file(certificates.TLS_KEY))
    try:
        cert_files = prepare_certs(cert_dir, dns_names)
    except certificates.CertError as err:
        raise BadInput(str(err)) from None
    return TlsFiles(
        cert_files.file(certificates.TLS_CERT), cert_files.file(certificates.TLS_KEY), client_ca
    )
