"""gunicorn, started from Python: one gevent worker, TLS with hot reload, HTTP/1.1 only.

Everything here goes through gunicorn's documented custom-application API (`BaseApplication`),
its settings and server hooks; the worker is a stock class chosen by name. Why these settings
(the user-facing side is docs/security.md, the choice and its measurements docs/decisions.md):
- `gevent_pywsgi`: a connection is a greenlet, so clients that connect and stall, trickle
  headers or never finish a body hold a few kilobytes each rather than a thread, and
  legitimate reviews keep being answered beside thousands of them (`worker_connections`).
  gevent's HTTP handler asks for a body only when the app reads it: a review over the size
  limit is answered 413 without a `100 Continue`, and the unread rest of a body is read and
  dropped after the answer, so a client that writes its whole body first still reads it.
- one worker: one process per pod holds the caches, the ledger and the policy set; replicas
  scale it out and the Lease holder alone runs the background loops (webhook/kube/leader.py).
- the socket timeout (`keepalive`, 120 s) bounds every read and write on a connection: an idle
  keep-alive connection closes after it, longer than the API server's 90 s idle timeout
  (Go's default), so it is the API server that closes an idle connection; a server closing
  one just as the client reuses it fails that POST with EOF, which the API server does not
  retry. The timeout is set in the worker (`post_worker_init`), after gevent's monkey
  patching, before the first connection is accepted.
- a connection that fails its TLS handshake or drops (a scanner, plain HTTP, a client gone)
  ends its greenlet with an SSL or connection error, which gevent would print as a traceback
  each time: those are listed in the hub's documented `NOT_ERROR`, and the log stays JSON.
- SIGTERM: the worker stops accepting, answers what arrives on open connections with
  `Connection: close` (routes.STOPPING) and exits once none is left or the graceful timeout
  passes; an idle kept-alive connection is held until then, never cut while reused.
- the `ssl_context` hook hands gunicorn a context whose SNI callback gives every handshake the
  current certificate (tls.py): a rotated certificate takes effect without a restart.
- HTTP/2 stays off (CVE-2023-44487; the apiserver speaks HTTP/1.1 to webhooks anyway).
- `worker_tmp_dir` on /dev/shm: the heartbeat file's fchmod must never wait on a disk.
"""

from __future__ import annotations

import os
import signal
import socket
import ssl
from typing import Any

from gunicorn.app.base import BaseApplication

from webhook.admission import tls
from webhook.admission.config import ServeConfig
from webhook.types import PolicySet

WORKER_CLASS = "gevent_pywsgi"


def bind_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def gunicorn_settings(config: ServeConfig) -> dict[str, Any]:
    """Everything gunicorn is told; no config file and no environment are read."""
    settings: dict[str, Any] = {
        "bind": [bind_address(config.host, config.port)],
        "worker_class": WORKER_CLASS,
        "workers": 1,
        "worker_connections": config.max_connections,
        "keepalive": config.keepalive,
        "graceful_timeout": config.graceful_timeout,
        "timeout": 30,
        "certfile": str(config.tls.cert),
        "keyfile": str(config.tls.key),
        "ssl_context": tls.gunicorn_hook(config.tls),
        "http_protocols": "h1",
        "accesslog": None,
        "errorlog": "-",
        "loglevel": config.log_level,
        "proc_name": "dragate",
        "control_socket_disable": True,
        "preload_app": False,
        "post_worker_init": worker_ready(config.keepalive),
    }
    if os.path.isdir("/dev/shm"):
        settings["worker_tmp_dir"] = "/dev/shm"
    return settings


def worker_ready(seconds: float) -> Any:
    """A `post_worker_init` hook: every connection the worker accepts gets `seconds` as its
    socket timeout (idle keep-alive, a stalled handshake, a stalled request or body), a
    client's failed handshake or dropped connection is no error to print, and SIGTERM marks
    the worker as stopping before gunicorn's own handler runs."""

    def hook(_worker: Any) -> None:
        import gevent  # noqa: PLC0415  (the worker's own event loop)

        from webhook.admission import routes  # noqa: PLC0415  (Flask loads in the worker)

        socket.setdefaulttimeout(seconds)
        hub = gevent.get_hub()
        hub.NOT_ERROR = (*hub.NOT_ERROR, ssl.SSLError, ConnectionError, TimeoutError)
        previous = signal.getsignal(signal.SIGTERM)

        def on_term(signum: int, frame: Any) -> None:
            routes.STOPPING.set()
            if callable(previous):
                previous(signum, frame)

        signal.signal(signal.SIGTERM, on_term)

    return hook


class DragateServer(BaseApplication):  # type: ignore[misc]
    """A gunicorn application whose worker calls `make_app(config)` after fork."""

    policies: PolicySet | None = None
    """The policy set the master loaded (set by `dragate serve` before `run`). A worker
    inherits it through fork and serves it, as stale, if the files cannot be loaded when it
    boots."""

    def __init__(self, config: ServeConfig) -> None:
        self.config = config
        super().__init__()

    def load_config(self) -> None:
        for key, value in gunicorn_settings(self.config).items():
            self.cfg.set(key, value)

    def load(self) -> Any:
        from webhook.admission.app import make_app  # noqa: PLC0415  (Flask loads in workers)

        return make_app(self.config, fallback=self.policies)
