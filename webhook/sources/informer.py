"""Raw JSON access to the Kubernetes API and a list+watch cache for one resource.

The generated models of the `kubernetes` client are slow to build and rename fields
(`device_class_name`); the engine wants the objects exactly as the API server sends them.
So requests go through the client's configuration, auth and connection pool, but bodies are
plain JSON. `Informer` is client-go's reflector in small: list, then watch from the list's
resourceVersion, resume after a dropped watch, relist on 410 Gone or every `relist_seconds`,
and back off on errors, so a busy or restarting API server is never hammered.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import urllib3
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from webhook.types import Object

log = logging.getLogger(__name__)

Key = tuple[str, str]
"""(namespace, name); namespace is "" for cluster-scoped objects."""


class ApiError(Exception):
    """The API server answered with an error status (404, 409, 410, 422, ...)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


class Unreachable(Exception):
    """No answer from the API server: refused, reset, timed out or TLS failure."""


class KubeApi:
    """JSON requests with the `kubernetes` client's config; never retries on its own."""

    def __init__(self, api_client: Any, timeout: float = 5.0) -> None:
        self._client = api_client
        self.timeout = timeout

    @classmethod
    def from_kubeconfig(cls, path: str | None = None, context: str | None = None) -> KubeApi:
        configuration = k8s.Configuration()
        k8s_config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=path, context=context, client_configuration=configuration
        )
        return cls.from_configuration(configuration)

    @classmethod
    def in_cluster(cls) -> KubeApi:
        configuration = k8s.Configuration()
        k8s_config.load_incluster_config(  # type: ignore[no-untyped-call]
            client_configuration=configuration
        )
        return cls.from_configuration(configuration)

    @classmethod
    def from_configuration(cls, configuration: Any) -> KubeApi:
        """Our own retry loops bound every wait, so urllib3 must not retry behind them."""
        configuration.retries = 0
        configuration.connection_pool_maxsize = max(configuration.connection_pool_maxsize, 16)
        return cls(k8s.ApiClient(configuration))

    def server_identity(self) -> str:
        """The API server's URL and a digest of the CA that vouches for it: which cluster
        this is, also when a new cluster comes up at the same address."""
        configuration = self._client.configuration
        ca = b""
        if configuration.ssl_ca_cert:
            with contextlib.suppress(OSError), open(configuration.ssl_ca_cert, "rb") as file:
                ca = file.read()
        return f"{configuration.host} {hashlib.sha256(ca).hexdigest()}"

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: Object | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """The decoded JSON answer; raises ApiError for an error status, Unreachable."""
        response = self._send(method, path, query, body, timeout or self.timeout)
        try:
            data = response.read()
        except urllib3.exceptions.HTTPError as error:
            raise Unreachable(f"{method} {path}: {error}") from error
        finally:
            response.response.release_conn()
        if not 200 <= response.status < 300:
            raise ApiError(response.status, _status_message(data))
        decoded: dict[str, Any] = json.loads(data)
        return decoded

    def watch(self, path: str, resource_version: str, timeout_seconds: int) -> WatchStream:
        """Watch events after `resource_version` until the server ends the watch."""
        query = {
            "watch": "true",
            "allowWatchBookmarks": "true",
            "resourceVersion": resource_version,
            "timeoutSeconds": str(timeout_seconds),
        }
        timeout = (self.timeout, timeout_seconds + 30.0)
        response = self._send("GET", path, query, None, timeout)
        if not 200 <= response.status < 300:
            try:
                raise ApiError(response.status, _status_message(response.read()))
            finally:
                response.response.release_conn()
        return WatchStream(response.response, path)

    def _send(
        self,
        method: str,
        path: str,
        query: Mapping[str, str] | None,
        body: Object | None,
        timeout: float | tuple[float, float],
    ) -> Any:
        headers = {"Accept": "application/json", "Content-Type": "application/json"}
        try:
            params = self._client.param_serialize(
                method,
                path,
                query_params=list((query or {}).items()),
                header_params=headers,
                body=body,
                auth_settings=["BearerToken"],
            )
            return self._client.call_api(*params, _request_timeout=timeout)
        except (urllib3.exceptions.HTTPError, OSError) as error:
            raise Unreachable(f"{method} {path}: {error}") from error
        except k8s.ApiException as error:  # the client's wrapper for TLS failures
            raise Unreachable(f"{method} {path}: {error.reason}") from error


def _status_message(data: bytes) -> str:
    try:
        return str(json.loads(data).get("message") or data[:200].decode(errors="replace"))
    except (ValueError, AttributeError):
        return data[:200].decode(errors="replace")


class WatchStream:
    """The events of one open watch; `close()` from another thread ends the iteration."""

    def __init__(self, response: Any, path: str) -> None:
        self._response = response
        self._path = path
        self.closed = False

    def __iter__(self) -> Iterator[dict[str, Any]]:
        buffer = b""
        try:
            for chunk in self._response.stream(decode_content=True):
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if line.strip():
                        yield json.loads(line)
        except (urllib3.exceptions.HTTPError, OSError) as error:
            if not self.closed:
                raise Unreachable(f"watch {self._path}: {error}") from error
        finally:
            self._response.release_conn()

    def close(self) -> None:
        """Idempotent: stop() and the watch thread may both close the same stream."""
        self.closed = True
        # urllib3 raises when the stream already ended (closed, or released to the pool)
        with contextlib.suppress(ValueError, RuntimeError, OSError):
            self._response.shutdown()


@dataclass(frozen=True)
class Resource:
    """A list path, e.g. `/apis/resource.k8s.io/v1/resourceclaims`, and its kind."""

    kind: str
    path: str


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
        relist_seconds: float = 300.0,
        watch_seconds: int = 240,
        listener: Listener | None = None,
    ) -> None:
        self.api = api
        self.resource = resource
        self.relist_seconds = relist_seconds
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
        """One list, then watches resumed from the last resourceVersion until relist time."""
        self.relist()
        backoff.reset()
        relist_at = time.monotonic() + self.relist_seconds * random.uniform(0.9, 1.1)
        while not stop.is_set() and time.monotonic() < relist_at:
            try:
                self._watch_once(stop)
                backoff.reset()
            except Gone:
                return
            except (Unreachable, ApiError) as error:
                self._failed(error)
                stop.wait(backoff.next())

    def relist(self) -> None:
        """Replace the cache with a fresh, paginated list."""
        objects: list[Object] = []
        query = {"limit": "500"}
        while True:
            page = self.api.request("GET", self.resource.path, query=query)
            stamp = {"kind": self.resource.kind, "apiVersion": page.get("apiVersion", "")}
            objects += [{**item, **stamp} for item in page.get("items") or []]
            meta = page.get("metadata") or {}
            if not meta.get("continue"):
                break
            query = {"limit": "500", "continue": str(meta["continue"])}
        self._replace(objects, str(meta.get("resourceVersion", "")))
        self._healthy()
        self.synced.set()
        self._notify("RELISTED", {})

    def _watch_once(self, stop: threading.Event) -> None:
        seconds = max(1, int(self.watch_seconds * random.uniform(0.8, 1.0)))
        try:
            self._stream = self.api.watch(self.resource.path, self.resource_version, seconds)
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


def _key(obj: Object) -> Key:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace", "")), str(meta.get("name", ""))


class Backoff:
    """Exponential backoff with jitter: 0.2 s doubling up to 30 s."""

    def __init__(self, first: float = 0.2, ceiling: float = 30.0) -> None:
        self.first, self.ceiling = first, ceiling
        self._delay = first

    def next(self) -> float:
        delay = self._delay
        self._delay = min(self._delay * 2, self.ceiling)
        return delay * random.uniform(0.5, 1.0)

    def reset(self) -> None:
        self._delay = self.first
