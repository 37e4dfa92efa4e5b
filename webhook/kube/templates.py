"""The template keeper: puts back dragate-managed ResourceClaimTemplates that disappear.

The mutating webhook creates managed templates on demand (`KubeState.ensure_templates`) when
it rewrites a Pod. Pods created later from the same workload refer to the template by name,
so a deleted template would leave their claims uncreatable. `TemplateKeeper` remembers the
last known content of every managed template it sees (label
`app.kubernetes.io/managed-by: dragate`) and re-creates one that is gone:

- at once when the template watch reports it DELETED, retried with backoff on errors;
- in a periodic pass (every `interval` seconds, jittered) for any remembered template missing
  from the cache, which also covers deletions a broken watch never reported.

It re-creates only in a namespace that exists, is not terminating, and belongs to a tenant
under the current policies; the namespace is read fresh from the API server just before
writing, so it never fights a namespace deletion. It runs on its own daemon thread and never
blocks admission.

Every replica's keeper hears the template watch and remembers, but only the one holding the
Lease (`leading`, see `kube.background`) re-creates: one write per deleted template. A
replica that takes the Lease over re-creates at once what it heard deleted meanwhile. Overlap
while the Lease changes hands is harmless: re-creating is idempotent, because the content and
name come from the same deleted object and AlreadyExists (409) counts as success, so keepers
racing for one template make it exactly once.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from webhook.engine.tenancy import namespace_labels, resolve_tenant
from webhook.kube.api import ApiError, Backoff, Unreachable
from webhook.kube.background import BackgroundLoop, always
from webhook.kube.informer import Key
from webhook.types import MANAGED_BY_LABEL, MANAGED_BY_VALUE, FactsUnavailable, Object, PolicySet

log = logging.getLogger("dragate.kube.templates")

TEMPLATE_API_VERSION = "resource.k8s.io/v1"
REQUEST_TIMEOUT = 5.0
"""Seconds one namespace read or template create may take."""


class TemplateStore(Protocol):
    """What the keeper needs from `KubeState`: the caches, a fresh read and the writer."""

    def template(self, namespace: str, name: str) -> Object | None: ...

    def templates(self) -> Sequence[Object]: ...

    def namespace(self, name: str) -> Object | None: ...

    def read_namespace(self, name: str, timeout: float) -> Object | None: ...

    def post_template(self, namespace: str, template: Object, timeout: float) -> None: ...


class TemplateKeeper(BackgroundLoop):
    """Keeps managed templates present in tenant namespaces; `observe` is a template listener."""

    thread_name = "template-keeper"

    def __init__(
        self,
        store: TemplateStore,
        policies: Callable[[], PolicySet],
        *,
        interval: float = 60.0,
        max_delay: float = 10.0,
        leading: Callable[[], bool] = always,
    ) -> None:
        super().__init__(leading)
        self.store = store
        self.policies = policies
        self.interval = interval
        self.max_delay = max_delay
        self.restored = 0
        self.last_error = ""
        self._known: dict[Key, Object] = {}
        self._due: dict[Key, tuple[float, Backoff]] = {}
        self._lock = threading.Lock()
        self._next_sweep = 0.0  # monotonic time of the next sweep; 0: not planned yet

    # -------------------------------------------------------------- events

    def observe(self, kind: str, template: Object) -> None:
        """A KubeState template listener: remember managed templates, restore deleted ones."""
        if kind not in ("ADDED", "MODIFIED", "DELETED"):
            return
        key = _key(template)
        with self._lock:
            if not is_managed(template):
                self._known.pop(key, None)
                return
            self._known[key] = desired(template)
            if kind == "DELETED":
                self._schedule(key, time.monotonic())
        if kind == "DELETED":
            self.wake()

    def _schedule(self, key: Key, when: float) -> None:
        """Due at `when` unless already due (its backoff is kept); call with the lock held."""
        if key not in self._due:
            self._due[key] = (when, Backoff(min(0.2, self.max_delay), self.max_delay))

    # ---------------------------------------------------------------- work

    def sweep(self) -> int:
        """The periodic pass: remember what the cache holds, schedule what is missing.

        Returns how many templates were scheduled; raises FactsUnavailable when the caches
        cannot answer (nothing is scheduled from an unsynced cache).
        """
        for template in self.store.templates():
            if is_managed(template):
                with self._lock:
                    self._known[_key(template)] = desired(template)
        with self._lock:
            known = list(self._known)
        missing = [key for key in known if self.store.template(*key) is None]
        wanted = [key for key in missing if self._still_wanted(key)]
        with self._lock:
            for key in wanted:
                self._schedule(key, time.monotonic())
        return len(wanted)

    def _still_wanted(self, key: Key) -> bool:
        """Per the caches; forgets templates whose namespace is gone."""
        namespace = self.store.namespace(key[0])
        if namespace is None:
            with self._lock:
                self._known.pop(key, None)
            return False
        return self._wanted_in(key[0], namespace)

    def _wanted_in(self, name: str, namespace: Object) -> bool:
        if is_terminating(namespace):
            return False
        return resolve_tenant(self.policies(), name, namespace_labels(namespace, name)) is not None

    def restore_due(self) -> None:
        """Try every template whose time has come; reschedule the failures with backoff."""
        now = time.monotonic()
        with self._lock:
            due = [key for key, (when, _) in self._due.items() if when <= now]
        for key in due:
            if self._restore(key):
                with self._lock:
                    self._due.pop(key, None)
            else:
                with self._lock:
                    backoff = self._due[key][1]
                    self._due[key] = (time.monotonic() + backoff.next(), backoff)

    def _restore(self, key: Key) -> bool:
        """True when done (restored, present, or not wanted); False to retry later."""
        with self._lock:
            template = self._known.get(key)
        if template is None:
            return True
        try:
            return self._restore_one(key, template)
        except (ApiError, Unreachable, FactsUnavailable) as error:
            self.last_error = f"{key[0]}/{key[1]}: {type(error).__name__}: {error}"
            log.warning("cannot re-create managed ResourceClaimTemplate %s", self.last_error)
            return False

    def _restore_one(self, key: Key, template: Object) -> bool:
        namespace_name, name = key
        if self.store.template(namespace_name, name) is not None:
            return True
        namespace = self.store.read_namespace(namespace_name, REQUEST_TIMEOUT)
        if namespace is None or not self._wanted_in(namespace_name, namespace):
            return True  # the sweep forgets it once the namespace is gone
        self.store.post_template(namespace_name, template, REQUEST_TIMEOUT)
        self.restored += 1
        log.info("re-created managed ResourceClaimTemplate %s/%s", namespace_name, name)
        return True

    def pending(self) -> int:
        """How many templates wait for a (re)try."""
        with self._lock:
            return len(self._due)

    # ----------------------------------------------------------- lifecycle

    def _loop(self) -> None:
        while self._running():
            self.step()
            self._sleep(min(self._next_sweep, self._next_due()) - time.monotonic())

    def step(self) -> None:
        """A sweep when one is due (every `interval`, jittered), then the restores due."""
        now = time.monotonic()
        if self._next_sweep == 0.0:
            self._next_sweep = now + self._jittered()
        elif now >= self._next_sweep:
            self._sweep_logged()
            self._next_sweep = time.monotonic() + self._jittered()
        self._restore_logged()

    def _sweep_logged(self) -> None:
        try:
            self.sweep()
        except FactsUnavailable as error:
            log.info("template sweep skipped: %s", error)
        except Exception:  # the loop must survive a bug in one pass
            log.exception("template sweep failed")

    def _restore_logged(self) -> None:
        try:
            self.restore_due()
        except Exception:
            log.exception("template restore failed")

    def _next_due(self) -> float:
        with self._lock:
            return min((when for when, _ in self._due.values()), default=float("inf"))

    def _jittered(self) -> float:
        return self.interval * random.uniform(0.8, 1.2)


def is_managed(template: Object) -> bool:
    labels = (template.get("metadata") or {}).get("labels") or {}
    return bool(labels.get(MANAGED_BY_LABEL) == MANAGED_BY_VALUE)


def is_terminating(namespace: Object) -> bool:
    meta = namespace.get("metadata") or {}
    phase = (namespace.get("status") or {}).get("phase")
    return bool(meta.get("deletionTimestamp")) or phase == "Terminating"


def desired(template: Object) -> Object:
    """What to create again: name, namespace, labels, annotations and spec; nothing server-set."""
    meta = template.get("metadata") or {}
    kept = ("name", "namespace", "labels", "annotations")
    return {
        "apiVersion": TEMPLATE_API_VERSION,
        "kind": "ResourceClaimTemplate",
        "metadata": {k: meta[k] for k in kept if meta.get(k)},
        "spec": template.get("spec") or {},
    }


def _key(obj: Object) -> Key:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace", "")), str(meta.get("name", ""))
