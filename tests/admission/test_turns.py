"""`turns.Turns`: what every request gets before it is answered (a real gevent loop, a
real socket pair for the write bound)."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterable
from typing import Any

import gevent
import pytest

from webhook.admission.routes import ARRIVED
from webhook.admission.turns import Turns

Environ = dict[str, Any]


def _answer(seen: list[Environ]) -> Any:
    def app(environ: Environ, start_response: Any) -> Iterable[bytes]:
        seen.append(dict(environ))
        start_response("200 OK", [])
        return [b"ok"]

    return app


@pytest.mark.parametrize(
    ("given", "kept"), [({}, False), ({ARRIVED: 1.0}, True)], ids=["noted", "kept"]
)
def test_the_arrival_is_noted_before_the_app_runs(given: Environ, kept: bool) -> None:
    seen: list[Environ] = []
    before = time.monotonic()
    body = Turns(_answer(seen))({**given}, lambda *_: None)
    list(body)
    body.close()  # type: ignore[attr-defined]
    arrived = seen[0][ARRIVED]
    assert arrived == 1.0 if kept else before <= arrived <= time.monotonic()


def test_each_request_yields_the_loop_once_before_it_is_answered() -> None:
    """Another greenlet ready to run runs before the app answers: a pipelined request never
    keeps the loop from the other connections."""
    order: list[str] = []
    app = Turns(lambda environ, start: order.append("answered") or [b""])
    other = gevent.spawn(order.append, "other connection")
    app({}, lambda *_: None).close()  # type: ignore[attr-defined]
    other.join()
    assert order == ["other connection", "answered"]


def test_an_answer_not_written_in_time_ends_the_connection() -> None:
    """The write bound fires while the answer is still unsent (the server's write blocked):
    the connection is shut down, and the peer sees its end."""
    ours, peer = socket.socketpair()
    try:
        Turns(_answer([]), write_seconds=0.05)({"gunicorn.socket": ours}, lambda *_: None)
        gevent.sleep(0.2)  # never closed: the write is still blocked
        peer.settimeout(5)
        assert peer.recv(1) == b""
    finally:
        ours.close()
        peer.close()


def test_an_answer_written_in_time_keeps_the_connection() -> None:
    ours, peer = socket.socketpair()
    try:
        body = Turns(_answer([]), write_seconds=0.05)({"gunicorn.socket": ours}, lambda *_: None)
        assert list(body) == [b"ok"]
        body.close()  # type: ignore[attr-defined]
        gevent.sleep(0.2)
        ours.sendall(b"still open")
        assert peer.recv(64) == b"still open"
    finally:
        ours.close()
        peer.close()
