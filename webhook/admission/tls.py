"""The SSLContext for every accepted connection, rebuilt only when the files change.

gunicorn's gthread worker asks the `ssl_context` hook for a context on each new connection.
Re-reading PEM files each time would be slow, and never re-reading them would need a restart
after rotation, so the context is cached under the (inode, mtime, size) of the certificate,
key and client CA. A rotation shows up on the next connection; connections already open keep
their context. When the files are mid-swap (a new certificate with the old key), loading
fails and the previous context keeps serving until the pair matches again.
"""

from __future__ import annotations

import logging
import ssl
import threading
from collections.abc import Callable
from pathlib import Path

from webhook.admission.config import TlsFiles
from webhook.admission.deadlinesocket import DeadlineSocket

log = logging.getLogger("dragate.tls")
FileKey = tuple[tuple[int, int, int], ...]


def _file_key(paths: list[Path]) -> FileKey:
    stats = [p.stat() for p in paths]
    return tuple((s.st_ino, s.st_mtime_ns, s.st_size) for s in stats)


def server_ssl_context(files: TlsFiles) -> ssl.SSLContext:
    """TLS 1.2 minimum (1.3 negotiated when offered), HTTP/1.1 only, default ciphers."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(certfile=str(files.cert), keyfile=str(files.key))
    context.set_alpn_protocols(["http/1.1"])
    context.sslsocket_class = DeadlineSocket  # handshake and request read time-bounded
    if files.client_ca is not None:
        # Optional at the TLS layer: a presented certificate must chain to the client CA or
        # the handshake fails, but kubelet probes and Prometheus carry none. The review
        # routes then refuse any peer without one (routes.ReviewRoutes).
        context.load_verify_locations(cafile=str(files.client_ca))
        context.verify_mode = ssl.CERT_OPTIONAL
    return context


class ContextCache:
    """Thread-safe cache of one SSLContext keyed on the state of its files."""

    def __init__(self, files: TlsFiles) -> None:
        self._files = files
        self._paths = [files.cert, files.key] + ([files.client_ca] if files.client_ca else [])
        self._lock = threading.Lock()
        self._key: FileKey | None = None
        self._failed: FileKey | None = None
        self._context: ssl.SSLContext | None = None

    def get(self) -> ssl.SSLContext:
        """The current context; rebuilt when a file changed, the old one kept if that fails."""
        try:
            key = _file_key(self._paths)
        except OSError as err:  # a file briefly missing during a swap
            return self._fallback(err)
        if key == self._key and self._context is not None:
            return self._context
        with self._lock:
            if key not in (self._key, self._failed):
                self._rebuild(key)
            if self._context is None:
                raise ssl.SSLError("no usable certificate and key")
            return self._context

    def _rebuild(self, key: FileKey) -> None:
        try:
            context = server_ssl_context(self._files)
        except (OSError, ssl.SSLError, ValueError) as err:
            self._failed = key
            log.warning("cannot load TLS files; keeping the old ones", extra={"error": str(err)})
            return
        self._context, self._key = context, key
        log.info("TLS certificate loaded", extra={"cert": str(self._files.cert)})

    def _fallback(self, err: OSError) -> ssl.SSLContext:
        if self._context is None:
            raise ssl.SSLError(f"cannot read TLS files: {err}")
        return self._context


Factory = Callable[[], ssl.SSLContext]


def gunicorn_hook(files: TlsFiles) -> Callable[[object, Factory], ssl.SSLContext]:
    """gunicorn's `ssl_context(conf, default_factory)` hook, one cache per worker process.

    The cache is filled here, in the master, before workers fork: a worker (re)started while
    the files are missing or mid-swap then still serves the last good certificate instead of
    failing every handshake until the files come back.
    """
    cache = ContextCache(files)
    try:
        cache.get()
    except ssl.SSLError as err:  # the master checked the files; a worker will retry anyway
        log.warning("cannot load TLS files yet", extra={"error": str(err)})

    def ssl_context(conf: object, default_ssl_context_factory: Factory) -> ssl.SSLContext:
        return cache.get()

    return ssl_context
