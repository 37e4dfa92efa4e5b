"""The two roles of `dragate serve` on the real control plane: one `--role webhook` process
answers reviews while two `--role controller` processes share the Lease. The controller that
leads is SIGKILLed: reviews go on being answered without an error, the standby takes the
Lease within the lease duration and two retry periods, and the tenant's quota stays exact (no
claim more is admitted than the quota, and every one up to it is).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import ssl
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from webhook.kube.leader import LeaseTimes
from webhook.ledger.tenantusage import records_of

from .cluster import Cluster
from .dragate_server import (
    CRD,
    DRAGATE,
    DragateServer,
    inventory_manifest,
    resource_slice,
    serve_command,
)
from .processes import ManagedProcess, child_pids, command_line, free_port, gone, wait_for

pytestmark = pytest.mark.e2e

TENANT_NAME = "roles"
SYSTEM = "roles-system"  # where the controllers' Lease lives
GPU = "gpu.nvidia.com"
QUOTA = 4
SLICES = [resource_slice("roles-node", 2 * QUOTA)]
TENANT = """
apiVersion: dragate.io/v1alpha1
kind: Tenant
metadata: {{name: {tenant}}}
spec:
  namespaces: [{tenant}]
  quota:
  - deviceClassName: {gpu}
    maxDevices: {quota}
