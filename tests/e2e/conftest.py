"""Fixtures for end-to-end tests against a real kube-apiserver.

- `cluster` (session): etcd + kube-apiserver (serving MutatingAdmissionPolicies)
  + kube-controller-manager of Kubernetes 1.37 from the toolchain that
  `tests/e2e/toolchain/build.sh` builds. Fails when the toolchain is missing, unless
  DRAGATE_SKIP_E2E=1 (then skips). DRAGATE_E2E_KEEP=1 keeps the temp dir with logs.
- `kube_minor` (module): "1.37"; a test marked `kube_matrix` runs once per minor of
  DRAGATE_KUBE_MINORS (default "1.35,1.36,1.37"), its id ending in the minor (`[1.36]`);
  `kube_matrix(older=True)` runs it on the matrix's minors other than 1.37 (a subset of a
  table that runs whole on 1.37).
- `kube_bin_dir` (module): the toolchain bin dir of `kube_minor`.
- `kube_cluster` (module): `cluster` on 1.37; on an older minor a cluster of that minor for the
  module.
- `start_webhook` (function): start any HTTPS webhook command; stopped after the test.
- `crd` (module): the cluster with the TenantUsage CRD installed and its storage warmed up.
- `fresh` (function): `fresh(**options)` -> a KubeLedger on an empty ledger.
- `register_webhooks` (function): apply Validating/MutatingWebhookConfigurations with `url`
  clients; removed after the test.
"""

from __future__ import annotations

import itertools
import os
import signal
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from webhook.ledger.kube import KubeLedger
from webhook.ledger.tenantusage import COLLECTION

from . import webhooks
from .cluster import Cluster, running_cluster
from .ledger_support import CRD, started
from .toolchain_bins import (
    DEFAULT_MINOR,
    SUPPORTED_MINORS,
    ToolchainMissing,
    require_binaries,
    toolchain_bin_dir,
)
from .webhooks import (
    RegisterWebhooks,
    StartWebhook,
    WebhookRegistration,
    WebhookServer,
    WebhookSettings,
    start_webhook_server,
)

_webhook_numbers = itertools.count()


