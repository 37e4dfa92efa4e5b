"""Two `dragate serve --kubeconfig` replicas race for one tenant's quota, and one is SIGKILLed
(master and worker) mid-load, against the real kube-apiserver.

Client threads POST ResourceClaim CREATE reviews straight to both replicas' /validate, as the
API server does through the Service, and a review whose connection fails is sent again to the
other replica. Across the replicas no more claims are allowed than the quota (a retried claim
counted once), every review is answered by one replica or the other, and the stored holders
never pass the quota. Once the claims allowed are created, the survivor admits again up to
exactly the quota: the killed replica's share comes back (its grant's lease ends, its queued
holders' claims are recorded by the reconciler), and the stored holders are the claims allowed.
"""

from __future__ import annotations

import http.client
import json
import os
import queue
import signal
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from webhook.kube.api import ApiError, KubeApi, Unreachable
from webhook.ledger import accounting
from webhook.ledger.accounting import PENDING_SECONDS
from webhook.ledger.tenantusage import COLLECTION, object_name, records_of
from webhook.ledger.wants import GRANT_PREFIX

from .cluster import Cluster
from .dragate_server import (
    CRD,
    DragateServer,
    inventory_manifest,
    resource_slice,
    serve_command,
)
from .processes import child_pids, gone, wait_for

pytestmark = pytest.mark.e2e

GPU = "gpu.nvidia.com"
QUOTA = 12
REQUESTS = 60
CLIENTS = 6
KILL_AFTER = QUOTA // 2  # answers given before the second replica is killed
SLICES = [resource_slice("races-node", 2 * QUOTA)]
TENANT = """
apiVersion: dragate.io/v1alpha1
kind: Tenant
metadata: {{name: {name}}}
spec:
  namespaces: [{name}]
  quota:
  - deviceClassName: gpu.nvidia.com
    maxDevices: {quota}
"""


@dataclass(frozen=True)
class Variant:
    """How the replicas serve: `flags` added to `dragate serve`, `tenant` of its own."""

    tenant: str
    flags: tuple[str, ...]


VARIANTS = [
    pytest.param(Variant("races-grants", ()), id="quota-grants"),
    pytest.param(Variant("races-exact", ("--no-quota-grants",)), id="no-quota-grants"),
]


# --- the replicas ------------------------------------------------------------------------


@dataclass
class Replica:
    """One `dragate serve` process group and a client of its /validate."""

    server: DragateServer
    context: ssl.SSLContext = field(init=False)

    def __post_init__(self) -> None:
        self.context = ssl.create_default_context(cadata=self.server.ca_bundle_pem.decode())

    def validate(self, review: dict[str, Any]) -> dict[str, Any]:
        """The AdmissionReview answer, on a new TLS connection as the API server opens one;
        raises OSError or HTTPException when the connection fails."""
        port = int(self.server.base_url.rsplit(":", 1)[1])
        conn = http.client.HTTPSConnection("127.0.0.1", port, context=self.context, timeout=15)
        try:
            body = json.dumps(review).encode()
            conn.request("POST", "/validate?timeout=10s", body,
                         {"Content-Type": "application/json"})  # fmt: skip
            response = conn.getresponse()
            answer: dict[str, Any] = json.loads(response.read())["response"]
            return answer
        finally:
            conn.close()

    def kill(self) -> list[int]:
        """SIGKILL the master, its worker and its controller child at once (the whole
        process group); the PIDs."""
        master = self.server.process.pid
        pids = [master, *child_pids(master)]
        assert len(pids) == 3, f"expected a master, its worker and controller, found {pids}"
        os.killpg(master, signal.SIGKILL)
        wait_for(lambda: all(gone(pid) for pid in pids), timeout=10, what="the three PIDs gone")
        return pids


def launch_replicas(cluster: Cluster, workdir: Path, variant: Variant) -> list[Replica]:
    policies = workdir / "policies"
    policies.mkdir()
    (policies / "tenant.yaml").write_text(TENANT.format(name=variant.tenant, quota=QUOTA))
    command = [*serve_command(cluster.kubeconfig, policies), "--no-policy-objects"]
    command += variant.flags
    return [
        Replica(DragateServer.launch(command, workdir, name=f"{variant.tenant}-{n}"))
        for n in range(2)
    ]


