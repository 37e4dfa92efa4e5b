"""Leadership against the real kube-apiserver: one candidate holds the Lease, the others wait,
and a leader killed outright is replaced within the lease duration."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from webhook.kube.api import KubeApi
from webhook.kube.leader import Leadership, LeaseTimes

from .cluster import Cluster
from .processes import wait_for

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
TIMES = LeaseTimes(lease_duration=4, renew_deadline=3, retry_period=1)
CANDIDATE = textwrap.dedent("""
    import sys, threading
    from webhook.kube.api import KubeApi
    from webhook.kube.leader import Leadership, LeaseTimes
    lead = Leadership(KubeApi.from_kubeconfig(sys.argv[1]), "default", name=sys.argv[2],
                      identity="first", times=LeaseTimes(4, 3, 1)).start()
    while not lead.leading():
        threading.Event().wait(0.05)
    print("leading", flush=True)
    threading.Event().wait(600)
""")


def lease_holder(cluster: Cluster, name: str) -> str:
    lease = cluster.get_json("lease", name, "-n", "default")
    return str(lease["spec"]["holderIdentity"])


def test_a_killed_leader_is_replaced_within_the_lease_duration(cluster: Cluster) -> None:
    name = f"dragate-leader-e2e-{os.getpid()}"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    first = subprocess.Popen(
        [sys.executable, "-c", CANDIDATE, str(cluster.kubeconfig), name],
        stdout=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        assert first.stdout is not None and first.stdout.readline().strip() == "leading"
        second = Leadership(
            KubeApi.from_kubeconfig(str(cluster.kubeconfig)), "default", name=name,
            identity="second", times=TIMES,
        ).start()  # fmt: skip
        time.sleep(TIMES.lease_duration + 1)
        assert not second.leading() and lease_holder(cluster, name) == "first"
        first.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        wait_for(second.leading, timeout=3 * TIMES.lease_duration, interval=0.05,
                 what="the second candidate to lead")  # fmt: skip
        assert time.monotonic() - killed <= TIMES.lease_duration + 2 * TIMES.retry_period + 1
        assert lease_holder(cluster, name) == "second"
    finally:
        first.kill()
        first.wait()
