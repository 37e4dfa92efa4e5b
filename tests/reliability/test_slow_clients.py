"""Clients that connect and stall cannot starve the API server's reviews (slowloris).

Stock gthread blocked a pool thread per such connection with no time limit; 12 of them made
`dragate serve` stop answering. The gevent worker holds each such connection in a greenlet,
closed when its bound passes (10 s for a TLS handshake, test_fair_serving.py; 10 s for a new
connection's first request line and headers, test_header_deadline.py; 120 s for a later
request's on a kept-alive connection; a stalled body is answered 408 after 5 s,
test_attacks.py), so the guarantee tested is the one that matters:
while they are held open, every legitimate review is answered, each within 1 s (from
connecting to the answer, on a new TLS connection).
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from reliability.reliability_support import (
    Serve,
    hostile_tls,
    latency_summary,
    serving,
    timed_review,
)

from webhook.admission.firstrequest import HEADER_SECONDS

STALLED = 24
HEADERS = b"POST /validate HTTP/1.1\r\nHost: dragate\r\nContent-Type: application/json\r\n"
MIB = 1024 * 1024
IDLE_TCP, IDLE_TLS = 1000, 2000
HOSTILE_CHUNKED, HOSTILE_PARTIAL, SLOWLORIS = 40, 40, 48
MAX_CONNECTIONS = 8192
LEGIT_SECONDS = 1.0  # the guarantee: each legitimate review answered within this
OPEN_FILES = 2 * (IDLE_TCP + IDLE_TLS) + 1024  # this process's ends, and the server's


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    tmp, limit = tmp_path_factory.mktemp("slow"), ("--max-connections", str(MAX_CONNECTIONS))
    with serving(tmp, "slow", open_files=OPEN_FILES, args=limit) as running:
        yield running


def _silent(raw: socket.socket) -> socket.socket:
    return raw


def _partial_tls_record(raw: socket.socket) -> socket.socket:
    raw.sendall(b"\x16\x03\x01")  # the first bytes of a ClientHello, then nothing
    return raw


def _partial_headers(raw: socket.socket) -> socket.socket:
    tls = hostile_tls(raw)
    tls.sendall(HEADERS)  # no blank line: the headers never end
    return tls


def _partial_body(raw: socket.socket) -> socket.socket:
    tls = hostile_tls(raw)
    tls.sendall(HEADERS + b"Content-Length: 1000\r\n\r\n{")
    return tls


def _large_body_stalled(raw: socket.socket) -> socket.socket:
    """1 MiB of a declared 3 MiB (the limit): the server holds what came and waits."""
    tls = hostile_tls(raw)
    tls.sendall(HEADERS + b"Content-Length: %d\r\n\r\n" % (3 * MIB) + b" " * MIB)
    return tls


def _chunked_stalled(raw: socket.socket) -> socket.socket:
    """Chunked framing, one chunk, then nothing: the end of the body cannot come."""
    tls = hostile_tls(raw)
    tls.sendall(HEADERS + b"Transfer-Encoding: chunked\r\n\r\n1\r\n{\r\n")
    return tls


def _chunked_headers_only(raw: socket.socket) -> socket.socket:
    tls = hostile_tls(raw)
    tls.sendall(HEADERS + b"Transfer-Encoding: chunked\r\n\r\n")
    return tls


def _kept_alive(raw: socket.socket) -> ssl.SSLSocket:
    """One whole request, its answer read to its end; the connection stays open, idle."""
    tls = hostile_tls(raw)
    tls.sendall(b"GET /healthz HTTP/1.1\r\nHost: dragate\r\n\r\n")
    answer = http.client.HTTPResponse(tls)  # type: ignore[arg-type]
    answer.begin()
    assert answer.status == 200 and answer.read()
    answer.close()  # the response's file only: the connection stays open
    return tls


def _kept_alive_then_partial(raw: socket.socket) -> socket.socket:
    """One whole request on a kept-alive connection, then half of the next one."""
    tls = _kept_alive(raw)
    tls.sendall(b"GET /healthz HTTP/1.1\r\n")
    return tls


def _pipelined_then_partial(raw: socket.socket) -> socket.socket:
    """A whole request and, in the same write, half of the next one (HTTP pipelining)."""
    tls = hostile_tls(raw)
    tls.sendall(b"GET /healthz HTTP/1.1\r\nHost: dragate\r\n\r\nGET /healthz HTTP/1.1\r\n")
    assert b" 200 " in tls.recv(4096)  # the first is answered; the half one waits
    return tls


Opener = Callable[[socket.socket], socket.socket]
KINDS: dict[str, Opener] = {
    "silent": _silent,
    "partial-tls-record": _partial_tls_record,
    "partial-headers": _partial_headers,
    "partial-body": _partial_body,
    "kept-alive-then-partial": _kept_alive_then_partial,
    "large-body-stalled": _large_body_stalled,
    "chunked-stalled": _chunked_stalled,
    "chunked-headers-only": _chunked_headers_only,
    "pipelined-then-partial": _pipelined_then_partial,
}


def _stall(port: int, opener: Opener, count: int) -> list[socket.socket]:
    return [opener(socket.create_connection(("127.0.0.1", port), timeout=30)) for _ in range(count)]


def _close_all(conns: list[socket.socket]) -> None:
    for conn in conns:
        conn.close()


def _reviews_within_the_bound(server: Serve, label: str, seconds: float) -> list[float]:
    """Reviews one after another for `seconds`; each must be answered within 1 s."""
    latencies: list[float] = []
    until = time.monotonic() + seconds
    while time.monotonic() < until or len(latencies) < 3:
        latencies.append(timed_review(server, f"{label}-{len(latencies)}"))
    slow = [round(s, 3) for s in latencies if s >= LEGIT_SECONDS]
    assert not slow, f"reviews over {LEGIT_SECONDS}s: {slow} of {latency_summary(latencies)}"
    return latencies


@pytest.mark.parametrize("kind", list(KINDS), ids=list(KINDS))
def test_stalled_connections_do_not_starve_reviews(server: Serve, kind: str) -> None:
    stalled = _stall(server.port, KINDS[kind], STALLED)
    try:
        time.sleep(0.3)  # every stalled connection has been accepted
        _reviews_within_the_bound(server, kind, seconds=0.5)
    finally:
        _close_all(stalled)


def _trickling_header(raw: socket.socket) -> socket.socket:
    tls = _partial_headers(raw)
    tls.sendall(b"X-Pad: ")
    return tls


class Slowloris:
    """TLS connections each adding one byte to a header line every second (the line never
    ends, nor reaches the 4 KiB field limit in the test's time), from one thread. The server
    cuts them at their header deadline; `failures` notes when (seconds since they opened)."""

    def __init__(self, port: int, count: int) -> None:
        self.opened = time.monotonic()
        self.conns = _stall(port, _trickling_header, count)
        self.stop = threading.Event()
        self.sent = 0
        self.failures: list[tuple[float, str]] = []
        self.thread = threading.Thread(target=self._trickle, daemon=True)

    def _trickle(self) -> None:
        while not self.stop.wait(1.0):
            for conn in self.conns:
                try:
                    conn.sendall(b"a")
                except OSError as err:
                    self.failures.append((time.monotonic() - self.opened, repr(err)))
            self.sent += 1

    def __enter__(self) -> Slowloris:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        self.thread.join(timeout=10)
        _close_all(list(self.conns))

    def cut_early(self) -> list[tuple[float, str]]:
        """The sends that failed before the connections' header deadline could have passed."""
        return [(at, err) for at, err in self.failures if at < HEADER_SECONDS]


def test_thousands_of_held_connections_do_not_starve_reviews(server: Serve) -> None:
    """40 header-only chunked, 40 partial 1 MiB bodies, 48 slowloris, 1,000 idle TCP and 2,000
    idle kept-alive TLS connections, all held open while reviews go on, each answered within
    1 s. The kept-alive ones (answered once, as the API server's pooled connections are) stay
    open; hostile ones are held until their own bounds pass."""
    held: list[socket.socket] = []
    try:
        held += _stall(server.port, _chunked_headers_only, HOSTILE_CHUNKED)
        held += _stall(server.port, _large_body_stalled, HOSTILE_PARTIAL)
        held += _stall(server.port, _silent, IDLE_TCP)
        held += _stall(server.port, _kept_alive, IDLE_TLS)
        with Slowloris(server.port, SLOWLORIS) as slowloris:
            latencies = _reviews_within_the_bound(server, "held", seconds=8)
        assert slowloris.sent >= 5 and slowloris.cut_early() == []
        summary = {"held": len(held) + SLOWLORIS, **latency_summary(latencies)}
        print(f"\nreviews beside held connections: {json.dumps(summary)}")
        assert _still_open(held[-IDLE_TLS:]) == IDLE_TLS  # none was dropped to make room
    finally:
        _close_all(held)


def _still_open(conns: list[socket.socket]) -> int:
    """How many of these TLS connections still answer a request."""
    answered = 0
    for conn in conns:
        conn.settimeout(10)
        try:
            conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: dragate\r\n\r\n")
            answered += b" 200 " in conn.recv(4096)
        except OSError:
            pass
    return answered


def test_a_kept_alive_connection_idle_between_requests_still_serves(server: Serve) -> None:
    context = ssl.create_default_context(cafile=str(Path(server.cert_dir) / "ca.crt"))
    conn = http.client.HTTPSConnection("127.0.0.1", server.port, context=context, timeout=15)
    try:
        for pause in (0, 0.5, 1.5):
            time.sleep(pause)
            conn.request("GET", "/healthz")
            response = conn.getresponse()
            assert response.status == 200 and response.read()
    finally:
        conn.close()
