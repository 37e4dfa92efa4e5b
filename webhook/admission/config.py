"""Everything `dragate serve` decides before the first request, as one plain value.

The gunicorn master builds it from flags and hands it to its one worker, which builds the
Flask app, context and watcher from it after fork (threads and sockets do not survive a fork).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from webhook.assembly import ClusterTarget
from webhook.types.kubeversions import NEWEST

DEFAULT_MAX_BODY_BYTES = 3 * 1024 * 1024  # the apiserver's own write-body limit
DEFAULT_TIMEOUT_SECONDS = 10.0  # the apiserver's default `timeoutSeconds`


DEFAULT_PROBE_PORT = 8081


class Role(StrEnum):
    """What a `dragate serve` process does (docs/architecture.md, "Process model")."""

    WEBHOOK = "webhook"  # answers reviews over HTTPS; no cluster-wide loop, no Lease
    CONTROLLER = "controller"  # the Lease and the cluster-wide loops; probes over plain HTTP
    ALL = "all"  # both: offline the webhook alone, in a cluster a controller child beside it


class TimeoutOutcome(StrEnum):
    """What /validate answers when a review outlives the apiserver's deadline."""

    DENY = "deny"
    ALLOW = "allow"


@dataclass(frozen=True)
class TlsFiles:
    """The serving certificate and key, and an optional CA that client certs must chain to."""

    cert: Path
    key: Path
    client_ca: Path | None = None


@dataclass(frozen=True)
class AdmissionOptions:
    """Per-request behaviour of the Flask app; the part tests vary most."""

    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    default_timeout: float = DEFAULT_TIMEOUT_SECONDS
    timeout_margin: float = 0.25  # answer this much before the apiserver gives up
    on_timeout: TimeoutOutcome = TimeoutOutcome.DENY
    own_namespace: str = ""
    own_service_account: str = ""
    max_warnings: int = 20
    require_client_cert: bool = False  # reviews only from a peer with a verified certificate
    client_names: frozenset[str] = frozenset()
    """With `require_client_cert`, the identities allowed to send reviews: a certificate's DNS
    names, or its Common Name when it has none. Empty: any certificate the CA signed."""


@dataclass(frozen=True)
class ServeConfig:
    """All serve settings; built by the CLI, read by gunicorn hooks and the app factory."""

    policy_dir: Path | None  # None: the cluster's policy objects alone
    tls: TlsFiles
    host: str = "127.0.0.1"
    port: int = 8443
    state_file: Path | None = None
    ledger_file: Path | None = None
    cluster: ClusterTarget | None = None
    max_connections: int = 10240  # open connections, idle ones included: see server.py
    keepalive: int = 120  # > the API server's 90 s idle timeout: see server.py
    graceful_timeout: int = 25
    reload_interval: float = 1.0
    log_level: str = "info"
    admission: AdmissionOptions = field(default_factory=AdmissionOptions)
    kube_version: str = NEWEST  # the minor rules are typed for (`--kube-version` or /version)
    role: Role = Role.ALL
    probe_port: int = DEFAULT_PROBE_PORT  # the controller's plain-HTTP probes, on `host`


def own_namespace_default() -> str:
    """The Downward API's POD_NAMESPACE, so a Deployment needs no extra flag."""
    return os.environ.get("POD_NAMESPACE", "")
