"""A listening socket per worker (listeners.py), over the real `dragate serve`: who listens,
where connections opened at once land, and that stopping or replacing a worker loses none."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from admission import server_support
from admission.admission_support import pod, review_body
from admission.server_support import Server, start
from admission.worker_sockets import (
    TIME_WAIT,
    accepted_by,
    children,
    listeners_by_pid,
    tcp_sockets,
)

WORKERS = 2
CONNECTIONS = 8
ROUNDS = 3  # 8 connections all hashed to one of 2 sockets: 1 in 128; three rounds: 1 in 2 M


def _eventually(check: Callable[[], bool], seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError("condition not reached in time")


def _listening_workers(server: Server) -> dict[int, set[int]]:
    workers = children(server.process.pid)
    return {pid: own for pid, own in listeners_by_pid(server.port, workers).items() if own}


def _all_listening(server: Server, count: int = WORKERS) -> None:
    _eventually(lambda: len(_listening_workers(server)) == count)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    running = start(tmp_path_factory.mktemp("listeners"))
    _all_listening(running)
    yield running
    assert running.stop() == 0, running.logs()


def _connection(server: Server) -> http.client.HTTPSConnection:
    context = ssl.create_default_context(cafile=str(server.trust))
    return http.client.HTTPSConnection("127.0.0.1", server.port, context=context, timeout=10)


def _review(conn: http.client.HTTPSConnection) -> int:
    body = json.dumps(review_body()).encode()
    conn.request("POST", "/validate", body, {"Content-Type": "application/json"})
    reply = conn.getresponse()
    reply.read()
    return reply.status


def test_each_worker_listens_on_its_own_socket(server: Server) -> None:
    workers = children(server.process.pid)
    held = listeners_by_pid(server.port, [server.process.pid, *workers])
    assert held.pop(server.process.pid) == set(), "the master holds a listener no one accepts on"
    assert sorted(len(own) for own in held.values()) == [1] * WORKERS, held
    assert len(set().union(*held.values())) == WORKERS, "workers share one socket"


def _spread_of_connections_opened_at_once(server: Server) -> dict[int | None, int]:
    connections = [_connection(server) for _ in range(CONNECTIONS)]
    try:
        for conn in connections:
            conn.connect()
        assert [_review(conn) for conn in connections] == [200] * CONNECTIONS
        ports = [conn.sock.getsockname()[1] for conn in connections]
        served = accepted_by(server.port, ports, children(server.process.pid))
        assert _review(connections[0]) == 200  # still kept alive, by the same worker
        assert accepted_by(server.port, ports[:1], children(server.process.pid)) == {
            ports[0]: served[ports[0]]
        }
    finally:
        for conn in connections:
            conn.close()
    spread: dict[int | None, int] = {}
    for pid in served.values():
        spread[pid] = spread.get(pid, 0) + 1
    return spread


def test_connections_opened_at_once_reach_both_workers(server: Server) -> None:
    spreads = []
    for _ in range(ROUNDS):
        spread = _spread_of_connections_opened_at_once(server)
        assert None not in spread, spread
        spreads.append(spread)
        if len(spread) == WORKERS:
            return
    raise AssertionError(f"every round landed on one worker: {spreads}")


def _new_connections_answer(server: Server, seconds: float) -> list[str]:
    """/healthz on a new connection after another for `seconds`; the failures, if any."""
    failures = []
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        conn = _connection(server)
        conn.timeout = 2
        try:
            conn.request("GET", "/healthz")
            status = conn.getresponse().status
            if status != 200:
                failures.append(f"status {status}")
        except OSError as err:  # a reset, or a connection queued where no one accepts
            failures.append(repr(err))
        finally:
            conn.close()
    return failures


def test_a_stopping_worker_stops_listening_at_once(tmp_path: Path) -> None:
    """A worker told to stop while a review is in flight keeps serving it, but new connections
    go to the others at once, not into a queue that is reset when it exits."""
    server = start(tmp_path, "--graceful-timeout", "10")
    try:
        _all_listening(server)
        slow_conn = _connection(server)
        slow = threading.Thread(target=lambda: results.append(_slow_review(slow_conn)))
        results: list[int] = []
        slow.start()
        time.sleep(0.5)
        port = slow_conn.sock.getsockname()[1]
        stopping = accepted_by(server.port, [port], children(server.process.pid))[port]
        assert stopping is not None
        os.kill(stopping, signal.SIGTERM)
        _eventually(lambda: stopping not in _listening_workers(server), seconds=2)
        assert os.path.exists(f"/proc/{stopping}"), "the worker exited before its review ended"
        assert _new_connections_answer(server, 1.0) == []
        slow.join(10)
        assert results == [200]
    finally:
        assert server.stop() == 0, server.logs()


def _slow_review(conn: http.client.HTTPSConnection) -> int:
    body = json.dumps(review_body(pod(sleep="2"))).encode()
    conn.request("POST", "/validate", body, {"Content-Type": "application/json"})
    reply = conn.getresponse()
    reply.read()
    conn.close()
    return reply.status


def test_hup_replaces_workers_without_refusing_a_connection(tmp_path: Path) -> None:
    server = start(tmp_path)
    try:
        _all_listening(server)
        before = set(children(server.process.pid))
        failures: list[str] = []
        probe = threading.Thread(target=lambda: failures.extend(_new_connections_answer(server, 4)))
        probe.start()
        time.sleep(0.3)
        server.process.send_signal(signal.SIGHUP)
        probe.join(10)
        assert failures == []
        _eventually(lambda: set(_listening_workers(server)).isdisjoint(before))
        _all_listening(server)
    finally:
        assert server.stop() == 0, server.logs()


def test_a_restart_on_the_same_port_starts_despite_time_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Connections the server closed stay in TIME_WAIT on its port for a minute; the check
    for a taken port must not count them (a container restarted in the same pod)."""
    first = start(tmp_path / "first")
    kept = [_connection(first) for _ in range(4)]  # kept alive: the stopping server closes
    assert [_review(conn) for conn in kept] == [200] * 4
    assert first.stop() == 0, first.logs()
    for conn in kept:  # the server closed first, so its side waits in TIME_WAIT
        conn.close()
    waiting = [s for s in tcp_sockets() if s.local_port == first.port and s.state == TIME_WAIT]
    assert waiting, "no connection of the first run left in TIME_WAIT"
    monkeypatch.setattr(server_support, "free_port", lambda: first.port)
    second = start(tmp_path / "second")
    assert second.port == first.port
    assert second.stop() == 0, second.logs()


def test_a_taken_port_fails_at_once(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-c", "from webhook.cli import main; main()", "serve",
             "--port", str(port), "--cert-dir", str(tmp_path / "certs")],
            check=False, capture_output=True, text=True, timeout=60,
            env={**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")},
        )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr
