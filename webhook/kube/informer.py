"""A list+watch cache for one resource of the Kubernetes API.

`Informer` is client-go's reflector in small: list, then watch from the list's
resourceVersion, resume after a dropped or ended watch, and back off on errors, so a busy or
restarting API server is never hammered. As in client-go, it lists again only when a watch
cannot resume (410 Gone, the version compacted away), never on a timer: at 100,000 claims a
list is seconds of the API server's CPU and of the process's, and a watch resumed from the
last resourceVersion misses nothing.

Objects are kept without `metadata.managedFields`, as controller-runtime's
`TransformStripManagedFields` keeps them: nothing dragate judges reads them, and on a small
object such as a ResourceClaim they are over a third of what the cache holds.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from webhook.kube.api import ApiError, Backoff, KubeApi, Unreachable, WatchStream
from webhook.types import Object

log = logging.getLogger("dragate.kube.informer")

Key = tuple[str, str]
"""(namespace, name); namespace is "" for cluster-scoped objects."""


@dataclass(frozen=True)
class Resource:
    """A list path, e.g. `/apis/resource.k8s.io/v1/resourceclaims`, its kind, and a label
    selector narrowing the list and watch ("" for every object)."""

    kind: str
    path: str
    label_selector: str = ""


class Gone(Exception):
    """The resourceVersion we watch from was compacted away: relist."""


Listener = Callable[[str, Object], None]
"""Called with the event type (ADDED, MODIFIED, DELETED, RELISTED) and the object."""


class Informer:
    """A cache of one resource kept current by list + watch; safe to read from any thread."""

    def __init__(
        self,
        api: KubeApi,
        resource: Resource,
        *,
        watch_seconds: int = 240,
        listener: Listener | None = None,
    ) -> None:
        self.api = api
        self.resource = resource
        self.watch_seconds = watch_seconds
        self._listener = listener
        self._lock = threading.Lock()
        self._objects: dict[Key, Object] = {}
        self._by_namespace: dict[str, dict[str, Object]] = {}
        self._version = 0
        self._snapshot: tuple[int, tuple[Object, ...]] = (-1, ())
        self.resource_version = ""
        self.synced = threading.Event()
        self.failing_since: float | None = None
        self.last_error = ""
        self.relists = 0
        self._stream: WatchStream | None = None

    # ----------------------------------------------------------------- reads

    @property
    def changes(self) -> int:
        """A counter moved by every change to the cache: equal means nothing changed."""
        return self._version

    def get(self, namespace: str, name: str) -> Object | None:
        with self._lock:
            return self._objects.get((namespace, name))

    def in_namespace(self, namespace: str) -> list[Object]:
        with self._lock:
            return list(self._by_namespace.get(namespace, {}).values())

    def items(self) -> tuple[Object, ...]:
        """Every object; the tuple is rebuilt only after a change, so repeated reads are cheap."""
        with self._lock:
            version, items = self._snapshot
            if version != self._version:
                items = tuple(self._objects.values())
                self._snapshot = (self._version, items)
            return items

    # ---------------------------------------------------------------- writes

    def upsert(self, obj: Object) -> None:
        """Store an object we just wrote, so readers see it before its watch event arrives."""
        with self._lock:
            self._put(obj)

    def _put(self, obj: Object) -> None:
        obj = without_managed_fields(obj)
        namespace, name = _key(obj)
        self._objects[(namespace, name)] = obj
        self._by_namespace.setdefault(namespace, {})[name] = obj
        self._version += 1

    def _delete(self, obj: Object) -> None:
        namespace, name = _key(obj)
        self._objects.pop((namespace, name), None)
        self._by_namespace.get(namespace, {}).pop(name, None)
        self._version += 1

    def _replace(self, objects: list[Object], resource_version: str) -> None:
        with self._lock:
            self._objects, self._by_namespace = {}, {}
            for obj in objects:
                self._put(obj)
            self.resource_version = resource_version
            self.relists += 1

    # ------------------------------------------------------------------ loop

    def run(self, stop: threading.Event) -> None:
        """List and watch until `stop` is set; never raises."""
        backoff = Backoff()
        while not stop.is_set():
            try:
                self._list_and_watch(stop, backoff)
            except Exception as error:  # a cache thread must outlive every failure
                self._failed(error)
                stop.wait(backoff.next())

    def _list_and_watch(self, stop: threading.Event, backoff: Backoff) -> None:
        """One list, then watches resumed from the last resourceVersion until one cannot be."""
        self.relist()
        backoff.reset()
        while not stop.is_set():
            try:
                self._watch_once(stop)
                backoff.reset()
            except Gone:
                return
            except (Unreachable, ApiError) as error:
                self._failed(error)
                stop.wait(backoff.next())

    def relist(self) -> None:
        """Replace the cache with a fresh, paginated list.

        An object listed at the resourceVersion already cached is kept as the very object
        cached: relisting a large, mostly unchanged cluster holds one page more than the
        cache rather than a second cache, and what is remembered of an object by identity
        (engine/heldmemo.py) stays valid across the relist."""
        objects: list[Object] = []
        selector = {"labelSelector": self.resource.label_selector}
        query = {"limit": "500", **(selector if self.resource.label_selector else {})}
        while True:
            page = self.api.request("GET", self.resource.path, query=query)
            stamp = {"kind": self.resource.kind, "apiVersion": page.get("apiVersion", "")}
            with self._lock:
                objects += [self._cached_or(item, stamp) for item in page.get("items") or []]
            meta = page.get("metadata") or {}
            if not meta.get("continue"):
                break
            query = {**query, "continue": str(meta["continue"])}
        self._replace(objects, str(meta.get("resourceVersion", "")))
        self._healthy()
        self.synced.set()
        self._notify("RELISTED", {})

    def _cached_or(self, item: Object, stamp: Object) -> Object:
        """The cached object when `item` is it at the same resourceVersion, else `item`
        stamped with its kind and apiVersion (the list leaves them out of its items)."""
        cached = self._objects.get(_key(item))
        version = _version(item)
        if cached is not None and version and _version(cached) == version:
            return cached
        return without_managed_fields({**item, **stamp})

    def _watch_once(self, stop: threading.Event) -> None:
        seconds = max(1, int(self.watch_seconds * random.uniform(0.8, 1.0)))
        try:
            self._stream = self.api.watch(
                self.resource.path, self.resource_version, seconds, self.resource.label_selector
            )
            if stop.is_set():  # stop() ran before the stream was visible to it
                self._stream.close()
            self._healthy()
            for event in self._stream:
                self._healthy()
                self._apply(event)
                if stop.is_set():
                    return
        except ApiError as error:
            if error.status == 410:
                raise Gone from error
            raise
        finally:
            self._stream = None

    def restart_watch(self, from_version: str | None = None) -> None:
        """End the open watch; the next one starts from `from_version` if given.

        Used on shutdown, so a thread blocked reading a quiet watch ends at once.
        """
        if from_version is not None:
            with self._lock:
                self.resource_version = from_version
        stream = self._stream
        if stream is not None:
            stream.close()

    def _apply(self, event: Mapping[str, Any]) -> None:
        kind, obj = str(event.get("type")), dict(event.get("object") or {})
        if kind == "ERROR":
            if obj.get("code") == 410:
                raise Gone
            raise ApiError(int(obj.get("code") or 500), str(obj.get("message")))
        resource_version = str((obj.get("metadata") or {}).get("resourceVersion", ""))
        with self._lock:
            if kind in ("ADDED", "MODIFIED"):
                self._put(dict(obj, kind=self.resource.kind))
            elif kind == "DELETED":
                self._delete(obj)
            if resource_version:
                self.resource_version = resource_version
        if kind != "BOOKMARK":
            self._notify(kind, obj)

    def _notify(self, kind: str, obj: Object) -> None:
        if self._listener is not None:
            try:
                self._listener(kind, obj)
            except Exception:
                log.exception("listener of %s failed", self.resource.kind)

    def _healthy(self) -> None:
        self.failing_since = None

    def _failed(self, error: Exception) -> None:
        if self.failing_since is None:
            self.failing_since = time.monotonic()
        self.last_error = f"{type(error).__name__}: {error}"
        log.warning("%s cache: %s", self.resource.kind, self.last_error)


def without_managed_fields(obj: Object) -> Object:
    """`obj` itself, or a shallow copy whose metadata leaves out `managedFields`."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or "managedFields" not in meta:
        return obj
    return {**obj, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}


def _version(obj: Object) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def _key(obj: Object) -> Key:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace", "")), str(meta.get("name", ""))
