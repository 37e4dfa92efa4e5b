"""Watch caches of the dragate.io policy objects (Tenant, DeviceClassPolicy, ...).

The kinds are CRDs a cluster may not have: the group's discovery document says which are
served, and only those are watched. A kind not served holds no objects (nothing to enforce
from it); discovery is asked again until every kind is served, so CRDs installed after the
webhook start being enforced without a restart. Until discovery has answered and every
served kind has been listed once, `objects()` raises FactsUnavailable: an empty set would
mean "no quota" and admit what a tenant's quota forbids.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Hashable
from dataclasses import dataclass

from webhook.kube.api import ApiError, KubeApi, Unreachable
from webhook.kube.background import BackgroundLoop
from webhook.kube.informer import Informer, Resource
from webhook.types import FactsUnavailable, Object

GROUP_PATH = "/apis/dragate.io/v1alpha1"
POLICY_KINDS = (
    Resource("Tenant", f"{GROUP_PATH}/tenants"),
    Resource("DeviceClassPolicy", f"{GROUP_PATH}/deviceclasspolicies"),
    Resource("LegacyResourceMapping", f"{GROUP_PATH}/legacyresourcemappings"),
    Resource("Settings", f"{GROUP_PATH}/settings"),
)
log = logging.getLogger("dragate.kube.policyobjects")


def _policy_version(obj: Object) -> tuple[str, object, str]:
    """What a policy is, as opposed to its status: name, generation (spec) and metadata."""
    metadata = obj.get("metadata") or {}
    marks = repr((metadata.get("labels"), metadata.get("annotations")))
    return str(metadata.get("name")), metadata.get("generation"), marks


def plural(resource: Resource) -> str:
    return resource.path.rsplit("/", 1)[1]


@dataclass(frozen=True)
class Discovery:
    """Which policy kinds the API server serves; `answered` is False until it has said."""

    answered: bool = False
    served: frozenset[str] = frozenset()
    error: str = ""


class PolicyObjects(BackgroundLoop):
    """The cluster's policy objects; `start()` it in each process that serves."""

    thread_name = "policy-objects"

    def __init__(self, api: KubeApi, *, rediscover_seconds: float = 30.0) -> None:
        super().__init__()
        self.api = api
        self.rediscover_seconds = rediscover_seconds
        self.discovery = Discovery()
        self._informers: dict[str, Informer] = {}
        self._lock = threading.Lock()
        self._seen: dict[str, tuple[int, Hashable]] = {}

    def objects(self) -> tuple[Object, ...]:
        """Every policy object of the served kinds; FactsUnavailable until all are listed."""
        problem = self._unsynced()
        if problem:
            raise FactsUnavailable(problem)
        return tuple(obj for informer in self._watched() for obj in informer.items())

    def wait_synced(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for every served kind to be listed."""
        deadline = time.monotonic() + timeout
        while self._unsynced() and time.monotonic() < deadline:
            self._stop.wait(0.05)
        return not self._unsynced()

    def fingerprint(self) -> Hashable:
        """Changes when a policy changes (an object added, deleted, or its spec or metadata
        changed: a new generation or resourceVersion of a kind's set), the served kinds or a
        cache's sync state; not when only a status is written, so the status writer's own
        writes never reload the policies. Each kind's part is kept while its cache is
        unchanged."""
        return (
            self.discovery.served,
            tuple((i.resource.kind, i.synced.is_set(), self._versions(i)) for i in self._watched()),
        )

    def _versions(self, informer: Informer) -> Hashable:
        kind = informer.resource.kind
        changes, versions = self._seen.get(kind, (-1, None))
        if changes != informer.changes:
            versions = frozenset(_policy_version(o) for o in informer.items())
            self._seen[kind] = (informer.changes, versions)
        return versions

    def ready(self) -> tuple[bool, str]:
        """A /readyz check: every served kind listed."""
        return not self._unsynced(), "policy objects"

    def _unsynced(self) -> str:
        discovery = self.discovery
        if not discovery.answered:
            return f"dragate.io policy kinds not discovered yet {discovery.error}".strip()
        waiting = [i for i in self._watched() if not i.synced.is_set()]
        return "; ".join(f"{i.resource.kind} objects not listed yet {i.last_error}".strip()
                         for i in waiting)  # fmt: skip

    def _watched(self) -> list[Informer]:
        with self._lock:
            return list(self._informers.values())

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._discover()
            if len(self.discovery.served) == len(POLICY_KINDS):
                return  # every kind watched; the informers carry on alone
            self._sleep(self.rediscover_seconds if self.discovery.answered else 1.0)

    def _discover(self) -> None:
        try:
            found = self.api.request("GET", GROUP_PATH)
        except ApiError as err:
            if err.status != 404:
                self.discovery = Discovery(self.discovery.answered, self.discovery.served, str(err))
                return
            found = {}  # the group is not served: no CRD installed
        except Unreachable as err:
            self.discovery = Discovery(self.discovery.answered, self.discovery.served, str(err))
            return
        names = {str(r.get("name")) for r in found.get("resources") or []}
        served = frozenset(r.kind for r in POLICY_KINDS if plural(r) in names)
        self._watch(served - self.discovery.served)
        self.discovery = Discovery(True, served | self.discovery.served)

    def _watch(self, kinds: frozenset[str]) -> None:
        for resource in (r for r in POLICY_KINDS if r.kind in kinds):
            informer = Informer(self.api, resource)
            with self._lock:
                self._informers[resource.kind] = informer
            threading.Thread(
                target=informer.run, args=(self._stop,), name=f"kube-{resource.kind}", daemon=True
            ).start()
            log.info("watching policy objects", extra={"kind": resource.kind})

    def stop(self, timeout: float = 1.0) -> None:
        super().stop(timeout)
        for informer in self._watched():
            informer.restart_watch()