@pytest.fixture
def replicas(cluster: Cluster, tmp_path: Path) -> Iterator[Callable[[Variant], list[Replica]]]:
    """`replicas(variant)`: the CRD, inventory and the tenant's namespace, and two replicas
    of `dragate serve` for them; everything removed afterwards."""
    cluster.kubectl("apply", "-f", str(CRD))
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s",
                    "crd/tenantusages.dragate.io")  # fmt: skip
    cluster.apply(inventory_manifest(SLICES))
    started: list[Replica] = []
    namespaces: list[str] = []

    def make(variant: Variant) -> list[Replica]:
        cluster.kubectl("create", "namespace", variant.tenant)
        namespaces.append(variant.tenant)
        started.extend(launch_replicas(cluster, tmp_path, variant))
        return started[-2:]

    yield make
    for replica in started:
        replica.server.stop()
    for namespace in namespaces:
        cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
        cluster.kubectl("delete", "tenantusage", namespace, "--ignore-not-found", check=False)
    cluster.kubectl("delete", "-f", "-", "--ignore-not-found", "--wait=false",
                    input=inventory_manifest(SLICES), check=False)  # fmt: skip


# --- reviews and claims --------------------------------------------------------------------


def claim(name: str, namespace: str) -> dict[str, Any]:
    request = {"name": "gpu", "exactly": {"deviceClassName": GPU, "count": 1}}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"devices": {"requests": [request]}},
    }


def review(name: str, namespace: str) -> dict[str, Any]:
    """A ResourceClaim CREATE review, not a dry run, as the API server sends it."""
    kind = {"group": "resource.k8s.io", "version": "v1", "kind": "ResourceClaim"}
    resource = {"group": "resource.k8s.io", "version": "v1", "resource": "resourceclaims"}
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": f"uid-{name}", "kind": kind, "resource": resource, "requestKind": kind,
            "requestResource": resource, "operation": "CREATE", "namespace": namespace,
            "name": name, "object": claim(name, namespace), "oldObject": None,
            "dryRun": False, "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
        },
    }  # fmt: skip


def create_claims(cluster: Cluster, names: list[str], namespace: str) -> None:
    """The allowed claims stored, as the API server stores a claim its webhooks allowed."""
    if names:
        items = [claim(name, namespace) for name in names]
        cluster.kubectl("create", "-f", "-", input=json.dumps({"apiVersion": "v1",
                        "kind": "List", "items": items}))  # fmt: skip


# --- the load -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    name: str
    replica: int  # which replica answered
    allowed: bool
    tries: int  # replicas asked


@dataclass
class Load:
    """REQUESTS reviews from CLIENTS threads, spread over both replicas (claim i goes first
    to replica i % 2); a failed connection sends the same review to the other replica."""

    replicas: list[Replica]
    namespace: str
    answers: list[Answer] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    answered: threading.Semaphore = field(default_factory=lambda: threading.Semaphore(0))

    def ask(self, index: int) -> None:
        name = f"c{index:03d}"
        for tries, target in enumerate((index % 2, 1 - index % 2), start=1):
            try:
                answer = self.replicas[target].validate(review(name, self.namespace))
            except (OSError, http.client.HTTPException):
                continue
            with self.lock:
                self.answers.append(Answer(name, target, bool(answer["allowed"]), tries))
            self.answered.release()
            return
        with self.lock:
            self.lost.append(name)

    def client(self, work: queue.SimpleQueue[int]) -> None:
        while True:
            try:
                self.ask(work.get_nowait())
            except queue.Empty:
                return

    def run(self, kill: Callable[[], object]) -> None:
        """The whole load, `kill` called once KILL_AFTER reviews are answered."""
        work: queue.SimpleQueue[int] = queue.SimpleQueue()
        for index in range(REQUESTS):
            work.put(index)
        clients = [threading.Thread(target=self.client, args=(work,)) for _ in range(CLIENTS)]
        for thread in clients:
            thread.start()
        for _ in range(KILL_AFTER):
            assert self.answered.acquire(timeout=60), "the replicas stopped answering"
        kill()
        for thread in clients:
            thread.join(timeout=120)


def allowed_names(answers: list[Answer]) -> set[str]:
    return {a.name for a in answers if a.allowed}


# --- the stored holders --------------------------------------------------------------------


