"""gunicorn's gthread worker, guarded against clients that connect and then stall (slowloris).

Stock gthread hands every new connection to a pool thread, which then blocks, with no time
limit, in the TLS handshake and while reading the request. Measured before this guard: a
dozen connections that sent three bytes of a TLS record and stopped held every thread of
`dragate serve` forever and `/healthz` timed out; a time limit alone only shortened that,
since stalled connections queue ahead of the API server's. With `failurePolicy: Fail` that is
every API write the webhook matches failing, for as long as anyone who can reach the Service
keeps a few sockets open.

So a thread only ever gets a connection whose request has arrived: the worker's event loop,
which waits on many sockets without a thread each, performs the TLS handshake and reads the
request (headers and body, up to a bound) without blocking, then hands the buffered request
to a thread. A connection that does not deliver its request within REQUEST_SECONDS of its
first byte (or of connecting) is closed. Beyond the pre-read bounds (chunked bodies, very
large ones) the thread reads on, through DeadlineSocket, under the same deadline; each write
of the answer gets REQUEST_SECONDS too, so a client that stops reading cannot hold a thread.
The API server sends its ClientHello and whole request at once and never comes near these.
"""

from __future__ import annotations

import contextlib
import errno
import selectors
import ssl
import time
from collections import deque
from functools import partial
from typing import Any

from gunicorn import http
from gunicorn import sock as gsock
from gunicorn.workers import gthread

REQUEST_SECONDS = 5.0
HEADER_LIMIT = 64 * 1024
BODY_PREREAD_LIMIT = 1024 * 1024
WORKER_PREREAD_LIMIT = 32 * 1024 * 1024  # all connections of a worker being pre-read


class RequestBuffer:
    """Bytes of one HTTP/1.1 request as they arrive; `complete` once a thread can take it.

    Complete means: the headers ended and the body is all there (by Content-Length, up to
    BODY_PREREAD_LIMIT); or the body's end cannot be known ahead (chunked, or the client
    waits for `100 Continue`); or the headers ran past HEADER_LIMIT, for gunicorn's parser to
    refuse.
    """

    def __init__(self) -> None:
        self.data = bytearray()
        self._wanted: int | None = None  # total bytes once the headers are known

    def feed(self, chunk: bytes) -> bool:
        self.data += chunk
        if self._wanted is None:
            self._wanted = _wanted_bytes(self.data)
        return self.complete

    @property
    def complete(self) -> bool:
        if self._wanted is None:
            return len(self.data) > HEADER_LIMIT
        return len(self.data) >= self._wanted


def _wanted_bytes(data: bytearray) -> int | None:
    """Headers plus the body to pre-read, or None while the headers have not ended."""
    end = data.find(b"\r\n\r\n")
    if end < 0:
        return None
    fields = dict(_header_fields(bytes(data[:end])))
    if b"transfer-encoding" in fields or b"expect" in fields:
        return end + 4
    try:
        length = int(fields.get(b"content-length", b"0"))
    except ValueError:
        return end + 4  # the parser answers 400
    return end + 4 + min(max(length, 0), BODY_PREREAD_LIMIT)


def _header_fields(head: bytes) -> list[tuple[bytes, bytes]]:
    lines = head.split(b"\r\n")[1:]  # after the request line
    return [(n.strip().lower(), v.strip()) for n, _, v in (x.partition(b":") for x in lines)]


class _Reading:
    """A connection the event loop is reading a request from."""

    def __init__(self, conn: Any, handshaking: bool) -> None:
        self.conn = conn
        self.handshaking = handshaking
        self.deadline = time.monotonic() + REQUEST_SECONDS
        self.buffer = RequestBuffer()
        self.waits_for = selectors.EVENT_READ
        self.registered = False  # with the poller: only once it had to wait for bytes
        self.done = False


