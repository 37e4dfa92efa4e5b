"""gunicorn, started from Python: one gevent worker, TLS with hot reload, HTTP/1.1 only.

Everything here goes through gunicorn's documented custom-application API (`BaseApplication`),
its settings and server hooks; the worker is a stock class chosen by name. Why these settings
(the user-facing side is docs/security.md, the choice and its measurements docs/decisions.md):
- `gevent`: a connection is a greenlet, so clients that connect and stall, trickle headers
  or never finish a body hold a few kilobytes each rather than a thread, and legitimate
  reviews keep being answered beside thousands of them (`worker_connections`). Requests are
  read by gunicorn's own strict HTTP/1.1 parser: it enforces the header limits below and
  refuses ambiguous framing (Content-Length with Transfer-Encoding, two lengths, a signed
  length, a NUL in a header, a folded header line) with a 4xx, `Connection: close` and one
  log line, before any app code runs.
- header limits (`limit_request_*`): a request line of at most 4,094 bytes (414), at most
  16 header fields of 4,094 bytes each (431): the API server, kubelet probes and Prometheus
  send a handful of short ones. A header section that never ends is refused once it passes
  16 x 4 KiB (64 KiB): gunicorn's parser rescans the whole buffered section for each chunk it
  reads, on the one event loop, so this bound is what keeps a header flood cheap, and what
  one connection buffers small.
- one worker: one process per pod holds the caches, the ledger and the policy set; replicas
  scale it out and the Lease holder alone runs the background loops (webhook/kube/leader.py).
- the socket timeout (`HANDSHAKE_SECONDS`) bounds the TLS handshake, which gevent's server
  runs when it accepts a connection: a connection that never completes one (silent, or a
  partial record) is closed after it. It is set in the worker (`post_worker_init`), after
  gevent's monkey patching, before the first connection.
- the first request's header section: a new connection has `firstrequest.HEADER_SECONDS`
  (10 s) from its ClientHello until its first request's line and headers have arrived, or it
  is closed (firstrequest.py; Go's `ReadHeaderTimeout`), so a client that completes its
  handshake and then stays silent or trickles its headers is held seconds, not minutes. The
  `ssl_context` hook, which gunicorn calls in the worker's run loop (after the fork and
  gevent's patching, with the worker's hub at hand), returns the context whose SNI callback
  starts that deadline on every handshake.
- `keepalive` (120 s) is how long a kept-alive connection may stay idle, and so also how long
  a later request's line and headers may take to arrive: longer than the API server's 90 s
  idle timeout (Go's default), so it is the API server that closes an idle connection; a
  server closing one just as the client reuses it fails that POST with EOF, which the API
  server does not retry. gunicorn makes the socket blocking after the handshake; the app
  bounds its own body reads and response writes (routes.py, turns.py).
- a connection that fails its TLS handshake or drops (a scanner, plain HTTP, a client gone)
  ends its greenlet with an SSL or connection error, which gevent would print as a traceback
  each time: those are listed in the hub's documented `NOT_ERROR` (`NOT_ERRORS`).
  gunicorn's own lines (boot, a refused request) are written by the standard `logging`
  handlers of its `gunicorn.error` logger, given dragate's JSON formatter: the log stays one
  JSON object a line.
- SIGTERM: the worker stops accepting, answers what arrives on open connections with
  `Connection: close` (gunicorn closes every connection after its answer once the worker
  stops) and exits once none is left or the graceful timeout passes; an idle kept-alive
  connection is held until then, never cut while reused.
- the `ssl_context` hook hands gunicorn a context whose SNI callback gives every handshake the
  current certificate (tls.py): a rotated certificate takes effect without a restart; the
  same callback starts the connection's header deadline.
- HTTP/2 stays off (CVE-2023-44487; the apiserver speaks HTTP/1.1 to webhooks anyway).
- `worker_tmp_dir` on /dev/shm: the heartbeat file's fchmod must never wait on a disk.
"""

from __future__ import annotations

import logging
import os
import socket
import ssl
from typing import Any

from gunicorn.app.base import BaseApplication

from webhook.admission import firstrequest, tls
from webhook.admission.config import ServeConfig
from webhook.types import PolicySet

WORKER_CLASS = "gevent"
HANDSHAKE_SECONDS = 10.0
"""How long an accepted connection has to complete its TLS handshake."""
LIMIT_REQUEST_LINE = 4094
LIMIT_REQUEST_FIELDS = 16
LIMIT_REQUEST_FIELD_SIZE = 4094


NOT_ERRORS = (ssl.SSLError, ConnectionError, TimeoutError, AttributeError)
"""What ends a connection's greenlet before gunicorn's handler runs (which catches and logs
everything itself), added to the hub's `NOT_ERROR` so that it prints no traceback: a failed,
dropped or timed-out TLS handshake, and a handshake that completes after the worker stopped
accepting (gevent's `StreamServer.close` drops the server's `handle`, so that connection ends
with an AttributeError; dragate spawns no greenlet of its own for the hub to report)."""


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
        "limit_request_line": LIMIT_REQUEST_LINE,
        "limit_request_fields": LIMIT_REQUEST_FIELDS,
        "limit_request_field_size": LIMIT_REQUEST_FIELD_SIZE,
        "graceful_timeout": config.graceful_timeout,
        "timeout": 30,
        "certfile": str(config.tls.cert),
        "keyfile": str(config.tls.key),
        "ssl_context": tls.gunicorn_hook(config.tls, on_handshake=firstrequest.PENDING.arm),
        "http_protocols": "h1",
        "accesslog": None,
        "errorlog": "-",
        "loglevel": config.log_level,
        "proc_name": "dragate",
        "control_socket_disable": True,
        "preload_app": False,
        "on_starting": lambda _arbiter: json_lines(),
        "post_worker_init": worker_ready(HANDSHAKE_SECONDS),
    }
    if os.path.isdir("/dev/shm"):
        settings["worker_tmp_dir"] = "/dev/shm"
    return settings


def json_lines() -> None:
    """gunicorn's own log lines as dragate's JSON lines: the `gunicorn.error` logger's
    handlers get the JSON formatter (an `on_starting` hook: the master has set them up, and
    the worker inherits them)."""
    from webhook.admission import jsonlog  # noqa: PLC0415

    for handler in logging.getLogger("gunicorn.error").handlers:
        handler.setFormatter(jsonlog.JsonFormatter())


def worker_ready(seconds: float) -> Any:
    """A `post_worker_init` hook: every connection the worker accepts gets `seconds` to
    complete its TLS handshake, and a client's failed handshake or dropped connection is no
    error to print."""

    def hook(_worker: Any) -> None:
        import gevent  # noqa: PLC0415  (the worker's own event loop)

        json_lines()
        socket.setdefaulttimeout(seconds)
        hub = gevent.get_hub()
        hub.NOT_ERROR = (*hub.NOT_ERROR, *NOT_ERRORS)

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
        """What gunicorn serves: `application()` behind `firstrequest.Arrivals`, so every
        app served with these settings ends each new connection's header deadline once its
        first request has arrived (a subclass serves another app by `application`)."""
        return firstrequest.Arrivals(self.application())

    def application(self) -> Any:
        from webhook.admission.app import make_app  # noqa: PLC0415  (Flask loads in workers)

        return make_app(self.config, fallback=self.policies)
