"""gunicorn, started from Python: gthread workers, TLS with hot reload, HTTP/1.1 only.

Why these settings (the user-facing side is docs/security.md, "Security and failure modes"):
- gthread keeps apiserver connections alive, and calls the `ssl_context` hook per connection,
  which is what lets a rotated certificate take effect without a restart.
- gthread as `slowclients.GuardedThreadWorker`: a client that connects and stalls cannot hold a
  thread (stock gthread blocks in the handshake and request read with no time limit); as
  `loopserving.LoopServingWorker`, a review that needs no wait on the network is answered
  in the worker's event loop instead of being handed to a pool thread and back.
- keep-alive 120 s: longer than the API server's 90 s idle timeout (Go's default), so it is
  always the API server that closes an idle connection. A server closing one just as the
  client reuses it fails that POST with EOF, which the API server does not retry. A stopping
  worker still caps idle connections to 2 s and answers any request arriving meanwhile with
  `Connection: close`.
- `reuse_port`: a listening socket per worker, so the kernel spreads connections over the
  workers instead of the first one awake taking most (listeners.py says why).
- `worker_tmp_dir` on /dev/shm: the heartbeat file's fchmod must never wait on a disk.
- HTTP/2 stays off (CVE-2023-44487; the apiserver speaks HTTP/1.1 to webhooks anyway).

Relies on (checked with gunicorn 27.0.1; canaries: tests/canary/test_gunicorn.py):
- `gunicorn.sock.create_sockets(conf, log)`: only checks that `certfile` exists, loading
  nothing from it (`tls_switch`).
"""

from __future__ import annotations

import os
from typing import Any

from gunicorn.app.base import BaseApplication
from prometheus_client import multiprocess

from webhook.admission import listeners, tls
from webhook.admission.config import ServeConfig
from webhook.admission.loopserving import LoopServingWorker
from webhook.types import PolicySet


def bind_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def gunicorn_settings(config: ServeConfig) -> dict[str, Any]:
    """Everything gunicorn is told; no config file and no environment are read."""
    settings: dict[str, Any] = {
        "bind": [bind_address(config.host, config.port)],
        "reuse_port": True,
        "worker_class": LoopServingWorker,
        "workers": config.workers,
        "threads": config.threads,
        "keepalive": config.keepalive,
        "graceful_timeout": config.graceful_timeout,
        "timeout": 30,
        # TLS on; gunicorn only checks these paths exist when a worker binds its listener
        # (reuse_port), and the certificate comes from the ssl_context hook: see tls_switch
        "certfile": tls_switch(config),
        "ssl_context": tls.gunicorn_hook(config.tls),
        "http_protocols": "h1",
        "accesslog": None,
        "errorlog": "-",
        "loglevel": config.log_level,
        "proc_name": "dragate",
        "control_socket_disable": True,
        "preload_app": False,
        "child_exit": _child_exit,
    }
    if os.path.isdir("/dev/shm"):
        settings["worker_tmp_dir"] = "/dev/shm"
    return settings


def tls_switch(config: ServeConfig) -> str:
    """What gunicorn gets as `certfile`: the directory of the live certificate.

    `certfile` only turns gunicorn's TLS mode on (`is_ssl`) and, with a listener per worker,
    is checked to exist each time a worker binds; the certificate itself is loaded by the
    `ssl_context` hook, which keeps the last good pair. Given the file itself, a worker
    restarted while a rotation had the files missing for a moment failed to boot and took
    the master down with it; the directory (a Secret volume's mount point) stays.
    """
    return str(config.tls.cert.parent)


def _child_exit(server: Any, worker: Any) -> None:
    """Drop a dead worker's live gauges. The master never imports `metrics`: its own zero
    values would otherwise count as a live process in `livemin` gauges."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        multiprocess.mark_process_dead(worker.pid)  # type: ignore[no-untyped-call]


class DragateServer(BaseApplication):  # type: ignore[misc]
    """A gunicorn application whose workers each call `make_app(config)` after fork."""

    policies: PolicySet | None = None
    """The policy set the master loaded (set by `dragate serve` before `run`). Workers inherit
    it through fork and serve it, as stale, if the files cannot be loaded when they boot."""

    def __init__(self, config: ServeConfig) -> None:
        self.config = config
        super().__init__()

    def load_config(self) -> None:
        for key, value in gunicorn_settings(self.config).items():
            self.cfg.set(key, value)

    def run(self) -> None:
        """Fail at once when the port is taken (no worker would ever bind it), then serve."""
        listeners.check_address_free(self.config.host, self.config.port)
        super().run()

    def load(self) -> Any:
        from webhook.admission.app import make_app  # noqa: PLC0415  (Flask loads in workers)

        return make_app(self.config, fallback=self.policies)
