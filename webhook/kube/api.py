"""Raw JSON access to the Kubernetes API: requests, watch streams, and retry backoff.

The generated models of the `kubernetes` client are slow to build and rename fields
(`device_class_name`); the engine wants the objects exactly as the API server sends them.
So requests go through the client's configuration, auth and connection pool, but bodies are
plain JSON. What the API server sends is read with orjson: a fifth of `json`'s time on a
TenantUsage's one long string, and every watch event of the caches is read this way. It
reads integers past 64 bits as floats, which is what the API server stores them as (it
decodes a custom resource's numbers as int64 or float64), so nothing it sends is read
differently.

Relies on (checked with kubernetes 37.0.2; canaries: tests/canary/test_kubernetes.py):
- `kubernetes.client.ApiClient.param_serialize`: builds a request (the generated APIs' helper).
- `kubernetes.client.ApiClient.call_api`: sends it, with `_request_timeout`.
- `kubernetes.client.rest.RESTResponse.response`: the unread urllib3 response a watch streams.
- `kubernetes.client.Configuration.retries, connection_pool_maxsize`: set before the pool.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import random
from collections.abc import Iterator, Mapping
from typing import Any

import orjson
import urllib3
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from webhook.types import Object

JSON = "application/json"
APPLY = "application/apply-patch+yaml"
"""Server-side apply's content type."""


class ApiError(Exception):
    """The API server answered with an error status (404, 409, 410, 422, ...)."""

    def __init__(self, status: int, message: str, continue_token: str = "") -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.continue_token = continue_token
        """A Status's `metadata.continue`: with a 410 for an expired continue token, where
        the rest of the list can be read from, from the latest state."""


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

    @staticmethod
    def kubeconfig_namespace(path: str | None = None, context: str | None = None) -> str:
        """The namespace of the kubeconfig's `context` (its current one when None), as
        kubectl takes it when `-n` is not given; `default` when the context names none."""
        contexts, current = k8s_config.list_kube_config_contexts(  # type: ignore[no-untyped-call]
            config_file=path
        )
        chosen = next((c for c in contexts if c.get("name") == context), None) or current
        return str(((chosen or {}).get("context") or {}).get("namespace") or "default")

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

    @property
    def configuration(self) -> Any:
        """The client configuration (host, credentials, TLS) this API talks through."""
        return self._client.configuration

    def server_identity(self) -> str:
        """The API server's URL and a digest of the CA that vouches for it: which cluster
        this is, also when a new cluster comes up at the same address."""
        configuration = self._client.configuration
        ca = b""
        if configuration.ssl_ca_cert:
            with contextlib.suppress(OSError), open(configuration.ssl_ca_cert, "rb") as file:
                ca = file.read()
        return f"{configuration.host} {hashlib.sha256(ca).hexdigest()}"

    def server_version(self) -> tuple[str, str]:
        """The API server's (major, minor) from `/version`, as it writes them (`36+` too)."""
        info = k8s.VersionApi(self._client).get_code(_request_timeout=self.timeout)
        return str(info.major), str(info.minor)

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: Object | None = None,
        timeout: float | None = None,
        content_type: str = JSON,
    ) -> dict[str, Any]:
        """The decoded JSON answer; raises ApiError for an error status, Unreachable.

        `content_type`: of the body, e.g. APPLY for a server-side apply (sent as JSON text,
        which every YAML patch type accepts)."""
        sent: Object | str | None = body
        if body is not None and not content_type.endswith("json"):
            sent = json.dumps(body)  # the client encodes JSON types (any +json) itself
        response = self._send(
            method, path, query, sent, timeout or self.timeout, content_type=content_type
        )
        try:
            data = response.read()
        except urllib3.exceptions.HTTPError as error:
            raise Unreachable(f"{method} {path}: {error}") from error
        finally:
            response.response.release_conn()
        if not 200 <= response.status < 300:
            raise ApiError(response.status, _status_message(data), _continue_token(data))
        decoded: dict[str, Any] = orjson.loads(data)
        return decoded

    def watch(
        self, path: str, resource_version: str, timeout_seconds: int, label_selector: str = ""
    ) -> WatchStream:
        """Watch events after `resource_version` until the server ends the watch."""
        query = {
            "watch": "true",
            "allowWatchBookmarks": "true",
            "resourceVersion": resource_version,
            "timeoutSeconds": str(timeout_seconds),
        }
        if label_selector:
            query["labelSelector"] = label_selector
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
        body: Object | str | None,
        timeout: float | tuple[float, float],
        *,
        content_type: str = JSON,
    ) -> Any:
        headers = {"Accept": JSON, "Content-Type": content_type}
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


def _continue_token(data: bytes) -> str:
    try:
        return str((json.loads(data).get("metadata") or {}).get("continue") or "")
    except (ValueError, AttributeError):
        return ""


def list_pages(
    api: KubeApi,
    path: str,
    query: Mapping[str, str] | None = None,
    page: int = 500,
    *,
    resume_expired: bool = False,
) -> Iterator[dict[str, Any]]:
    """Every item of a list, fetched `page` at a time (bounded memory per request).

    A continue token expires when etcd compacts past the list's snapshot (every 5 minutes by
    default), so a caller that works between pages may meet a 410. With `resume_expired`,
    the list goes on from the token the API server sends with that 410: the pages after it
    come from the latest state, not the first page's snapshot (the API's inconsistent
    continuation), which a caller judging each item as it is now can accept."""
    params = {"limit": str(page), **(query or {})}
    while True:
        try:
            found = api.request("GET", path, query=params)
        except ApiError as err:
            params = {**params, "continue": _resumed(err, params, resume_expired)}
            continue
        yield from found.get("items") or []
        token = str((found.get("metadata") or {}).get("continue") or "")
        if not token:
            return
        params = {**params, "continue": token}


def _resumed(err: ApiError, params: Mapping[str, str], resume_expired: bool) -> str:
    """The token an expired list goes on from (never the one just refused); `err` otherwise."""
    token = err.continue_token
    if resume_expired and err.status == 410 and token and token != params.get("continue"):
        return token
    raise err


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
                        yield orjson.loads(line)
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
