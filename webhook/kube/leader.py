"""Which process does the cluster-wide background work: the holder of a coordination.k8s.io
Lease, elected with the official client's `kubernetes.leaderelection` (LeaseLock).

Work that must happen once per cluster, not once per replica (writing policy objects'
status and PolicyReports, reconciling the ledger, re-creating deleted managed templates,
keeping the rewrite policy), asks `leading()` and skips it otherwise; loops that wait for
leadership register `on_change` to be woken when it is gained or lost. When the leader dies,
its lease runs out and another candidate takes over within `lease_duration` seconds. Each
replica runs one serving process, its one candidate (`host_pid`).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass

from kubernetes import client as k8s
from kubernetes.leaderelection import electionconfig, leaderelection
from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

from webhook.kube.api import KubeApi

LEASE_NAME = "dragate-leader"
log = logging.getLogger("dragate.kube.leader")


@dataclass(frozen=True)
class LeaseTimes:
    """Seconds, as client-go's defaults: a dead leader is replaced within `lease_duration`."""

    lease_duration: int = 15
    renew_deadline: int = 10
    retry_period: int = 2


def host_pid() -> str:
    """This process's candidate name: the pod's host name (the pod name) and the pid."""
    return f"{socket.gethostname()}_{os.getpid()}"


class Leadership:
    """Campaigns for the lease in a daemon thread; `start()` it after fork."""

    def __init__(
        self,
        api: KubeApi,
        namespace: str,
        *,
        name: str = LEASE_NAME,
        identity: str | None = None,
        times: LeaseTimes = LeaseTimes(),
    ) -> None:
        self.namespace = namespace or "default"
        self.name = name
        self.identity = identity or host_pid()
        self.times = times
        self._api = api
        self._leading = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._listeners: list[Callable[[], None]] = []

    def leading(self) -> bool:
        return self._leading.is_set()

    def on_change(self, listener: Callable[[], None]) -> None:
        """Call `listener` (quick, e.g. `BackgroundLoop.wake`) whenever leadership is gained
        or lost, on the election thread."""
        self._listeners.append(listener)

    def start(self) -> Leadership:
        with self._lock:
            if self._thread is None:
                # LeaseLock talks through the default client configuration: this cluster's.
                k8s.Configuration.set_default(self._api.configuration)
                self._thread = threading.Thread(target=self._campaign, name="leader", daemon=True)
                self._thread.start()
        return self

    def _campaign(self) -> None:
        """Run elections forever: `run()` returns when leadership is lost; try again."""
        while True:
            try:
                leaderelection.LeaderElection(self._config()).run()  # type: ignore[no-untyped-call]
            except Exception:  # an election thread that dies would leave the work undone
                log.exception("leader election failed; campaigning again")
            self._set(False)
            threading.Event().wait(self.times.retry_period)

    def _config(self) -> electionconfig.Config:
        lock = LeaseLock(self.name, self.namespace, self.identity)  # type: ignore[no-untyped-call]
        return electionconfig.Config(  # type: ignore[no-untyped-call]
            lock,
            lease_duration=self.times.lease_duration,
            renew_deadline=self.times.renew_deadline,
            retry_period=self.times.retry_period,
            onstarted_leading=self._started,
            onstopped_leading=self._stopped,
        )

    def _started(self) -> None:
        log.info("leading", extra={"lease": f"{self.namespace}/{self.name}"})
        self._set(True)

    def _stopped(self) -> None:
        log.info("no longer leading", extra={"lease": f"{self.namespace}/{self.name}"})
        self._set(False)

    def _set(self, leading: bool) -> None:
        """Record the change and tell the listeners (only when it is one)."""
        if leading == self._leading.is_set():
            return
        if leading:
            self._leading.set()
        else:
            self._leading.clear()
        for listener in list(self._listeners):
            try:
                listener()
            except Exception:  # a listener must not cost the election thread
                log.exception("leadership listener failed")
