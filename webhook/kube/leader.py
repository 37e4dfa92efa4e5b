"""Which process does the cluster-wide background work: the holder of a coordination.k8s.io
Lease, elected with the official client's `kubernetes.leaderelection` (LeaseLock).

Work that must happen once per cluster, not once per replica (writing policy objects'
status and PolicyReports, reconciling the ledger, re-creating deleted managed templates,
keeping the rewrite policy), asks `leading()` and skips it otherwise; loops that wait for
leadership register `on_change` to be woken when it is gained or lost. When the leader dies,
its lease runs out and another candidate takes over within `LeaseTimes.takeover_seconds`. Each
replica runs one serving process, its one candidate (`host_pid`).

A candidate that cannot hold the Lease at all (its service account may not read, create or
update Leases in that namespace, or the namespace does not exist: `--own-namespace` left out)
would leave every pending holder unconfirmed, and the official client says so only at INFO,
on every retry. Each distinct failure is logged here once at WARNING (`failure` keeps the
latest for /readyz), again only after this candidate has led since.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException
from kubernetes.leaderelection import electionconfig, leaderelection
from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

from webhook.kube.api import KubeApi

LEASE_NAME = "dragate-leader"
log = logging.getLogger("dragate.kube.leader")


@dataclass(frozen=True)
class LeaseTimes:
    """Seconds, as client-go's defaults. A dead leader is replaced within `takeover_seconds`.

    A candidate measures the lease from when it saw the Lease last change, never from the
    holder's renewTime (the two clocks may differ), as client-go's leaderelection does; and
    it looks once every `retry_period`. So a standby sees the dead leader's last renewal up
    to one retry period after it was made, and the expiry up to one retry period after it
    came: `lease_duration + 2 * retry_period` after the leader died at most, besides the
    time the API server takes to answer those looks.
    """

    lease_duration: int = 15
    renew_deadline: int = 10
    retry_period: int = 2

    @property
    def takeover_seconds(self) -> int:
        """The most a standby waits to take the Lease over from a leader that died."""
        return self.lease_duration + 2 * self.retry_period


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
        self._failures: set[str] = set()
        self.failure = ""  # the latest reason this candidate could not hold the Lease

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
            except Exception as error:  # an election thread that dies would leave work undone
                self.failed(f"election: {error}", exc_info=True)
            self._set(False)
            threading.Event().wait(self.times.retry_period)

    def _config(self) -> electionconfig.Config:
        lock = LeaseLock(self.name, self.namespace, self.identity)  # type: ignore[no-untyped-call]
        lock.api_instance = _Reporting(lock.api_instance, self.failed)  # type: ignore[assignment]
        return electionconfig.Config(  # type: ignore[no-untyped-call]
            lock,
            lease_duration=self.times.lease_duration,
            renew_deadline=self.times.renew_deadline,
            retry_period=self.times.retry_period,
            onstarted_leading=self._started,
            onstopped_leading=self._stopped,
        )

    def failed(self, failure: str, *, exc_info: bool = False) -> None:
        """Record why the Lease could not be held; WARNING the first time it is this reason."""
        with self._lock:
            self.failure = failure
            first = failure not in self._failures
            self._failures.add(failure)
        if first:
            lease = f"{self.namespace}/{self.name}"
            log.warning(
                "cannot hold the Lease %s (no reconciler runs in this process while it "
                "cannot; check --own-namespace and the RBAC for leases): %s",
                lease, failure, exc_info=exc_info, extra={"lease": lease},
            )  # fmt: skip

    def _started(self) -> None:
        log.info("leading", extra={"lease": f"{self.namespace}/{self.name}"})
        with self._lock:
            self._failures.clear()
            self.failure = ""
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


_EXPECTED = {"read": 404, "replace": 409}
"""Answers that are part of an election: no Lease yet, another candidate's update won."""


class _Reporting:
    """The client's CoordinationV1Api as LeaseLock uses it, telling `failed` of each error the
    API server answers (LeaseLock itself only returns False, and logs at INFO)."""

    def __init__(self, api: Any, failed: Callable[[str], None]) -> None:
        self.api = api
        self._failed = failed

    def __getattr__(self, name: str) -> Callable[..., Any]:
        verb = name.split("_", 1)[0]

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return getattr(self.api, name)(*args, **kwargs)
            except ApiException as error:
                if error.status != _EXPECTED.get(verb):
                    self._failed(f"{_VERBS.get(verb, verb)}: {error.status} {error.reason}")
                raise

        return call


_VERBS = {"read": "read", "create": "create", "replace": "update"}
