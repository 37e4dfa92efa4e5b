"""Cluster facts in a cluster: watch caches of the kinds the engine reads, and the template writer.

`KubeState` is the live twin of `SnapshotState`: the same five kinds, kept current by one
list+watch thread each (`informer.Informer`), with indexes so an admission never scans.
Threads are started by `start()`, never in the constructor, because gunicorn forks its worker
after the app is imported and threads do not survive a fork.

A cache that has not synced yet, or has not reached the API server for `stale_after`
seconds, refuses to answer (`FactsUnavailable`): a quota check on stale facts could admit
what the cluster would refuse, so the caller fails closed instead.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from webhook.kube.api import ApiError, KubeApi, Unreachable
from webhook.kube.gangworkloads import get_workload, list_workloads
from webhook.kube.informer import Informer, Listener, Resource
from webhook.types import FactsUnavailable, Object

__all__ = ["FactsUnavailable", "KubeState"]

RESOURCE_API = "/apis/resource.k8s.io/v1"
NAMESPACES = Resource("Namespace", "/api/v1/namespaces")
CLAIMS = Resource("ResourceClaim", f"{RESOURCE_API}/resourceclaims")
TEMPLATES = Resource("ResourceClaimTemplate", f"{RESOURCE_API}/resourceclaimtemplates")
CLASSES = Resource("DeviceClass", f"{RESOURCE_API}/deviceclasses")
SLICES = Resource("ResourceSlice", f"{RESOURCE_API}/resourceslices")
KINDS = (NAMESPACES, CLAIMS, TEMPLATES, CLASSES, SLICES)

TEMPLATE_TIMEOUT = 2.0
"""Seconds the mutating webhook may spend creating managed templates for one Pod."""
SLOW_TEMPLATE_SECONDS = 0.5
"""A template creation this slow is logged: the step a slow /mutate review waited on."""
log = logging.getLogger("dragate.kube")


class KubeState:
    """A ClusterState backed by watch caches; `start()` it in each process that serves."""

    def __init__(
        self,
        api: KubeApi,
        *,
        stale_after: float = 10.0,
        watch_seconds: int = 240,
        claim_listener: Listener | None = None,
        template_listener: Listener | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.api = api
        self.stale_after = stale_after
        self._clock = clock  # the informers' own clock: time.monotonic
        self._healthy_until = 0.0
        listeners = {CLAIMS.kind: claim_listener, TEMPLATES.kind: template_listener}
        self._caches = {
            r.kind: Informer(api, r, watch_seconds=watch_seconds, listener=listeners.get(r.kind))
            for r in KINDS
        }
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._start_lock = threading.Lock()

    @classmethod
    def from_kubeconfig(cls, path: str | None = None, **options: Any) -> KubeState:
        return cls(KubeApi.from_kubeconfig(path), **options)

    @classmethod
    def in_cluster(cls, **options: Any) -> KubeState:
        return cls(KubeApi.in_cluster(), **options)

    # ------------------------------------------------------------- lifecycle

    def start(self) -> KubeState:
        """Start one daemon thread per kind; idempotent, so a lazy caller may call it often."""
        with self._start_lock:
            if self._threads:
                return self
            for kind, cache in self._caches.items():
                thread = threading.Thread(
                    target=cache.run, args=(self._stop,), name=f"kube-{kind}", daemon=True
                )
                thread.start()
                self._threads.append(thread)
        return self

    def stop(self, timeout: float = 1.0) -> None:
        """End the threads: open watches are closed, so none waits for its next event."""
        self._stop.set()
        for cache in self._caches.values():
            cache.restart_watch()
        for thread in self._threads:
            thread.join(timeout)

    def synced(self) -> bool:
        """Every cache has listed once and none has been failing for `stale_after` seconds."""
        return not self._problems()

    def wait_synced(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        for cache in self._caches.values():
            if not cache.synced.wait(max(0.0, deadline - time.monotonic())):
                return False
        return self.synced()

    def health(self) -> dict[str, Any]:
        """For /readyz: overall readiness and, per kind, objects, relists and the last error."""
        kinds = {
            kind: {
                "synced": cache.synced.is_set(),
                "objects": len(cache.items()),
                "relists": cache.relists,
                "resourceVersion": cache.resource_version,
                "failingFor": _age(cache.failing_since),
                "lastError": cache.last_error,
            }
            for kind, cache in self._caches.items()
        }
        problems = self._problems()
        return {"ready": not problems, "problems": problems, "kinds": kinds}

    def _problems(self) -> list[str]:
        """What keeps the caches from answering; none found, they are not asked again until
        one could first be stale: `stale_after` from now, or sooner for one failing already.
        (Exact: a cache is stale only after failing that long, and `synced` never clears.
        A review reads three caches; asking all five on every read would cost each review.)"""
        now = self._clock()
        if now < self._healthy_until:
            return []
        problems, failing_since = [], []
        for kind, cache in self._caches.items():
            failing = cache.failing_since
            if not cache.synced.is_set():
                problems.append(f"{kind} cache not synced yet {cache.last_error}".strip())
            elif failing is not None and now - failing > self.stale_after:
                problems.append(f"{kind} cache stale for {now - failing:.0f}s: {cache.last_error}")
            elif failing is not None:
                failing_since.append(failing)
        if not problems:
            self._healthy_until = min([now, *failing_since]) + self.stale_after
        return problems

    def _cache(self, kind: str) -> Informer:
        problems = self._problems()
        if problems:
            raise FactsUnavailable("cluster state unavailable: " + "; ".join(problems))
        return self._caches[kind]

    # ----------------------------------------------------------- ClusterState

    def namespace(self, name: str) -> Object | None:
        return self._cache("Namespace").get("", name)

    def template(self, namespace: str, name: str) -> Object | None:
        return self._cache("ResourceClaimTemplate").get(namespace, name)

    def device_classes(self) -> Mapping[str, Object]:
        return {str(c["metadata"]["name"]): c for c in self._cache("DeviceClass").items()}

    def claims(self) -> Sequence[Object]:
        return self._cache("ResourceClaim").items()

    def claims_in(self, namespace: str) -> Sequence[Object]:
        return self._cache("ResourceClaim").in_namespace(namespace)

    def namespaces(self) -> Sequence[Object]:
        return self._cache("Namespace").items()

    def templates(self) -> Sequence[Object]:
        return self._cache("ResourceClaimTemplate").items()

    def slices(self) -> Sequence[Object]:
        return self._cache("ResourceSlice").items()

    def workloads(self) -> Sequence[Object]:
        """The gang workloads and their Pods, listed now (`kube.gangworkloads`: not watched, and
        read only by the reconciler); raises FactsUnavailable when they cannot be listed."""
        return list_workloads(self.api)

    def workload(self, namespace: str, kind: str, name: str) -> Object | None:
        """Read now: only a PodGroup's creation and its Pods ask (`kube.gangworkloads`)."""
        return get_workload(self.api, namespace, kind, name)

    # ------------------------------------------------------ managed templates

    def ensure_templates(
        self,
        namespace: str,
        templates: Sequence[Object],
        dry_run: bool,
        seconds: float = TEMPLATE_TIMEOUT,
    ) -> None:
        """Create the managed ResourceClaimTemplates a rewritten Pod refers to (a TemplateSink).

        Existing ones are left alone: a managed template's name is derived from its content.
        Raises FactsUnavailable when they cannot be made within TEMPLATE_TIMEOUT or `seconds`
        (what the review has left), whichever ends first: the pipeline then leaves the Pod
        unrewritten with a warning (never pointing at a template that does not exist), and
        validation still judges it as its rewrite.
        """
        if dry_run:
            return
        deadline = time.monotonic() + min(TEMPLATE_TIMEOUT, seconds)
        cache = self._caches["ResourceClaimTemplate"]
        for template in templates:
            name = str((template.get("metadata") or {}).get("name", ""))
            if cache.synced.is_set() and cache.get(namespace, name) is not None:
                continue
            self._create_template(namespace, template, deadline)

    def _create_template(self, namespace: str, template: Object, deadline: float) -> None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise FactsUnavailable("no time left to create managed ResourceClaimTemplates")
        started = time.monotonic()
        try:
            self.post_template(namespace, template, remaining)
        except (ApiError, Unreachable) as error:
            raise FactsUnavailable(f"cannot create ResourceClaimTemplate: {error}") from error
        finally:
            _note_slow_creation(namespace, template, time.monotonic() - started)

    def post_template(self, namespace: str, template: Object, timeout: float) -> None:
        """Create one template and cache it; AlreadyExists (409) is success.

        Raises ApiError or Unreachable: the caller decides between failing and retrying.
        """
        body = {
            **template,
            "metadata": {**(template.get("metadata") or {}), "namespace": namespace},
        }
        path = f"{RESOURCE_API}/namespaces/{namespace}/resourceclaimtemplates"
        try:
            created = self.api.request("POST", path, body=body, timeout=timeout)
        except ApiError as error:
            if error.status == 409:
                return  # AlreadyExists: made by another replica or request
            raise
        self._caches["ResourceClaimTemplate"].upsert(created)

    def read_namespace(self, name: str, timeout: float) -> Object | None:
        """The Namespace as the API server has it now (not the cache), None when absent.

        Raises ApiError or Unreachable.
        """
        try:
            return self.api.request("GET", f"{NAMESPACES.path}/{name}", timeout=timeout)
        except ApiError as error:
            if error.status == 404:
                return None
            raise


def _age(since: float | None) -> float | None:
    return None if since is None else round(time.monotonic() - since, 1)


def _note_slow_creation(namespace: str, template: Object, seconds: float) -> None:
    """Name the step a slow rewrite waited on. The usual cause in url mode: the API server
    sent the creation back to this dragate (the chart's `ownUsername` value left unset)."""
    if seconds < SLOW_TEMPLATE_SECONDS:
        return
    name = str((template.get("metadata") or {}).get("name", ""))
    fields = {"namespace": namespace, "template": name, "seconds": round(seconds, 3)}
    log.warning(
        "creating a managed ResourceClaimTemplate was slow; if dragate reviews its own "
        "creations (url mode), set the chart's webhook.ownUsername to its user",
        extra={"fields": fields},
    )