def matrix_minors() -> tuple[str, ...]:
    """The minors a `kube_matrix` test runs on: DRAGATE_KUBE_MINORS, comma-separated."""
    raw = os.environ.get("DRAGATE_KUBE_MINORS", ",".join(SUPPORTED_MINORS))
    minors = tuple(minor.strip() for minor in raw.split(",") if minor.strip())
    unknown = sorted(set(minors) - set(SUPPORTED_MINORS))
    if unknown:
        raise pytest.UsageError(
            f"DRAGATE_KUBE_MINORS: unknown minor {', '.join(unknown)} "
            f"(supported: {', '.join(SUPPORTED_MINORS)})"
        )
    return minors


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Every test using `kube_minor` gets the minor in its id; `kube_matrix` ones get them all.
    Module scope groups a module's tests by minor, so each minor's cluster starts once."""
    if "kube_minor" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker("kube_matrix")
    minors = list(matrix_minors() if marker else (DEFAULT_MINOR,))
    if marker and marker.kwargs.get("older"):
        minors = [minor for minor in minors if minor != DEFAULT_MINOR]
    metafunc.parametrize("kube_minor", minors, indirect=True, ids=minors, scope="module")


def _bin_dir(minor: str) -> Path:
    if os.environ.get("DRAGATE_SKIP_E2E") == "1":
        pytest.skip("DRAGATE_SKIP_E2E=1: e2e tests against a real kube-apiserver skipped")
    try:
        return require_binaries(toolchain_bin_dir(minor))
    except ToolchainMissing as error:
        message = str(error)
    pytest.fail(message, pytrace=False)


@pytest.fixture(scope="session")
def e2e_bin_dir() -> Path:
    return _bin_dir(DEFAULT_MINOR)


@pytest.fixture(scope="module")
def kube_minor(request: pytest.FixtureRequest) -> str:
    return str(getattr(request, "param", DEFAULT_MINOR))


@pytest.fixture(scope="module")
def kube_bin_dir(kube_minor: str) -> Path:
    return _bin_dir(kube_minor)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@contextmanager
def _control_plane(bin_dir: Path) -> Iterator[Cluster]:
    keep = os.environ.get("DRAGATE_E2E_KEEP") == "1"
    # A SIGTERM (CI cancel, timeout) would otherwise leave the control plane running.
    previous = signal.getsignal(signal.SIGTERM)
    if previous is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _interrupt)
    try:
        with running_cluster(bin_dir, keep_workdir=keep, mutating_policies=True) as running:
            yield running
    finally:
        signal.signal(signal.SIGTERM, previous)


@pytest.fixture(scope="session")
def cluster(e2e_bin_dir: Path) -> Iterator[Cluster]:
    with _control_plane(e2e_bin_dir) as running:
        yield running


@pytest.fixture(scope="module")
def kube_cluster(
    request: pytest.FixtureRequest, kube_minor: str, kube_bin_dir: Path
) -> Iterator[Cluster]:
    if kube_minor == DEFAULT_MINOR:
        yield request.getfixturevalue("cluster")
        return
    with _control_plane(kube_bin_dir) as running:
        yield running


@pytest.fixture
def start_webhook(cluster: Cluster) -> Iterator[StartWebhook]:
    """`start_webhook(command, name=..., ready_path=..., env=...)` -> WebhookServer.

    `command` may use {host} {port} {cert_dir} {cert_file} {key_file} {ca_file}.
    """
    servers: list[WebhookServer] = []

    def start(command: Sequence[str], **kwargs: Any) -> WebhookServer:
        kwargs.setdefault("name", f"webhook-{next(_webhook_numbers)}")
        server = start_webhook_server(command, cluster.workdir, **kwargs)
        servers.append(server)
        return server

    yield start
    for server in reversed(servers):
        server.stop()


@pytest.fixture
def register_webhooks(cluster: Cluster) -> Iterator[RegisterWebhooks]:
    """`register_webhooks(validate_url, mutate_url, ca_bundle_pem, *, name=...,
    failure_policy="Fail", timeout_seconds=10, **settings)` -> WebhookRegistration."""
    registrations: list[WebhookRegistration] = []

    def register(
        validate_url: str | None,
        mutate_url: str | None,
        ca_bundle_pem: bytes,
        *,
        name: str = "dragate-e2e",
        **settings: Any,
    ) -> WebhookRegistration:
        registration = webhooks.register_webhooks(
            cluster,
            validate_url,
            mutate_url,
            ca_bundle_pem,
            name=name,
            settings=WebhookSettings(**settings),
        )
        registrations.append(registration)
        return registration

    yield register
    for registration in reversed(registrations):
        registration.delete(cluster)


@pytest.fixture(scope="module")
def crd(cluster: Cluster) -> Cluster:
    cluster.kubectl("apply", "-f", str(CRD))
    cluster.kubectl(
        "wait", "--for=condition=Established", "crd/tenantusages.dragate.io", "--timeout=30s"
    )
    warm = KubeLedger.from_kubeconfig(str(cluster.kubeconfig), budget=30.0)
    warm.reserve("warm-up", {"claim:w/x": {"gpu.nvidia.com": 1}}, {})  # sets up storage
    return cluster


@pytest.fixture
def fresh(crd: Cluster) -> Iterator[Callable[..., KubeLedger]]:
    """A KubeLedger on an empty ledger: every TenantUsage deleted first, its grant loops
    started as the composer starts them. Ledgers with grants are closed after the test, so
    no flush of theirs lands in a later test's objects."""
    made: list[KubeLedger] = []

    def make(**options: Any) -> KubeLedger:
        ledger = KubeLedger.from_kubeconfig(str(crd.kubeconfig), **options)
        ledger.api.request("DELETE", COLLECTION)
        made.append(ledger)
        return started(ledger)

    yield make
    for ledger in made:
        ledger.close(timeout=1.0)