"""


@dataclass
class Controller:
    """A `dragate serve --role controller` process and its plain-HTTP probes."""

    process: ManagedProcess
    port: int

    def readyz(self) -> tuple[int, dict[str, Any]]:
        url = f"http://127.0.0.1:{self.port}/readyz"
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return int(response.status), json.loads(response.read())
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read())

    def leading(self) -> bool:
        try:
            return bool(self.readyz()[1]["controller"]["leading"])
        except OSError:
            return False

    def kill(self) -> None:
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process._popen.wait(timeout=10)


def start_controller(cluster: Cluster, policies: Path, workdir: Path, name: str) -> Controller:
    port = free_port()
    argv = [
        DRAGATE, "serve", "--role", "controller", "--kubeconfig", str(cluster.kubeconfig),
        "--policies", str(policies), "--no-policy-objects", "--own-namespace", SYSTEM,
        "--host", "127.0.0.1", "--probe-port", str(port), "--log-level", "info",
    ]  # fmt: skip
    controller = Controller(ManagedProcess(name, argv, workdir), port)
    controller.process.wait_ready(lambda: controller.readyz()[0] == 200, timeout=60)
    return controller


@dataclass
class Roles:
    webhook: DragateServer
    controllers: list[Controller]
    context: ssl.SSLContext = field(init=False)

    def __post_init__(self) -> None:
        self.context = ssl.create_default_context(cadata=self.webhook.ca_bundle_pem.decode())

    def validate(self, name: str, *, dry_run: bool, namespace: str = TENANT_NAME) -> dict[str, Any]:
        port = int(self.webhook.base_url.rsplit(":", 1)[1])
        conn = http.client.HTTPSConnection("127.0.0.1", port, context=self.context, timeout=15)
        try:
            body = json.dumps(review(name, dry_run=dry_run, namespace=namespace)).encode()
            conn.request("POST", "/validate?timeout=10s", body,
                         {"Content-Type": "application/json"})  # fmt: skip
            response = conn.getresponse()
            assert response.status == 200, response.read()
            answer: dict[str, Any] = json.loads(response.read())["response"]
            return answer
        finally:
            conn.close()

    def leader(self) -> Controller:
        wait_for(lambda: any(c.leading() for c in self.controllers), timeout=60,
                 what="a controller to lead")  # fmt: skip
        leaders = [c for c in self.controllers if c.leading()]
        assert len(leaders) == 1
        return leaders[0]


def claim(name: str, namespace: str = TENANT_NAME) -> dict[str, Any]:
    request = {"name": "gpu", "exactly": {"deviceClassName": GPU, "count": 1}}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"devices": {"requests": [request]}},
    }


def review(name: str, *, dry_run: bool, namespace: str = TENANT_NAME) -> dict[str, Any]:
    kind = {"group": "resource.k8s.io", "version": "v1", "kind": "ResourceClaim"}
    resource = {"group": "resource.k8s.io", "version": "v1", "resource": "resourceclaims"}
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": f"uid-{name}", "kind": kind, "resource": resource, "requestKind": kind,
            "requestResource": resource, "operation": "CREATE", "namespace": namespace,
            "name": name, "object": claim(name, namespace), "oldObject": None, "dryRun": dry_run,
            "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
        },
    }  # fmt: skip


@contextmanager
def prepared(cluster: Cluster, tmp_path: Path, tenant: str, system: str) -> Iterator[Path]:
    """The CRD, the inventory, the tenant's and the Lease's namespaces, and the policies
    directory with the tenant; removed afterwards."""
    cluster.kubectl("apply", "-f", str(CRD))
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s",
                    "crd/tenantusages.dragate.io")  # fmt: skip
    cluster.apply(inventory_manifest(SLICES))
    for namespace in (tenant, system):
        cluster.kubectl("create", "namespace", namespace)
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "tenant.yaml").write_text(TENANT.format(tenant=tenant, gpu=GPU, quota=QUOTA))
    try:
        yield policies
    finally:
        for namespace in (tenant, system):
            cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
        cluster.kubectl("delete", "tenantusage", tenant, "--ignore-not-found", check=False)
        cluster.kubectl("delete", "-f", "-", "--ignore-not-found", "--wait=false",
                        input=inventory_manifest(SLICES), check=False)  # fmt: skip


@pytest.fixture
def roles(cluster: Cluster, tmp_path: Path) -> Iterator[Roles]:
    with prepared(cluster, tmp_path, TENANT_NAME, SYSTEM) as policies:
        command = [*serve_command(cluster.kubeconfig, policies), "--no-policy-objects",
                   "--role", "webhook"]  # fmt: skip
        webhook = DragateServer.launch(command, tmp_path, name="roles-webhook")
        controllers: list[Controller] = []
        try:
            for n in range(2):
                controllers.append(start_controller(cluster, policies, tmp_path, f"controller-{n}"))
            yield Roles(webhook, controllers)
        finally:
            webhook.stop()
            for controller in controllers:
                controller.process.stop()


@dataclass
class Stream:
    """Dry-run reviews sent one after another until stopped: each must be answered, allowed."""

    roles: Roles
    answered: int = 0
    failures: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                answer = self.roles.validate(f"dry-{self.answered}", dry_run=True)
                if not answer["allowed"]:
                    self.failures.append(str(answer.get("status")))
            except (OSError, http.client.HTTPException, AssertionError) as error:
                self.failures.append(repr(error))
            self.answered += 1
            time.sleep(0.05)


def test_killing_the_leading_controller_leaves_reviews_and_quota_whole(
    cluster: Cluster, roles: Roles
) -> None:
    webhook_ready = json.loads(
        urllib.request.urlopen(
            roles.webhook.server.url("/readyz"), context=roles.context, timeout=5
        ).read()
    )
    assert "controller" not in webhook_ready  # the webhook role runs no controller
    allowed = [f"c{n}" for n in range(QUOTA // 2)]
    for name in allowed:
        assert roles.validate(name, dry_run=False)["allowed"]
    cluster.apply(json.dumps({"apiVersion": "v1", "kind": "List",
                              "items": [claim(n) for n in allowed]}))  # fmt: skip
    leader = roles.leader()
    standby = next(c for c in roles.controllers if c is not leader)
    stream = Stream(roles)
    thread = threading.Thread(target=stream.run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: stream.answered >= 5, timeout=30, what="reviews before the kill")
        leader.kill()
        killed_at = time.monotonic()
        times = LeaseTimes()
        wait_for(standby.leading, timeout=times.takeover_seconds + 10, interval=0.1,
                 what="the standby to take the Lease")  # fmt: skip
        took = time.monotonic() - killed_at
        answered_at_takeover = stream.answered
        wait_for(lambda: stream.answered >= answered_at_takeover + 5, timeout=30,
                 what="reviews after the takeover")  # fmt: skip
    finally:
        stream.stop.set()
        thread.join(timeout=30)
    assert stream.failures == []
    # The standby sees the last renewal up to one retry period after it was made (before the
    # kill), and the expiry up to one retry period after it came.
    assert took <= times.takeover_seconds
    wait_for(lambda: standby.readyz()[1]["controller"]["lastReconcile"] is not None,
             timeout=30, what="the new leader's first reconcile")  # fmt: skip
    for n in range(QUOTA // 2, QUOTA):
        assert roles.validate(f"c{n}", dry_run=False)["allowed"], f"c{n} refused"
        cluster.apply(json.dumps(claim(f"c{n}")))
    refused = roles.validate(f"c{QUOTA}", dry_run=False)
    assert not refused["allowed"]
    assert "quota" in refused["status"]["message"].lower()


# --- --role all: the controller as the gunicorn master's child --------------------------------

ALL_TENANT = "roles-all"
ALL_SYSTEM = "roles-all-system"


@dataclass
class AllInOne:
    """A `dragate serve --role all` process in cluster mode: the gunicorn master, its worker
    and its controller child, whose probes are on `probe_port`."""

    server: DragateServer
    probe_port: int

    @classmethod
    def launch(cls, cluster: Cluster, policies: Path, workdir: Path, name: str) -> AllInOne:
        port = free_port()
        command = [*serve_command(cluster.kubeconfig, policies), "--no-policy-objects",
                   "--role", "all", "--own-namespace", ALL_SYSTEM,
                   "--probe-port", str(port)]  # fmt: skip
        server = DragateServer.launch(command, workdir, name=name)
        running = cls(server, port)
        probes = Controller(server.process, port)
        wait_for(lambda: probes.readyz()[0] == 200, timeout=60, what="the controller child")
        return running

    @property
    def master(self) -> int:
        return self.server.process.pid

    def children(self) -> tuple[int, int]:
        """The gunicorn worker and the controller child."""
        pids = child_pids(self.master)
        controllers = [p for p in pids if "controller" in command_line(p)]
        workers = [p for p in pids if p not in controllers]
        assert len(controllers) == 1 and len(workers) == 1, f"children: {pids}"
        return workers[0], controllers[0]

    def controller(self) -> dict[str, Any]:
        state: dict[str, Any] = Controller(self.server.process, self.probe_port).readyz()[1]
        return state


def confirmed(cluster: Cluster, key: str) -> bool:
    """Whether the tenant's stored holder `key` is confirmed (no expiry: a reconciler saw its
    claim)."""
    result = cluster.kubectl("get", "tenantusage", ALL_TENANT, "-o", "json", check=False)
    if result.returncode != 0:
        return False
    records = records_of(json.loads(result.stdout))
    return key in records and "expiresAt" not in records[key].as_json()


def test_role_all_runs_a_controller_child_that_ends_with_its_master(
    cluster: Cluster, tmp_path: Path
) -> None:
    """One `--role all` process: its controller child takes the Lease and reconciles what the
    webhook admitted; SIGTERM to the master stops both cleanly, and a SIGKILLed master takes
    its child down too (`PR_SET_PDEATHSIG`) and its worker."""
    with prepared(cluster, tmp_path, ALL_TENANT, ALL_SYSTEM) as policies:
        first = AllInOne.launch(cluster, policies, tmp_path, "all-in-one")
        try:
            _, child = first.children()
            wait_for(lambda: first.controller()["controller"]["leading"], timeout=60,
                     what="the controller child to take the Lease")  # fmt: skip
            answer = Roles(first.server, []).validate("held", dry_run=False, namespace=ALL_TENANT)
            assert answer["allowed"], answer
            cluster.apply(json.dumps(claim("held", ALL_TENANT)))
            wait_for(lambda: confirmed(cluster, f"claim:{ALL_TENANT}/held"), timeout=60,
                     what="the child's reconciler to confirm the holder")  # fmt: skip
            first.server.process._popen.send_signal(signal.SIGTERM)
            assert first.server.process._popen.wait(timeout=60) == 0
            wait_for(lambda: gone(child), timeout=15, what="the child stopped with the master")
        finally:
            first.server.stop()
        assert "Traceback" not in first.server.process.log_path.read_text(errors="replace")

        second = AllInOne.launch(cluster, policies, tmp_path, "all-in-one-killed")
        try:
            worker, child = second.children()
            os.kill(second.master, signal.SIGKILL)  # the master alone, not its process group
            wait_for(lambda: gone(child) and gone(worker), timeout=30,
                     what="the worker and the child gone with their master")  # fmt: skip
        finally:
            second.server.stop()
            with contextlib.suppress(ProcessLookupError):  # whatever was left of the group
                os.killpg(second.master, signal.SIGKILL)
