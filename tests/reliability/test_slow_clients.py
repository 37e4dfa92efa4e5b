"""Clients that connect and stall cannot starve the API server's reviews (slowloris).

Stock gthread blocked a pool thread per such connection with no time limit; 12 of them made
`dragate serve` stop answering (see webhook/admission/slowclients.py). Each case opens three
times as many stalled connections as the server has threads, then a real review must still
be answered, and the server must close every stalled connection by itself.
"""

from __future__ import annotations

import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from reliability.reliability_support import Serve, claim, request, review, start, write_policies

from webhook.admission.slowclients import REQUEST_SECONDS

STALLED = 24  # the server runs 2 workers x 4 threads
HEADERS = b"POST /validate HTTP/1.1\r\nHost: dragate\r\nContent-Type: application/json\r\n"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    tmp = tmp_path_factory.mktemp("slow-clients")
    running = start(
        tmp, "slow", policies=write_policies(tmp / "policies", {"team-a": 2}),
        cert_dir=tmp / "certs",
    )  # fmt: skip
    yield running
    assert running.stop() == 0, running.logs()


def _tls(raw: socket.socket) -> ssl.SSLSocket:
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    return context.wrap_socket(raw, server_hostname="localhost")


def _silent(raw: socket.socket) -> socket.socket:
    return raw


def _partial_tls_record(raw: socket.socket) -> socket.socket:
    raw.sendall(b"\x16\x03\x01")  # the first bytes of a ClientHello, then nothing
    return raw


def _partial_headers(raw: socket.socket) -> socket.socket:
    tls = _tls(raw)
    tls.sendall(HEADERS)  # no blank line: the headers never end
    return tls


def _partial_body(raw: socket.socket) -> socket.socket:
    tls = _tls(raw)
    tls.sendall(HEADERS + b"Content-Length: 1000\r\n\r\n{")
    return tls


def _large_body_stalled(raw: socket.socket) -> socket.socket:
    """1 MiB of a declared 2 MiB: read by the event loop, answered 408 at the deadline."""
    tls = _tls(raw)
    size = 2 * 1024 * 1024
    tls.sendall(HEADERS + b"Content-Length: %d\r\n\r\n" % size + b" " * (size // 2))
    return tls


def _chunked_stalled(raw: socket.socket) -> socket.socket:
    """Chunked framing, one chunk, then nothing: the end of the body cannot come."""
    tls = _tls(raw)
    tls.sendall(HEADERS + b"Transfer-Encoding: chunked\r\n\r\n1\r\n{\r\n")
    return tls


def _kept_alive_then_partial(raw: socket.socket) -> socket.socket:
    """One whole request on a kept-alive connection, then half of the next one."""
    tls = _tls(raw)
    tls.sendall(b"GET /healthz HTTP/1.1\r\nHost: dragate\r\n\r\n")
    assert b" 200 " in tls.recv(4096)
    tls.sendall(b"GET /healthz HTTP/1.1\r\n")
    return tls


def _pipelined_then_partial(raw: socket.socket) -> socket.socket:
    """A whole request and, in the same write, half of the next one (HTTP pipelining)."""
    tls = _tls(raw)
    tls.sendall(b"GET /healthz HTTP/1.1\r\nHost: dragate\r\n\r\nGET /healthz HTTP/1.1\r\n")
    return tls


Opener = Callable[[socket.socket], socket.socket]
TIMED_OUT = (b" 408 ",)
KINDS: dict[str, tuple[Opener, int, tuple[bytes, ...]]] = {
    # kind: (how the connection stalls, how many, what the server may answer before closing)
    "silent": (_silent, STALLED, (b"",)),
    "partial-tls-record": (_partial_tls_record, STALLED, (b"",)),
    "partial-headers": (_partial_headers, STALLED, (b"",)),
    "partial-body": (_partial_body, STALLED, TIMED_OUT),
    "kept-alive-then-partial": (_kept_alive_then_partial, STALLED, (b"",)),
    # 24 MiB pending from one address is past its share of the worker's budget: the
    # connections holding most are evicted (503) before the rest time out (408)
    "large-body-stalled": (_large_body_stalled, STALLED, (*TIMED_OUT, b" 503 ")),
    "chunked-stalled": (_chunked_stalled, STALLED, TIMED_OUT),
    # the first answer, then the half request waits in the event loop, not in a thread
    "pipelined-then-partial": (_pipelined_then_partial, 2 * STALLED, (b" 200 ",)),
}


def _stall(port: int, opener: Opener, count: int) -> list[socket.socket]:
    return [opener(socket.create_connection(("127.0.0.1", port), timeout=30)) for _ in range(count)]


def _closed_by_server(conn: socket.socket, seconds: float) -> bytes:
    """Everything the server sent before closing; fails if it is still open after `seconds`."""
    conn.settimeout(seconds)
    received = b""
    try:
        while chunk := conn.recv(4096):
            received += chunk
    except (ConnectionResetError, ssl.SSLError, BrokenPipeError):
        pass
    except TimeoutError:
        pytest.fail("the server kept a stalled connection open")
    return received


def _review_answered(server: Serve, uid: str) -> None:
    body = review(claim(f"c-{uid}", "team-a"), uid, dry_run=True)
    status, answer = request(server.port, server.cert_dir / "ca.crt", "POST", "/validate", body)
    assert status == 200 and answer["response"]["allowed"] is True


@pytest.mark.parametrize("kind", list(KINDS), ids=list(KINDS))
def test_stalled_connections_do_not_starve_reviews(server: Serve, kind: str) -> None:
    opener, count, answers = KINDS[kind]
    stalled = _stall(server.port, opener, count)
    try:
        time.sleep(0.5)  # every stalled connection has reached a worker
        _review_answered(server, kind)
        sent = [_closed_by_server(conn, REQUEST_SECONDS + 10) for conn in stalled]
        assert all(any(a in received for a in answers) for received in sent), sent[:2]
    finally:
        for conn in stalled:
            conn.close()


def test_a_trickling_client_is_cut_off_by_the_total_deadline(server: Serve) -> None:
    """One byte every 0.5 s never trips a per-read timeout; the request deadline ends it."""
    stalled = _stall(server.port, _tls, STALLED)
    cut_off: list[float] = []
    started = time.monotonic()

    def trickle(conn: socket.socket) -> None:
        try:
            for byte in (HEADERS + b"X-Padding: " + b"a" * 200).decode():
                conn.sendall(byte.encode())
                time.sleep(0.5)
        except OSError:
            cut_off.append(time.monotonic() - started)

    threads = [threading.Thread(target=trickle, args=(c,), daemon=True) for c in stalled]
    for thread in threads:
        thread.start()
    try:
        time.sleep(0.5)
        _review_answered(server, "trickle")
        for thread in threads:
            thread.join(timeout=REQUEST_SECONDS + 15)
        assert len(cut_off) == STALLED, f"{STALLED - len(cut_off)} trickling clients still open"
    finally:
        for conn in stalled:
            conn.close()


def test_the_pool_thread_guard_keeps_normal_keep_alive_working(server: Serve) -> None:
    """A kept-alive connection idle longer than the first-byte wait still serves requests."""
    import http.client

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
