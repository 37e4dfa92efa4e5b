"""A new connection's first request line and headers must arrive within `HEADER_SECONDS` of
its handshake (firstrequest.py), with or without SNI; a kept-alive connection idles under the
keep-alive timeout (120 s) instead. Real `dragate serve`, real TLS."""

from __future__ import annotations

import http.client
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from reliability.reliability_support import (
    Serve,
    hostile_tls,
    serving,
    timed_review,
    tls_context,
)

from webhook.admission.firstrequest import HEADER_SECONDS

CUT_WITHIN = 20.0  # generous: the deadline, plus slack for a loaded machine; far below 120 s
WATCHED = 40.0  # how long a client waits to be cut before the test gives up


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    with serving(tmp_path_factory.mktemp("header-deadline"), "header") as running:
        yield running


def _nothing(_tls: ssl.SSLSocket) -> None:
    return None


def _partial_line(tls: ssl.SSLSocket) -> None:
    tls.sendall(b"POST /valid")


def _header_begun(tls: ssl.SSLSocket) -> None:
    tls.sendall(b"POST /validate HTTP/1.1\r\nHost: dragate\r\nX-Pad: ")


Begin = Callable[[ssl.SSLSocket], None]
CLIENTS: dict[str, tuple[Begin, bytes]] = {
    # what is sent after the handshake, then what is sent again every second
    "silent": (_nothing, b""),
    "trickled-header": (_header_begun, b"a"),
    "partial-request-line": (_partial_line, b""),
}


def _cut_after(tls: ssl.SSLSocket, each_second: bytes) -> float:
    """Seconds until the server ends the connection (`WATCHED` if it never does), sending
    `each_second` once a second meanwhile."""
    started = time.monotonic()
    tls.settimeout(1.0)
    while time.monotonic() - started < WATCHED:
        try:
            if each_second:
                tls.sendall(each_second)
            if tls.recv(1) == b"":
                break
        except TimeoutError:
            continue
        except OSError:  # a reset, or the TLS layer's end without a close_notify
            break
    return time.monotonic() - started


def _client(port: int, begin: Begin, each: bytes, sni: str | None, out: dict[str, float]) -> None:
    raw = socket.create_connection(("127.0.0.1", port), timeout=30)
    with hostile_tls(raw, server_hostname=sni) as tls:
        begin(tls)
        out[str(sni)] = _cut_after(tls, each)


@pytest.mark.parametrize("kind", list(CLIENTS), ids=list(CLIENTS))
def test_a_first_request_not_sent_in_time_ends_its_connection(server: Serve, kind: str) -> None:
    """With SNI and without it (the SNI callback runs for both), at once."""
    begin, each = CLIENTS[kind]
    cut: dict[str, float] = {}
    threads = [
        threading.Thread(target=_client, args=(server.port, begin, each, sni, cut))
        for sni in ("localhost", None)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=WATCHED + 30)
    assert set(cut) == {"localhost", "None"}, cut
    for seconds in cut.values():
        assert HEADER_SECONDS / 2 <= seconds < CUT_WITHIN, cut
    timed_review(server, f"after-{kind}")  # the server answers as before
    assert "Traceback" not in server.logs()  # closed quietly, as a client gone


def test_a_kept_alive_connection_idles_past_the_header_deadline(server: Serve) -> None:
    """The deadline is the first request's: a connection answered once then idle for longer
    is still served, under the keep-alive timeout."""
    context = tls_context(server.cert_dir / "ca.crt")
    conn = http.client.HTTPSConnection("127.0.0.1", server.port, context=context, timeout=15)
    try:
        socks = []
        for pause in (0.0, HEADER_SECONDS + 2):
            time.sleep(pause)
            conn.request("GET", "/healthz")
            response = conn.getresponse()
            assert response.status == 200 and response.read()
            socks.append(conn.sock)
        assert socks[0] is socks[1] is not None  # one connection, not a new one
    finally:
        conn.close()


def test_a_review_on_a_new_connection_is_answered(server: Serve) -> None:
    assert timed_review(server, "new-connection") < CUT_WITHIN