class GuardedThreadWorker(gthread.ThreadWorker):  # type: ignore[misc]
    """gthread whose threads only take connections with a whole request to serve."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._reading: deque[_Reading] = deque()  # waiting ones, by deadline (same bound)
        self._buffered = 0

    def accept(self, listener: Any) -> None:
        try:
            client, address = listener.accept()
        except OSError as err:  # another worker took it
            if err.errno not in (errno.EAGAIN, errno.ECONNABORTED, errno.EWOULDBLOCK):
                raise
            return
        self.nr_conns += 1
        conn = gthread.TConn(self.cfg, client, address, listener.getsockname())
        try:
            if self.cfg.is_ssl:
                conn.sock = self._wrap(conn.sock)
        except OSError as err:  # ssl.SSLError too: no usable certificate right now
            self.log.warning("cannot start TLS on a new connection: %s", err)
            self.nr_conns -= 1
            conn.close()
            return
        self._read_in_loop(conn, handshaking=bool(self.cfg.is_ssl))

    def _wrap(self, raw: Any) -> Any:
        return gsock.ssl_context(self.cfg).wrap_socket(
            raw, server_side=True, do_handshake_on_connect=False,
            suppress_ragged_eofs=self.cfg.suppress_ragged_eofs,
        )  # fmt: skip

    def on_client_socket_readable(self, conn: Any, client: Any) -> None:
        """A kept-alive connection has bytes of its next request: read it here as well."""
        self.poller.unregister(client)
        self.keepalived_conns.remove(conn)
        self._read_in_loop(conn, handshaking=False)

    def murder_pending(self) -> None:
        super().murder_pending()
        now = time.monotonic()
        while self._reading and (self._reading[0].done or self._reading[0].deadline <= now):
            reading = self._reading.popleft()
            if not reading.done:
                self._drop(reading)

    def _read_in_loop(self, conn: Any, *, handshaking: bool) -> None:
        """Read the request now; only what is not here yet waits in the poller (the bytes of
        a kept-alive connection's next request usually are, sparing two epoll calls)."""
        self._advance(_Reading(conn, handshaking), None)

    def _advance(self, reading: _Reading, _fileobj: Any) -> None:
        try:
            whole = self._step(reading)
        except OSError:  # ssl.SSLError included: a failed handshake, a reset
            whole = None
        except Exception:  # a bug here must cost one connection, never the worker's loop
            self.log.exception("reading a request failed")
            whole = None
        if whole is None:
            self._drop(reading)
        elif whole or self._buffered > WORKER_PREREAD_LIMIT:
            self._dispatch(reading)
        else:
            self._wait(reading)

    def _wait(self, reading: _Reading) -> None:
        sock, callback = reading.conn.sock, partial(self._advance, reading)
        if reading.registered:
            self.poller.modify(sock, reading.waits_for, callback)
            return
        self.poller.register(sock, reading.waits_for, callback)
        reading.registered = True
        self._reading.append(reading)

    def _step(self, reading: _Reading) -> bool | None:
        """Handshake, then read what has arrived: True once whole, None if the client left."""
        sock = reading.conn.sock
        if reading.handshaking and not self._handshake(reading):
            return False
        while True:
            try:
                chunk = sock.recv(65536)
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError):
                return reading.buffer.complete
            if not chunk:
                return None
            self._buffered += len(chunk)
            if reading.buffer.feed(chunk):
                return True

    def _handshake(self, reading: _Reading) -> bool:
        try:
            reading.conn.sock.do_handshake()
        except ssl.SSLWantReadError:
            reading.waits_for = selectors.EVENT_READ
            return False
        except ssl.SSLWantWriteError:
            reading.waits_for = selectors.EVENT_WRITE
            return False
        reading.waits_for = selectors.EVENT_READ
        reading.handshaking = False
        return True

    def _dispatch(self, reading: _Reading) -> None:
        """Hand the connection and its buffered request to a pool thread."""
        conn = self._finish(reading)
        if conn.parser is None:  # a new connection: what gthread's TConn.init() would do
            conn.parser = http.get_parser(self.cfg, conn.sock, conn.client)
            conn.initialized = True
        conn.parser.unreader.unread(bytes(reading.buffer.data))
        conn.data_ready = True
        self.enqueue_req(conn)

    def _drop(self, reading: _Reading) -> None:
        conn = self._finish(reading)
        self.nr_conns -= 1
        conn.close()

    def _finish(self, reading: _Reading) -> Any:
        reading.done = True
        self._buffered -= len(reading.buffer.data)
        if reading.registered:
            with contextlib.suppress(KeyError, ValueError, OSError):
                self.poller.unregister(reading.conn.sock)
        return reading.conn


class DeadlineSocket(ssl.SSLSocket):
    """An SSLSocket whose blocking mode has a deadline instead of none.

    gunicorn switches a connection to blocking when a thread takes it; here that starts a
    REQUEST_SECONDS budget for every read of the request the event loop did not already
    buffer, and each write gets its own REQUEST_SECONDS.
    """

    _deadline: float | None = None

    def setblocking(self, flag: bool) -> None:
        if not flag:
            super().setblocking(False)
            return
        self._deadline = None  # a thread took the connection: a new request begins
        super().settimeout(REQUEST_SECONDS)

    def recv(self, buflen: int = 1024, flags: int = 0) -> bytes:
        self._arm()
        return super().recv(buflen, flags)

    def recv_into(self, buffer: Any, nbytes: int | None = None, flags: int = 0) -> int:
        self._arm()
        return super().recv_into(buffer, nbytes, flags)

    def sendall(self, data: Any, flags: int = 0) -> None:
        if self.gettimeout() != 0.0:
            super().settimeout(REQUEST_SECONDS)
        super().sendall(data, flags)

    def _arm(self) -> None:
        if self.gettimeout() == 0.0:  # non-blocking, in the event loop: it never waits
            return
        now = time.monotonic()
        if self._deadline is None:
            self._deadline = now + REQUEST_SECONDS
        remaining = self._deadline - now
        if remaining <= 0:
            raise TimeoutError("the client did not send its request in time")
        super().settimeout(remaining)
