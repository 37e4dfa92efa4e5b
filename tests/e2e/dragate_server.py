"""The real `dragate serve --kubeconfig` (cluster mode) against the e2e cluster, registered
through the Helm chart in url mode, and the pieces the scenario tests share.

- `DragateServer`: gunicorn + TLS on a fixed port and certificate, so it can be stopped and
  started again behind the same webhook configurations (outage scenarios).
- `install_chart`: `helm upgrade --install` of charts/dragate in url mode.
- `inventory`: DeviceClasses (tests/e2e/data/inventory.yaml) and ResourceSlices.
- `SLOW_STUB`: stub_webhook.py with a delay before every answer (timeout scenarios).
"""

from __future__ import annotations

import base64
import json
import shutil
import ssl
import sys
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .cluster import Cluster
from .processes import ManagedProcess, wait_for
from .webhooks import (
    WebhookServer,
    register_webhooks,
    start_webhook_server,
    wait_until_webhook_fires,
)

E2E = Path(__file__).resolve().parent
REPO = E2E.parents[1]
CHART = REPO / "charts" / "dragate"
CRD = REPO / "webhook" / "defaults" / "crds" / "tenantusages.yaml"
POLICIES = REPO / "policies"
DATA = E2E / "data"
DRAGATE = str(Path(sys.executable).with_name("dragate"))
if not Path(DRAGATE).exists():  # pragma: no cover - a venv without the script next to python
    DRAGATE = shutil.which("dragate") or "dragate"

READY_TIMEOUT = 60.0


def scenario_policies(directory: Path) -> Path:
    """A copy of the example policies/ (its test suites left out) plus the e2e tenants."""
    shutil.copytree(POLICIES, directory, ignore=shutil.ignore_patterns("tests"))
    for extra in (DATA / "policies").glob("*.yaml"):
        shutil.copy(extra, directory / extra.name)
    return directory


def serve_command(kubeconfig: Path, policies: Path) -> list[str]:
    """`dragate serve` in cluster mode; placeholders are filled by start_webhook_server.

    `--graceful-timeout 5`: the apiserver keeps idle connections open, which a stopping worker
    keeps serving until the graceful timeout (25 s by default); 5 s keeps stop/restart quick.
    `--probe-port 0`: each replica's controller child (`--role all`) probes on a port of its
    own, so replicas on one host do not clash.
    """
    return [
        DRAGATE, "serve", "--kubeconfig", str(kubeconfig), "--policies", str(policies),
        "--host", "{host}", "--port", "{port}", "--cert-dir", "{cert_dir}",
        "--graceful-timeout", "5", "--log-level", "info", "--probe-port", "0",
    ]  # fmt: skip


def _get_ok(url: str, ca_pem: bytes) -> bool:
    context = ssl.create_default_context(cadata=ca_pem.decode())
    with urllib.request.urlopen(url, timeout=5, context=context) as response:
        return bool(response.status == 200)


@dataclass
class DragateServer:
    """A running (or stopped) `dragate serve`; `start()` reuses the same port and certificate."""

    server: WebhookServer
    workdir: Path
    starts: int = 1
    logs: list[ManagedProcess] = field(default_factory=list)

    @classmethod
    def launch(cls, command: Sequence[str], workdir: Path, name: str = "dragate") -> DragateServer:
        server = start_webhook_server(
            command, workdir, name=name, ready_path="/readyz", timeout=READY_TIMEOUT
        )
        running = cls(server, workdir, logs=[server.process])
        running.wait_all_workers_ready()
        return running

    @property
    def base_url(self) -> str:
        return self.server.base_url

    @property
    def ca_bundle_pem(self) -> bytes:
        return self.server.ca_bundle_pem

    @property
    def process(self) -> ManagedProcess:
        return self.server.process

    def is_running(self) -> bool:
        return self.process.is_running()

    def stop(self) -> None:
        self.process.stop(grace=30.0)

    def start(self) -> None:
        """Start again with the same argv (same port, certificate, policies)."""
        if self.is_running():
            return
        self.starts += 1
        name = f"{self.process.name.split('#')[0]}#{self.starts}"
        process = ManagedProcess(name, self.process.argv, self.workdir)
        self.server.process = process
        self.logs.append(process)
        process.wait_ready(
            lambda: _get_ok(self.server.url("/readyz"), self.ca_bundle_pem), READY_TIMEOUT
        )
        self.wait_all_workers_ready()

    def wait_all_workers_ready(self, in_a_row: int = 6) -> None:
        """/readyz is per gunicorn worker (each has its own watch caches): ask on new
        connections until `in_a_row` answers in a row are 200, so every worker has synced."""
        streak = [0]

        def ready() -> bool:
            ok = _get_ok(self.server.url("/readyz"), self.ca_bundle_pem)
            streak[0] = streak[0] + 1 if ok else 0
            return streak[0] >= in_a_row

        wait_for(ready, timeout=READY_TIMEOUT, interval=0.1, what="every dragate worker ready")

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(f"--- {p.name} ---\n{p.log_tail(lines)}" for p in self.logs)


