"""`firstrequest.FirstRequests`: a new connection's header deadline, on a real gevent loop
with real socket pairs."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import gevent
import pytest

from webhook.admission.config import ServeConfig, TlsFiles
from webhook.admission.firstrequest import Arrivals, FirstRequests, shut_down
from webhook.admission.server import DragateServer

SECONDS = 0.05


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    ours, peer = socket.socketpair()
    peer.settimeout(5)
    yield ours, peer
    ours.close()
    peer.close()


def _ended(peer: socket.socket) -> bool:
    """Whether the connection has been shut down (the peer reads its end), else False once
    the peer finds nothing to read."""
    peer.settimeout(0.2)
    try:
        return peer.recv(1) == b""
    except TimeoutError:
        return False


def _nothing(_deadlines: FirstRequests, _ours: socket.socket) -> None:
    return None


def _disarm(deadlines: FirstRequests, ours: socket.socket) -> None:
    deadlines.disarm(ours)


def _arm_again(deadlines: FirstRequests, ours: socket.socket) -> None:
    deadlines.arm(ours)  # a second handshake keeps the one deadline
    assert len(deadlines) == 1


Step = Callable[[FirstRequests, socket.socket], None]
CASES: dict[str, tuple[Step, bool]] = {
    "fires": (_nothing, True),
    "disarmed": (_disarm, False),
    "armed-twice": (_arm_again, True),
}


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_a_deadline_ends_its_connection_unless_disarmed(
    pair: tuple[socket.socket, socket.socket], case: str
) -> None:
    ours, peer = pair
    step, ends = CASES[case]
    deadlines = FirstRequests(seconds=SECONDS)
    deadlines.arm(ours)
    step(deadlines, ours)
    gevent.sleep(SECONDS * 4)
    assert len(deadlines) == 0  # fired or disarmed: nothing is kept
    assert _ended(peer) is ends


def test_a_deadline_fires_once_per_connection() -> None:
    ended: list[object] = []
    deadlines = FirstRequests(seconds=SECONDS, end=ended.append)
    first, second = object(), object()
    deadlines.arm(first)
    deadlines.arm(second)
    deadlines.arm(first)
    gevent.sleep(SECONDS * 4)
    assert sorted(map(id, ended)) == sorted([id(first), id(second)])
    assert len(deadlines) == 0


def test_a_connection_closed_before_its_deadline_is_left_alone(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    """Its descriptor's number, free again, may be another connection's by then: that one
    is not shut down."""
    ours, _peer = pair
    deadlines = FirstRequests(seconds=SECONDS)
    deadlines.arm(ours)
    ours.close()
    other, other_peer = socket.socketpair()  # likely on the number `ours` had
    try:
        gevent.sleep(SECONDS * 4)  # fires on a closed socket: nothing kept
        assert len(deadlines) == 0
        other.sendall(b"open")
        other_peer.settimeout(5)
        assert other_peer.recv(16) == b"open" and not _ended(other_peer)
    finally:
        other.close()
        other_peer.close()


def test_disarming_what_was_never_armed_does_nothing(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    ours, peer = pair
    FirstRequests(seconds=SECONDS).disarm(ours)
    ours.sendall(b"open")
    assert peer.recv(16) == b"open"


@pytest.mark.parametrize("sock", [None, object()], ids=["none", "not-a-socket"])
def test_shutting_down_what_is_no_socket_does_nothing(sock: object) -> None:
    shut_down(sock)


def test_a_request_through_arrivals_ends_its_connections_deadline(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    ours, peer = pair
    deadlines = FirstRequests(SECONDS)
    deadlines.arm(ours)
    seen: list[object] = []
    served = Arrivals(lambda environ, _start: seen.append(environ) or [b"ok"], deadlines)
    assert served({"gunicorn.socket": ours}, None) == [b"ok"]
    assert seen and len(deadlines) == 0
    gevent.sleep(SECONDS * 3)
    assert not _ended(peer)


def test_every_app_dragate_server_serves_is_behind_arrivals(tmp_path: Path) -> None:
    """A subclass serving another app (the benchmark's no-op) gets the deadline's end too."""

    class Other(DragateServer):
        def application(self) -> object:
            return "the app"

    tls = TlsFiles(tmp_path / "tls.crt", tmp_path / "tls.key")
    loaded = Other(ServeConfig(Path("p"), tls, host="127.0.0.1", port=9443)).load()
    assert isinstance(loaded, Arrivals) and loaded.app == "the app"
