"""The SSLContext for every accepted connection, rebuilt only when the files change.

gunicorn asks the `ssl_context` hook once per worker; the context it gets back carries an SNI
callback, which OpenSSL calls on every handshake (with or without a server name), and which
hands that connection the current context (`SSLSocket.context`, a public `ssl` API). The
current context is cached under the (inode, mtime, size) of the certificate, key and client
CA: a rotation shows up on the next connection, connections already open keep theirs. The
callback also tells the server that a handshake has begun (`on_handshake`, given the
connection's socket), which starts the connection's header deadline (firstrequest.py).

A pair is served only once it is proven: the key must sign a fresh nonce that the
certificate's public key verifies. OpenSSL's own check compares public parts only, so a key
file read half-written can pass it and then fail every handshake; such a pair, and any that
does not load, leaves the previous context serving until the files change again.
"""

from __future__ import annotations

import contextlib
import logging
import os
import ssl
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, padding, rsa

from webhook.admission.config import TlsFiles

log = logging.getLogger("dragate.tls")
FileKey = tuple[tuple[int, int, int], ...]
TLS12_CIPHERS = "ECDHE+AESGCM:ECDHE+CHACHA20"
"""TLS 1.2 suites offered: ECDHE key exchange with an AEAD cipher only (no CBC, no RSA key
exchange). TLS 1.3 suites are all AEAD and are not affected by this list."""


def _file_key(paths: list[Path]) -> FileKey:
    stats = [p.stat() for p in paths]
    return tuple((s.st_ino, s.st_mtime_ns, s.st_size) for s in stats)


def server_ssl_context(files: TlsFiles) -> ssl.SSLContext:
    """TLS 1.2 minimum (1.3 negotiated when offered), AEAD suites, HTTP/1.1 only, and no
    TLS 1.2 renegotiation: a handshake happens once per connection, so the handshake hook
    starts a connection's header deadline once (firstrequest.py), and no client can make the
    server redo a handshake's work on an open connection."""
    prove_pair(files.cert.read_bytes(), files.key.read_bytes())
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.options |= ssl.OP_NO_RENEGOTIATION
    context.set_ciphers(TLS12_CIPHERS)
    context.load_cert_chain(certfile=str(files.cert), keyfile=str(files.key))
    context.set_alpn_protocols(["http/1.1"])
    if files.client_ca is not None:
        # Optional at the TLS layer: a presented certificate must chain to the client CA or
        # the handshake fails, but kubelet probes and Prometheus carry none. The review
        # routes then refuse any peer without one (routes.ReviewRoutes).
        context.load_verify_locations(cafile=str(files.client_ca))
        context.verify_mode = ssl.CERT_OPTIONAL
    return context


def prove_pair(cert_pem: bytes, key_pem: bytes) -> None:
    """Raise ValueError unless the key signs a nonce that the certificate's key verifies."""
    try:
        key = serialization.load_pem_private_key(key_pem, password=None)
        public = x509.load_pem_x509_certificate(cert_pem).public_key()
    except (ValueError, TypeError, UnsupportedAlgorithm) as err:
        raise ValueError(f"unreadable certificate or key: {err}") from None
    nonce = os.urandom(32)
    try:
        _verify(public, _sign(key, nonce), nonce)
    except (InvalidSignature, TypeError, ValueError):
        raise ValueError("the key does not sign for the certificate's public key") from None


def _sign(key: Any, nonce: bytes) -> bytes:
    if isinstance(key, rsa.RSAPrivateKey):
        return key.sign(nonce, padding.PKCS1v15(), hashes.SHA256())
    if isinstance(key, ec.EllipticCurvePrivateKey):
        return key.sign(nonce, ec.ECDSA(hashes.SHA256()))
    if isinstance(key, ed25519.Ed25519PrivateKey | ed448.Ed448PrivateKey):
        return key.sign(nonce)
    raise TypeError(f"unsupported key type {type(key).__name__}")


def _verify(public: Any, signature: bytes, nonce: bytes) -> None:
    if isinstance(public, rsa.RSAPublicKey):
        public.verify(signature, nonce, padding.PKCS1v15(), hashes.SHA256())
    elif isinstance(public, ec.EllipticCurvePublicKey):
        public.verify(signature, nonce, ec.ECDSA(hashes.SHA256()))
    elif isinstance(public, ed25519.Ed25519PublicKey | ed448.Ed448PublicKey):
        public.verify(signature, nonce)
    else:
        raise TypeError(f"unsupported key type {type(public).__name__}")


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
Handshake = Callable[[ssl.SSLSocket | ssl.SSLObject], None]
"""What is told of each handshake, given the connection's socket (the SSLSocket gunicorn then
serves, `gunicorn.socket`), from the SNI callback, while the ClientHello is processed."""


def gunicorn_hook(
    files: TlsFiles, on_handshake: Handshake | None = None
) -> Callable[[object, Factory], ssl.SSLContext]:
    """gunicorn's `ssl_context(conf, default_factory)` hook, called once in the worker.

    The context it returns starts every handshake; its SNI callback then calls `on_handshake`
    and switches the connection to the cache's current context (the same object while the
    files are unchanged).
    The cache is filled here, in the master: a worker forked while the files are missing or
    half-written serves that pair instead of failing to boot (and being forked again).
    """
    cache = ContextCache(files)
    with contextlib.suppress(ssl.SSLError):  # nothing usable yet: the worker's `get` says so
        cache.get()

    def ssl_context(conf: object, default_ssl_context_factory: Factory) -> ssl.SSLContext:
        first = cache.get()
        first.sni_callback = _switcher(cache, first, on_handshake)
        return first

    return ssl_context


def _switcher(
    cache: ContextCache, first: ssl.SSLContext, on_handshake: Handshake | None = None
) -> Callable[..., None]:
    def switch(sock: ssl.SSLObject | ssl.SSLSocket, _name: str | None, _ctx: object) -> None:
        if on_handshake is not None:
            on_handshake(sock)
        try:
            current = cache.get()
        except ssl.SSLError:
            return  # nothing better than what the handshake started with
        if current is not first:
            sock.context = current

    return switch
