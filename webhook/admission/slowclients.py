"""gunicorn's gthread worker, guarded against clients that connect and then stall or trickle.

Stock gthread hands every new connection to a pool thread, which then blocks, with no time
limit, in the TLS handshake and while reading the request. Without a guard, a dozen
connections that send three bytes of a TLS record and stop hold every thread of `dragate
serve` forever; 40 connections sending `Transfer-Encoding: chunked` and no body (or 1 MiB of
a declared 3 MiB) every 5 s hold every thread in turn, and every legitimate review times
out. With `failurePolicy: Fail` that is every API write the webhook
matches failing, for as long as anyone who can reach the Service keeps a few sockets open.

So a thread only ever gets a connection whose whole request has arrived: the worker's event
loop, which waits on many sockets without a thread each, performs the TLS handshake and reads
the request, headers and body of any framing (framing.py decides where it ends), then hands
the buffered request to a thread (`loopserving` answers a review in the loop itself) and
reads a pipelined next one itself, once the first is answered. What the loop bounds:
- time: a request not whole within REQUEST_SECONDS of the connection (or of its first byte
  on a kept-alive one) is answered 408 (once its headers ended) and closed;
- size, per connection: headers up to 64 KiB, a body up to the server's `--max-body-bytes`
  (3 MiB); a larger declared or chunked body is answered 400 at once, without buffering it;
- memory, per worker: WORKER_BUDGET bytes of unfinished requests in all, of which one client
  address holds at most PEER_SHARE; past either, the connection holding the most bytes is
  answered 503 and closed, so a flood of big slow bodies evicts itself, never the API
  server's requests, which arrive whole in a few milliseconds.
Framing and limit errors are JSON (`{code, message}`), as every other answer. Each write of
an answer gets REQUEST_SECONDS (`deadlinesocket.DeadlineSocket`), so a client that stops
reading cannot hold a thread either.

Relies on (checked with gunicorn 27.0.1; canaries: tests/canary/test_gunicorn.py):
- `gunicorn.workers.gthread.ThreadWorker`: subclassed; it is gunicorn's worker class, not an
  extension API.
- `gunicorn.workers.gthread.ThreadWorker.nr_conns, keepalived_conns, poller, alive`: read and
  updated as gthread does (connection count, kept-alive queue, selector, running flag).
- `gunicorn.workers.gthread.ThreadWorker.accept(listener)`: replaced; the poller calls it for a new
  connection.
- `gunicorn.workers.gthread.ThreadWorker.on_client_socket_readable(conn, client)`: replaced; a
  kept-alive connection's next request is read in the loop.
- `gunicorn.workers.gthread.ThreadWorker.murder_pending()`: extended; the loop's periodic timeout
  sweep.
- `gunicorn.workers.gthread.ThreadWorker.handle_error(req, client, addr, exc)`: replaced; JSON error
  answers.
- `gunicorn.workers.gthread.ThreadWorker.finish_request(conn, fs)`: extended; a thread's answer is
  done.
- `gunicorn.workers.gthread.ThreadWorker.enqueue_req(conn)`: hands a buffered request to a pool
  thread.
- `gunicorn.workers.gthread.TConn(cfg, sock, client, server)`: built here; its sock, client, parser,
  initialized and data_ready are set as the thread expects them.
- `gunicorn.workers.gthread.TConn.init`: skips a connection already initialized (our parser is
  kept).
- `gunicorn.http.get_parser(cfg, sock, client)`: its `unreader.unread` takes the buffered request
  back.
- `gunicorn.sock.ssl_context(conf)`: the TLS context for wrapping accepted sockets.
- `gunicorn.http.errors`: the parser's exception classes, mapped to HTTP statuses.
- `gunicorn.config.Config.is_ssl, suppress_ragged_eofs`: TLS settings of the worker.
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
from gunicorn.http import errors as parse_errors
from gunicorn.workers import gthread

from webhook.admission.config import DEFAULT_MAX_BODY_BYTES
from webhook.admission.deadlinesocket import REQUEST_SECONDS
from webhook.admission.framing import (
    HEADER_LIMIT,
    Progress,
    Refusal,
    RequestReader,
    error_response,
)
from webhook.admission.listeners import ReusePortThreadWorker

WORKER_BUDGET = 16 * 1024 * 1024  # bytes of unfinished requests one worker buffers in all
PEER_SHARE = WORKER_BUDGET // 2  # ... of which one client address may hold
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
REVIEW_PATHS = (b"/validate", b"/mutate")
UNCERTIFIED = "reviews need a client certificate signed by --client-ca"
__all__ = ["HEADER_LIMIT", "REQUEST_SECONDS", "GuardedThreadWorker"]


class _Reading:
    """A connection the event loop is reading a request from (or draining after a refusal)."""

    def __init__(self, conn: Any, handshaking: bool, max_body: int) -> None:
        self.conn = conn
        self.peer = conn.client[0] if isinstance(conn.client, tuple) else str(conn.client)
        self.handshaking = handshaking
        self.deadline = time.monotonic() + REQUEST_SECONDS
        self.reader = RequestReader(max_body)
        self.counted = 0  # bytes of this request in the worker's budget
        self.draining: int | None = None  # after a refusal: bytes still read and dropped
        self.continued = False
        self.waits_for = selectors.EVENT_READ
        self.registered = False  # with the poller: only once it had to wait for bytes
        self.done = False


class GuardedThreadWorker(ReusePortThreadWorker):
    """gthread whose threads only take connections with a whole request to serve."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._reading: deque[_Reading] = deque()  # waiting ones, by deadline (same bound)
        self._buffered = 0
        self._by_peer: dict[str, int] = {}
        options = getattr(getattr(self.app, "config", None), "admission", None)
        self._max_body = getattr(options, "max_body_bytes", DEFAULT_MAX_BODY_BYTES)
        self._require_cert = bool(getattr(options, "require_client_cert", False))

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
                self._time_out(reading)

    def handle_error(self, req: Any, client: Any, addr: Any, exc: Exception) -> None:
        """gunicorn's parser errors (request line, header names), answered in JSON like
        everything else instead of gunicorn's HTML page."""
        code = _parse_error_status(exc)
        if code is None:
            self.log.exception("error handling a request")
            code, message = 500, "internal error"
        else:
            self.log.warning("invalid request: %s", exc)
            message = f"invalid HTTP request: {exc}"
        with contextlib.suppress(Exception):
            client.sendall(error_response(code, message))

    def finish_request(self, conn: Any, fs: Any) -> None:
        """A kept-alive connection whose client already sent (part of) its next request:
        that request is read here too, never by a thread waiting for the rest of it."""
        ahead, conn.dragate_ahead = getattr(conn, "dragate_ahead", b""), b""
        if not ahead or not self.alive or fs.cancelled() or fs.exception() is not None:
            super().finish_request(conn, fs)
        elif fs.result() is not True:
            super().finish_request(conn, fs)  # closes it
        else:
            conn.sock.setblocking(False)
            self._read_in_loop(conn, handshaking=False, ahead=ahead)

    def _read_in_loop(self, conn: Any, *, handshaking: bool, ahead: bytes = b"") -> None:
        """Read the request now; only what is not here yet waits in the poller (the bytes of
        a kept-alive connection's next request usually are, sparing two epoll calls)."""
        reading = _Reading(conn, handshaking, self._max_body)
        try:
            progress = self._feed(reading, ahead) if ahead else Progress.MORE
        except OSError:  # the 100 Continue could not be sent: the client left
            progress = None
        if progress is Progress.MORE:
            self._advance(reading, None)
        else:
            self._settle(reading, progress)

    def _advance(self, reading: _Reading, _fileobj: Any) -> None:
        if reading.done:  # evicted while its event was waiting in the same poller batch
            return
        try:
            progress = self._step(reading)
        except OSError:  # ssl.SSLError included: a failed handshake, a reset
            progress = None
        except Exception:  # a bug here must cost one connection, never the worker's loop
            self.log.exception("reading a request failed")
            progress = None
        self._settle(reading, progress)

    def _settle(self, reading: _Reading, progress: Progress | None) -> None:
        if progress is None:
            self._drop(reading)
        elif progress is Progress.WHOLE:
            self._dispatch(reading)
        elif progress is Progress.REFUSED:
            self._refuse(reading)
        else:
            self._wait(reading)
            self._shed_load(reading.peer)

    def _wait(self, reading: _Reading) -> None:
        sock, callback = reading.conn.sock, partial(self._advance, reading)
        if reading.registered:
            self.poller.modify(sock, reading.waits_for, callback)
            return
        self.poller.register(sock, reading.waits_for, callback)
        reading.registered = True
        self._reading.append(reading)

    def _step(self, reading: _Reading) -> Progress | None:
        """Handshake, then read what has arrived; None once the client left (or, draining,
        once enough was dropped)."""
        sock = reading.conn.sock
        if reading.handshaking and not self._handshake(reading):
            return Progress.MORE
        while True:
            try:
                chunk = sock.recv(65536)
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError):
                return Progress.MORE
            if not chunk:
                return None
            if reading.draining is not None:
                reading.draining -= len(chunk)
                if reading.draining <= 0:
                    return None
                continue
            progress = self._feed(reading, chunk)
            if progress is not Progress.MORE:
                return progress

    def _feed(self, reading: _Reading, chunk: bytes) -> Progress:
        self._count(reading, len(chunk))
        progress = reading.reader.feed(chunk)
        if progress is not Progress.REFUSED and self._uncertified_review(reading):
            reading.reader.refusal = Refusal(403, UNCERTIFIED)  # before reading any body
            return Progress.REFUSED
        if reading.reader.expects_continue and not reading.continued:
            reading.continued = True  # the client waits for this before sending the body
            reading.conn.sock.send(CONTINUE)
        return progress

    def _uncertified_review(self, reading: _Reading) -> bool:
        """With mTLS, a review from a peer without a client certificate (routes.py answers
        the same; here it costs no body read)."""
        if not (self._require_cert and reading.reader.headers_done):
            return False
        path = b"".join(reading.reader.path).partition(b"?")[0]
        return path in REVIEW_PATHS and not reading.conn.sock.getpeercert()

    def _count(self, reading: _Reading, size: int) -> None:
        reading.counted += size
        self._buffered += size
        self._by_peer[reading.peer] = self._by_peer.get(reading.peer, 0) + size

    def _shed_load(self, peer: str) -> None:
        """Past the worker's budget, or a client's share of it, the connection holding the
        most bytes goes (one client's flood evicts its own connections first)."""
        while self._by_peer.get(peer, 0) > PEER_SHARE:
            if not self._evict([r for r in self._reading if not r.done and r.peer == peer]):
                break
        while self._buffered > WORKER_BUDGET:
            if not self._evict([r for r in self._reading if not r.done]):
                break

    def _evict(self, candidates: list[_Reading]) -> bool:
        if not candidates:
            return False
        largest = max(candidates, key=lambda r: r.counted)
        self.log.warning("too many bytes of unfinished requests; closing %s", largest.peer)
        _send_quietly(largest.conn.sock, error_response(503, "server busy: too many "
                                                        "unfinished requests"))  # fmt: skip
        self._drop(largest)
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

    def _refuse(self, reading: _Reading) -> None:
        """Answer a refusal now; then drop what the client still sends, up to a bound, so it
        reads the answer instead of a reset."""
        refusal = reading.reader.refusal
        assert refusal is not None
        self.log.warning("refused a request: %s", refusal.message)
        _send_quietly(reading.conn.sock, error_response(refusal.code, refusal.message))
        if refusal.drain <= 0:
            self._drop(reading)
            return
        self._release(reading)
        reading.draining = refusal.drain
        self._wait(reading)

    def _time_out(self, reading: _Reading) -> None:
        if reading.reader.headers_done and reading.draining is None:
            _send_quietly(reading.conn.sock, error_response(408, "request not received in time"))
        self._drop(reading)

    def _dispatch(self, reading: _Reading) -> None:
        """Hand the connection and its buffered request on to be answered (`_serve`)."""
        conn = self._finish(reading)
        end = reading.reader.end
        conn.dragate_ahead = bytes(reading.reader.data[end:])
        conn.data_ready = True
        path = b"".join(reading.reader.path).partition(b"?")[0]
        self._serve(conn, bytes(reading.reader.data[:end]), path)

    def _serve(self, conn: Any, request: bytes, path: bytes) -> None:
        """A pool thread answers the request (`loopserving` answers reviews in the loop)."""
        self._buffer(conn, request)
        self.enqueue_req(conn)

    def _buffer(self, conn: Any, request: bytes, *, fresh: bool = False) -> None:
        """Give the connection's parser (a new one when `fresh`) the buffered request."""
        if conn.parser is None or fresh:  # a new connection: what gthread's TConn.init() does
            conn.parser = http.get_parser(self.cfg, conn.sock, conn.client)
            conn.initialized = True
        conn.parser.unreader.unread(request)

    def _drop(self, reading: _Reading) -> None:
        conn = self._finish(reading)
        self.nr_conns -= 1
        conn.close()

    def _finish(self, reading: _Reading) -> Any:
        reading.done = True
        self._release(reading)
        if reading.registered:
            with contextlib.suppress(KeyError, ValueError, OSError):
                self.poller.unregister(reading.conn.sock)
        return reading.conn

    def _release(self, reading: _Reading) -> None:
        """Take the request's bytes out of the budget (the buffer itself stays for dispatch)."""
        self._buffered -= reading.counted
        left = self._by_peer.get(reading.peer, 0) - reading.counted
        if left > 0:
            self._by_peer[reading.peer] = left
        else:
            self._by_peer.pop(reading.peer, None)
        reading.counted = 0


def _send_quietly(sock: Any, data: bytes) -> None:
    """Best effort, never blocking the loop: a small reply to a client about to be closed."""
    with contextlib.suppress(OSError, ValueError):
        sock.send(data)


_PARSE_STATUS: dict[type[Exception], int] = {
    parse_errors.UnsupportedTransferCoding: 501,
    parse_errors.LimitRequestLine: 414,
    parse_errors.LimitRequestHeaders: 431,
    parse_errors.ExpectationFailed: 417,
    parse_errors.ForbiddenProxyRequest: 403,
    parse_errors.ConfigurationProblem: 500,
    parse_errors.ParseException: 400,
    ssl.SSLError: 403,
}


def _parse_error_status(exc: Exception) -> int | None:
    """gunicorn's status for a client's protocol error; None for anything else (a bug)."""
    ours = (parse_errors.InvalidResponseHeader, parse_errors.InvalidResponseHeaderName)
    if isinstance(exc, ours):
        return None  # the app's fault, not the client's
    return next((code for kind, code in _PARSE_STATUS.items() if isinstance(exc, kind)), None)
