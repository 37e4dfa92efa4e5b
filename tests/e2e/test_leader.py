"""Leadership against the real kube-apiserver: one candidate holds the Lease, the others wait,
and a leader killed outright is replaced within the lease duration, whose reconciler then
runs there at once. Each candidate is a process of its own, as a replica is, and none
outlives the test."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from webhook.kube.leader import LeaseTimes
from webhook.ledger.kube import KubeLedger
from webhook.ledger.tenantusage import COLLECTION

from .cluster import Cluster
from .ledger_support import stored
from .processes import wait_for

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
TIMES = LeaseTimes(lease_duration=4, renew_deadline=3, retry_period=1)
CANDIDATE = textwrap.dedent("""
    import sys, threading
    from webhook.kube.api import KubeApi
    from webhook.kube.leader import Leadership, LeaseTimes
    kubeconfig, name, identity = sys.argv[1:4]
    lead = Leadership(KubeApi.from_kubeconfig(kubeconfig), "default", name=name,
                      identity=identity, times=LeaseTimes(4, 3, 1)).start()
    while not lead.leading():
        threading.Event().wait(0.05)
    print("leading", flush=True)
    threading.Event().wait(600)
""")


RECONCILING = textwrap.dedent("""
    import sys, threading
    from webhook.kube.api import KubeApi
    from webhook.kube.caches import KubeState
    from webhook.kube.leader import Leadership, LeaseTimes
    from webhook.ledger.kube import KubeLedger
    from webhook.ledger.reconciler import Reconciler, claims_truth
    from webhook.policy.loading import parse_policies
    kubeconfig, name, identity, policies = sys.argv[1:5]
    api = KubeApi.from_kubeconfig(kubeconfig)
    lead = Leadership(api, "default", name=name, identity=identity, times=LeaseTimes(4, 3, 1))
    state = KubeState(api, claim_listener=lambda kind, _claim: reconciler.poke())
    truth = claims_truth(lambda: parse_policies(policies), state)
    reconciler = Reconciler(KubeLedger(api, drop_grace=0.0), truth, interval=600.0,
                            leading=lead.leading)  # no pass of its own before the test ends
    lead.on_change(reconciler.wake)  # as assembly.cluster_mode wires it
    state.start().wait_synced(20)
    reconciler.start()
    lead.start()
    said = (False, 0)
    while True:
        now = (lead.leading(), reconciler.runs)
        if now != said:
            print(f"leading={now[0]} runs={now[1]}", flush=True)
            said = now
        threading.Event().wait(0.05)
""")
TENANT = """
apiVersion: dragate.io/v1alpha1
kind: Tenant
metadata: {name: lead}
spec:
  namespaces: [lead-recon]
"""
HOLDER = "claim:lead-recon/held"


def lease_holder(cluster: Cluster, name: str) -> str:
    lease = cluster.get_json("lease", name, "-n", "default")
    return str(lease["spec"]["holderIdentity"])


def leads_within(process: subprocess.Popen[str], seconds: float) -> bool:
    """Whether the candidate says it leads within `seconds`."""
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], seconds)
    return bool(ready) and process.stdout.readline().strip() == "leading"


class Candidates:
    """Candidate processes for one fresh Lease; `stop()` kills every one started."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.lease = f"dragate-leader-e2e-{os.getpid()}"
        self.started: list[subprocess.Popen[str]] = []

    def start(self, identity: str, *extra: str, script: str = CANDIDATE) -> subprocess.Popen[str]:
        argv = [sys.executable, "-c", script, str(self.cluster.kubeconfig), self.lease, identity]
        argv += extra
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        process = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env)
        self.started.append(process)
        return process

    def stop(self) -> None:
        for process in self.started:
            process.kill()
            process.wait()


@pytest.fixture
def candidates(cluster: Cluster) -> Iterator[Candidates]:
    made = Candidates(cluster)
    try:
        yield made
    finally:
        made.stop()


def test_a_killed_leader_is_replaced_within_the_lease_duration(
    cluster: Cluster, candidates: Candidates
) -> None:
    first = candidates.start("first")
    assert leads_within(first, 30), "the only candidate never led"
    second = candidates.start("second")
    assert not leads_within(second, TIMES.lease_duration + 1)
    assert lease_holder(cluster, candidates.lease) == "first"
    first.kill()
    killed = time.monotonic()
    assert leads_within(second, 3 * TIMES.lease_duration), "the second never took over"
    assert time.monotonic() - killed <= TIMES.lease_duration + 2 * TIMES.retry_period + 1
    assert lease_holder(cluster, candidates.lease) == "second"


def reconciles_within(process: subprocess.Popen[str], seconds: float) -> bool:
    """Whether the candidate says within `seconds` that it leads and has reconciled (the
    lines before, e.g. leading without a pass yet, are passed over)."""
    assert process.stdout is not None
    ends = time.monotonic() + seconds
    while (left := ends - time.monotonic()) > 0:
        ready, _, _ = select.select([process.stdout], [], [], left)
        if not ready:
            return False
        line = process.stdout.readline()
        if not line:
            return False  # it exited
        leading, runs = line.strip().split(" ")
        if leading == "leading=True" and runs != "runs=0":
            return True
    return False


def quiet_for(process: subprocess.Popen[str], seconds: float) -> bool:
    """Whether the candidate says nothing for `seconds`: it neither leads nor reconciles."""
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], seconds)
    return not ready


def claim(name: str) -> str:
    request = {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 2}}
    return json.dumps({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "lead-recon"},
        "spec": {"devices": {"requests": [request]}},
    })  # fmt: skip


def test_the_new_leader_s_reconciler_releases_a_deleted_claim_s_holder(
    crd: Cluster, candidates: Candidates
) -> None:
    """Each candidate runs a reconciler under the Lease (no periodic pass within the test):
    the leader confirms a claim's holder, the follower does nothing; once the leader is
    killed and the claim deleted, the new leader reconciles as soon as it takes over and the
    holder is released."""
    KubeLedger.from_kubeconfig(str(crd.kubeconfig)).api.request("DELETE", COLLECTION)
    crd.kubectl("create", "namespace", "lead-recon")
    try:
        crd.apply(claim("held"))
        first = candidates.start("first", TENANT, script=RECONCILING)
        assert reconciles_within(first, 30), "the leader never reconciled"
        wait_for(lambda: HOLDER in stored(crd, "lead"), timeout=10, what="holder confirmed")
        second = candidates.start("second", TENANT, script=RECONCILING)
        assert quiet_for(second, TIMES.lease_duration + 1), "the follower led or reconciled"
        assert HOLDER in stored(crd, "lead")
        first.kill()
        killed = time.monotonic()
        crd.kubectl("delete", "resourceclaim", "-n", "lead-recon", "held", "--wait=true")
        assert reconciles_within(second, 3 * TIMES.lease_duration), "no reconcile after takeover"
        assert time.monotonic() - killed <= TIMES.lease_duration + 2 * TIMES.retry_period + 1
        wait_for(lambda: HOLDER not in stored(crd, "lead"), timeout=5, what="holder released")
    finally:
        crd.kubectl("delete", "namespace", "lead-recon", "--wait=false", check=False)