def install_chart(
    cluster: Cluster,
    release: str,
    namespace: str,
    url: str,
    ca_bundle_pem: bytes,
    *settings: str,
) -> str:
    """`helm upgrade --install` charts/dragate in url mode; `settings` are more `--set`s."""
    sets = [
        "deployment.enabled=false",
        f"webhook.url={url}",
        f"webhook.caBundle={base64.b64encode(ca_bundle_pem).decode()}",
        *settings,
    ]
    args = [arg for value in sets for arg in ("--set", value)]
    return cluster.helm(
        "upgrade", "--install", release, str(CHART), "--namespace", namespace,
        "--create-namespace", *args,
    ).stdout  # fmt: skip


def resource_slice(node: str, gpus: int, migs: int = 0) -> dict[str, Any]:
    """A ResourceSlice of the NVIDIA DRA driver for `node`: A100 GPUs and MIG 1g.10gb slices."""
    devices: list[dict[str, Any]] = [
        {
            "name": f"gpu-{n}",
            "attributes": {
                "type": {"string": "gpu"},
                "productName": {"string": "NVIDIA A100-SXM4-80GB"},
                "uuid": {"string": f"GPU-{node}-{n}"},
                "driverVersion": {"version": "550.54.15"},
            },
            "capacity": {"memory": {"value": "80Gi"}},
        }
        for n in range(gpus)
    ]
    devices += [
        {
            "name": f"mig-{n}",
            "attributes": {
                "type": {"string": "mig"},
                "profile": {"string": "1g.10gb"},
                "productName": {"string": "NVIDIA A100-SXM4-80GB"},
                "parentUUID": {"string": f"GPU-{node}-mig-parent"},
            },
            "capacity": {"memory": {"value": "10Gi"}},
        }
        for n in range(migs)
    ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-gpu.nvidia.com", "labels": {"dragate-e2e": "scenarios"}},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def inventory_manifest(slices: Sequence[dict[str, Any]]) -> str:
    """The DeviceClasses of data/inventory.yaml followed by `slices` as JSON documents."""
    text = (DATA / "inventory.yaml").read_text()
    return text + "".join(f"---\n{json.dumps(s)}\n" for s in slices)


SLOW_STUB = """
import sys, time
sys.path.insert(0, sys.argv[1])
import stub_webhook
delay = float(sys.argv[2])
answer = stub_webhook.Handler.do_POST
def slow(self):
    time.sleep(delay)
    try:
        answer(self)
    except OSError:
        pass  # the apiserver gave up and closed the connection
stub_webhook.Handler.do_POST = slow
stub_webhook.main(sys.argv[3:])
"""


def slow_stub_command(delay: float) -> list[str]:
    """stub_webhook.py answering every review after `delay` seconds."""
    return [
        sys.executable, "-c", SLOW_STUB, str(E2E), str(delay),
        "--port", "{port}", "--cert-file", "{cert_file}", "--key-file", "{key_file}",
        "--warning", "slow-stub",
    ]  # fmt: skip


@contextmanager
def serving(
    cluster: Cluster, policies: Path, name: str, probe: dict[str, Any], said: str
) -> Iterator[DragateServer]:
    """`dragate serve --kubeconfig` on `policies`, its ledger's CRD applied, registered as the
    validating and mutating webhook, yielded once a server-side dry run of `probe` shows
    `said` (configurations reach the admission chain asynchronously); unregistered and
    stopped after."""
    cluster.kubectl("apply", "-f", str(CRD))
    cluster.kubectl(
        "wait", "--for=condition=Established", "--timeout=60s", "crd/tenantusages.dragate.io"
    )
    command = serve_command(cluster.kubeconfig, policies)
    server = DragateServer.launch(command, cluster.workdir, name=name)
    registration = None

    def fires() -> bool:
        answer = cluster.kubectl("create", "-f", "-", "--dry-run=server",
                                 input=json.dumps(probe), check=False)  # fmt: skip
        return said in answer.stderr

    try:
        urls = server.server.url("/validate"), server.server.url("/mutate")
        registration = register_webhooks(cluster, *urls, server.ca_bundle_pem)
        wait_until_webhook_fires(fires, timeout=60)
        yield server
    finally:
        if registration is not None:
            registration.delete(cluster)
        server.stop()
