"""The attacks of issue 15 against a real `dragate serve`: each once cost a cluster-wide outage.

- 40 hostile connections (chunked with no body; 1 MiB of a declared 3 MiB), reopened as soon
  as the server closes them, while legitimate reviews must all still be answered;
- framing and contract gaps: a declared 10^12-byte body, OPTIONS, broken chunked framing, a
  broken request line: each a JSON error with its status, never HTML, never a 200;
- a YAML alias bomb in the policy directory: reported on /readyz as an invalid policy while
  the last good set serves, and the next good change is picked up.
"""

from __future__ import annotations

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
    claim,
    eventually,
    pod,
    request,
    review,
    start,
    write_policies,
)

HOSTILE = 40
ATTACK_SECONDS = 8.0
HEADERS = b"POST /validate HTTP/1.1\r\nHost: dragate\r\nContent-Type: application/json\r\n"
MIB = 1024 * 1024


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    tmp = tmp_path_factory.mktemp("attacks")
    running = start(
        tmp, "attacks", policies=write_policies(tmp / "policies", {"team-a": 2}),
        cert_dir=tmp / "certs",
    )  # fmt: skip
    yield running
    assert running.stop() == 0, running.logs()


def _tls(port: int) -> ssl.SSLSocket:
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    raw = socket.create_connection(("127.0.0.1", port), timeout=30)
    return context.wrap_socket(raw, server_hostname="localhost")


def _chunked_no_body(tls: ssl.SSLSocket) -> None:
    tls.sendall(HEADERS + b"Transfer-Encoding: chunked\r\n\r\n")


def _one_of_three_mib(tls: ssl.SSLSocket) -> None:
    tls.sendall(HEADERS + b"Content-Length: %d\r\n\r\n" % (3 * MIB) + b" " * MIB)


def _hostile(
    port: int, send: Callable[[ssl.SSLSocket], None], stop: threading.Event, opened: list[int]
) -> None:
    """One attacker connection, opened again as soon as the server closes it."""
    while not stop.is_set():
        try:
            with _tls(port) as tls:
                send(tls)
                opened.append(1)
                tls.settimeout(0.5)
                while not stop.is_set():
                    try:
                        if not tls.recv(4096):
                            break
                    except TimeoutError:
                        continue
        except (OSError, ssl.SSLError):
            time.sleep(0.05)