@dataclass
class Sampler:
    """Reads the tenant's TenantUsage over and over while the test runs: the most devices its
    live claim holders, and its live holders and grants together, ever held."""

    api: KubeApi
    tenant: str
    most_claims: int = 0
    most_with_grants: int = 0
    reads: int = 0
    stop: threading.Event = field(default_factory=threading.Event)

    def live(self) -> dict[str, int]:
        """Holder key -> GPUs, for what counts (`accounting.live`: every holder, the grants
        whose lease has not ended); {} before the first write."""
        try:
            obj = self.api.request("GET", f"{COLLECTION}/{object_name(self.tenant)}")
        except ApiError as error:
            if error.status == 404:
                return {}
            raise
        counted = accounting.live(records_of(obj), now=time.time())
        return {key: r.devices.get(GPU, 0) for key, r in counted.items()}

    def sample(self) -> None:
        held = self.live()
        claims = sum(n for key, n in held.items() if key.startswith("claim:"))
        grants = sum(n for key, n in held.items() if key.startswith(GRANT_PREFIX))
        self.most_claims = max(self.most_claims, claims)
        self.most_with_grants = max(self.most_with_grants, claims + grants)
        self.reads += 1

    def run(self) -> None:
        while not self.stop.wait(0.2):
            try:
                self.sample()
            except (ApiError, Unreachable):
                continue  # a read the API server failed is no evidence either way

    def __enter__(self) -> Sampler:
        threading.Thread(target=self.run, daemon=True).start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()


# --- after the load -------------------------------------------------------------------------


def admit_up_to_the_quota(
    cluster: Cluster, survivor: Replica, namespace: str, allowed: set[str]
) -> float:
    """New claims reviewed by the survivor, one a second, each allowed one created, until
    QUOTA claims in all are allowed: the seconds it took. Then one more is refused."""
    started, late = time.monotonic(), 0

    def one_more() -> bool:
        nonlocal late
        late += 1
        name = f"late{late:03d}"
        if survivor.validate(review(name, namespace))["allowed"]:
            allowed.add(name)
            create_claims(cluster, [name], namespace)
        return len(allowed) >= QUOTA

    wait_for(one_more, timeout=PENDING_SECONDS + 30, interval=1.0,
             what=f"the survivor to admit up to {QUOTA}")  # fmt: skip
    assert len(allowed) == QUOTA, f"overcommitted after the load: {sorted(allowed)}"
    assert not survivor.validate(review("over", namespace))["allowed"]
    return time.monotonic() - started


def stored_claims(sampler: Sampler) -> set[str]:
    """The names of the claims with a live holder (keyed `claim:<namespace>/<name>`)."""
    prefix = f"claim:{sampler.tenant}/"
    return {key.removeprefix(prefix) for key in sampler.live() if key.startswith("claim:")}


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_killed_replica_never_lets_the_quota_be_overcommitted(
    cluster: Cluster, replicas: Callable[[Variant], list[Replica]], variant: Variant
) -> None:
    tenant = variant.tenant
    first, second = replicas(variant)
    load = Load([first, second], tenant)
    sampler = Sampler(KubeApi.from_kubeconfig(str(cluster.kubeconfig)), tenant)
    killed: list[int] = []
    with sampler:
        load.run(lambda: killed.extend(second.kill()))
        assert not load.lost, f"reviews answered by neither replica: {load.lost}"
        assert len(load.answers) == REQUESTS
        allowed = allowed_names(load.answers)
        assert len(allowed) <= QUOTA, f"{len(allowed)} claims allowed for {QUOTA} GPUs"
        assert len(killed) == 3 and all(gone(pid) for pid in killed)
        create_claims(cluster, sorted(allowed), tenant)
        late = admit_up_to_the_quota(cluster, first, tenant, allowed)
        wait_for(lambda: stored_claims(sampler) == allowed, timeout=45,
                 what="the stored holders to be the claims allowed")  # fmt: skip
    assert sampler.most_claims <= QUOTA, f"stored holders held {sampler.most_claims} GPUs"
    retried = [a for a in load.answers if a.tries > 1]
    print(f"{tenant}: {len(allowed_names(load.answers))} allowed in the load, "
          f"{len(retried)} retried on the survivor, the quota full again after {late:.0f}s; "
          f"most stored: {sampler.most_claims} in holders, {sampler.most_with_grants} with "
          f"grants ({sampler.reads} reads)")  # fmt: skip
