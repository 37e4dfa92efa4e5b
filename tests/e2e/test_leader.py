"""Leadership against the real kube-apiserver: one candidate holds the Lease, the others wait,
and a leader killed outright is replaced within the lease duration. Each candidate is a
process of its own, as in a deployment, and none outlives the test."""

from __future__ import annotations

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

from .cluster import Cluster

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

    def start(self, identity: str) -> subprocess.Popen[str]:
        argv = [sys.executable, "-c", CANDIDATE, str(self.cluster.kubeconfig), self.lease, identity]
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