def test_forty_hostile_connections_do_not_starve_reviews(server: Serve) -> None:
    stop, opened = threading.Event(), list[int]()
    senders = [_chunked_no_body, _one_of_three_mib] * (HOSTILE // 2)
    attackers = [threading.Thread(target=_hostile, args=(server.port, send, stop, opened),
                                  daemon=True) for send in senders]  # fmt: skip
    for thread in attackers:
        thread.start()
    answered: list[str] = []
    try:
        eventually(lambda: len(opened) >= HOSTILE, seconds=30, what="every attacker connected")
        until = time.monotonic() + ATTACK_SECONDS  # longer than REQUEST_SECONDS: a full cycle
        while time.monotonic() < until:
            uid = f"legit-{len(answered)}"
            body = review(claim(f"c-{uid}", "team-a"), uid, dry_run=True)
            status, answer = request(
                server.port, server.cert_dir / "ca.crt", "POST", "/validate", body, timeout=10
            )  # the apiserver's default
            assert status == 200 and answer["response"]["allowed"] is True, answer
            answered.append(uid)
    finally:
        stop.set()
        for thread in attackers:
            thread.join(timeout=10)
    assert len(answered) >= 3 and len(opened) >= HOSTILE


# --------------------------------------------------------------------------- contract


def _raw_exchange(port: int, data: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send `data` on a new TLS connection; the status, headers and body of the answer."""
    with _tls(port) as tls:
        tls.sendall(data)
        received = b""
        while b"\r\n\r\n" not in received or len(received.partition(b"\r\n\r\n")[2]) < int(
            dict(_headers(received)).get("content-length", "0")
        ):
            chunk = tls.recv(65536)
            if not chunk:
                break
            received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), dict(_headers(received)), body


def _headers(received: bytes) -> list[tuple[str, str]]:
    lines = received.partition(b"\r\n\r\n")[0].decode("latin-1").split("\r\n")[1:]
    return [(n.strip().lower(), v.strip()) for n, _, v in (x.partition(":") for x in lines)]


CONTRACT = {
    # id: (raw request, status, words in the JSON message)
    "declared-a-terabyte": (
        HEADERS + b"Content-Length: 1000000000000\r\n\r\n",
        400,
        "exceeds the 3145728-byte limit",
    ),
    "options-validate": (
        b"OPTIONS /validate HTTP/1.1\r\nHost: dragate\r\n\r\n",
        405,
        "not allowed",
    ),
    "bad-chunk-size": (
        HEADERS + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n",
        400,
        "invalid chunk size",
    ),
    "chunked-and-length": (
        HEADERS + b"Transfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n",
        400,
        "both Content-Length and Transfer-Encoding",
    ),
    "bad-request-line": (
        b"POST /validate HTTP/9\r\nHost: dragate\r\n\r\n",
        400,
        "invalid HTTP request",
    ),
    "bad-header-name": (
        b"POST /validate HTTP/1.1\r\nHo(st: dragate\r\n\r\n",
        400,
        "invalid HTTP request",
    ),
}


@pytest.mark.parametrize(("raw", "status", "words"), CONTRACT.values(), ids=CONTRACT.keys())
def test_errors_are_json_with_their_status(
    server: Serve, raw: bytes, status: int, words: str
) -> None:
    code, headers, body = _raw_exchange(server.port, raw)
    assert code == status, body
    assert headers["content-type"] == "application/json"
    answer = json.loads(body)
    assert answer["code"] == status and words.lower() in answer["message"].lower(), answer


# --------------------------------------------------------------------------- object sizes


def test_four_thousand_same_named_containers_are_refused_before_any_work(server: Serve) -> None:
    """The legacy Pod that cost minutes of rewriting: Kubernetes refuses it (duplicate names),
    so both endpoints deny it at once, with the reason."""
    gpu = {"name": "c", "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": 1}}}
    body = review(pod("legacy", "team-a", containers=[gpu] * 4000), "dup-1")
    for path in ("/mutate", "/validate"):
        status, answer = request(server.port, server.cert_dir / "ca.crt", "POST", path, body)
        assert status == 200 and answer["response"]["allowed"] is False, answer
        assert "container name 'c' is used twice" in answer["response"]["status"]["message"]


# --------------------------------------------------------------------------- alias bomb


def laughs(levels: int = 9) -> str:
    lines = ["l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 10) + "]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def test_an_alias_bomb_is_reported_and_reloading_goes_on(tmp_path: Path) -> None:
    policies = write_policies(tmp_path / "policies", {"team-a": 2})
    server = start(tmp_path, "bomb", policies=policies, cert_dir=tmp_path / "certs")
    trust = server.cert_dir / "ca.crt"

    def readyz() -> dict[str, object]:
        status, body = request(server.port, trust, "GET", "/readyz")
        assert status == 200
        policies_status: dict[str, object] = body["policies"]
        return policies_status

    def allowed(count: int, uid: str) -> bool:
        body = review(claim(f"c-{uid}", "team-a", count), uid, dry_run=True)
        answer = request(server.port, trust, "POST", "/validate", body)[1]
        return bool(answer["response"]["allowed"])

    try:
        (policies / "bomb.yaml").write_text(laughs())
        eventually(lambda: all(readyz()["state"] == "stale" for _ in range(8)),
                   what="stale on every worker")  # fmt: skip
        errors = " ".join(str(e) for e in readyz()["errors"])  # type: ignore[attr-defined]
        assert "bomb.yaml" in errors and "aliases expand" in errors
        assert allowed(2, "a") and not allowed(3, "b")  # the last good set judges
        (policies / "bomb.yaml").unlink()
        write_policies(policies, {"team-a": 3})  # the next good change is picked up
        eventually(lambda: all(readyz()["state"] == "current" for _ in range(8)),
                   what="current on every worker")  # fmt: skip
        eventually(lambda: all(allowed(3, f"c{i}") for i in range(8)), what="new quota")
    finally:
        assert server.stop() == 0, server.logs()
