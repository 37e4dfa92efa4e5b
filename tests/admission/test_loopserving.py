"""Reviews answered in the worker's event loop (webhook/admission/loopserving.py), through the
real `dragate serve` over TLS with the pipeline double (`thread=yes` names the answering
thread; `sleep` waits as a review waiting on the API server would)."""

from __future__ import annotations

import json
import socket
import ssl
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from admission.admission_support import pod, review_body
from admission.server_support import Server, start


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    running = start(tmp_path_factory.mktemp("loop"))
    yield running
    assert running.stop() == 0, running.logs()


def _warnings(answer: dict[str, Any]) -> list[str]:
    return list(answer["response"].get("warnings", []))


def _reviews_logged(server: Server, uid: str) -> int:
    """How often `uid` was logged as a review, once its log line is in: the line is written
    after the answer is sent, so it may land just after the client has read the answer."""
    deadline = time.monotonic() + 5
    while True:
        lines = [json.loads(line) for line in server.logs().splitlines() if line.startswith("{")]
        count = sum(1 for e in lines if e.get("msg") == "review" and e.get("uid") == uid)
        if count or time.monotonic() > deadline:
            return count
        time.sleep(0.02)


@pytest.mark.parametrize("endpoint", ["/validate", "/mutate"])
def test_a_review_that_needs_no_wait_is_answered_in_the_loop(server: Server, endpoint: str) -> None:
    answer = server.post(endpoint, review_body(pod(thread="yes"))).json()
    assert answer["response"]["allowed"] is True
    assert "answered by MainThread" in _warnings(answer)


def test_a_review_that_would_wait_is_answered_again_by_a_pool_thread(server: Server) -> None:
    """Its attempt in the loop stops before the wait, unsent and uncounted: one answer, from
    a pool thread, and one review in the log."""
    uid = str(uuid.uuid4())
    answer = server.post("/validate", review_body(pod(thread="yes", sleep="0.05"), uid=uid))
    assert answer.status_code == 200
    reply = answer.json()
    assert reply["response"]["uid"] == uid and reply["response"]["allowed"] is True
    threads = [w for w in _warnings(reply) if w.startswith("answered by ")]
    assert len(threads) == 1 and "MainThread" not in threads[0], threads
    assert _reviews_logged(server, uid) == 1


def test_pipelined_reviews_are_answered_in_order_on_one_connection(server: Server) -> None:
    """Two requests in one write: the second is read from what the first left buffered."""
    uids = [str(uuid.uuid4()) for _ in range(2)]
    bodies = [json.dumps(review_body(pod(thread="yes"), uid=uid)).encode() for uid in uids]
    requests = b"".join(
        b"POST /validate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
        for body in bodies
    )
    context = ssl.create_default_context(cafile=str(server.trust))
    raw = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    with context.wrap_socket(raw, server_hostname="localhost") as tls:
        tls.sendall(requests)
        answered = _read_answers(tls, 2)
    assert [a["response"]["uid"] for a in answered] == uids


def test_a_review_is_answered_alike_with_and_without_gunicorns_parser(server: Server) -> None:
    """The API server's request is answered from the loop's bytes (`buffered`: no `Server`
    header); with `Connection: close`, left to gunicorn, the same review gets the same
    status, headers and body from gunicorn's parser and Response."""
    body = json.dumps(review_body(pod(thread="yes"))).encode()
    head = b"POST /validate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    length = b"Content-Length: %d\r\n" % len(body)
    direct = _exchange(server, head + length + b"\r\n" + body)
    gunicorn = _exchange(server, head + length + b"Connection: close\r\n\r\n" + body)
    assert "server" not in direct[1] and gunicorn[1].pop("server").startswith("gunicorn")
    assert gunicorn[1].pop("connection") == "close"
    assert direct[1].keys() == gunicorn[1].keys() == {"content-type", "content-length", "date"}
    assert direct[0] == gunicorn[0] == "HTTP/1.1 200 OK"
    assert direct[1]["content-type"] == gunicorn[1]["content-type"] == "application/json"
    assert direct[2] == gunicorn[2] and json.loads(direct[2])["response"]["allowed"] is True


def _exchange(server: Server, data: bytes) -> tuple[str, dict[str, str], bytes]:
    """One request on a connection of its own: the status line, headers and body."""
    context = ssl.create_default_context(cafile=str(server.trust))
    raw = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    with context.wrap_socket(raw, server_hostname="localhost") as tls:
        tls.sendall(data)
        answer = b""
        while b"\r\n\r\n" not in answer or len(answer.partition(b"\r\n\r\n")[2]) < int(
            _header(answer, "content-length")
        ):
            chunk = tls.recv(65536)
            assert chunk, "the server closed the connection before answering"
            answer += chunk
    head, _, rest = answer.partition(b"\r\n\r\n")
    status, *lines = head.decode("latin-1").split("\r\n")
    headers = {n.lower(): v.strip() for n, _, v in (line.partition(":") for line in lines)}
    return status, headers, rest


def _header(answer: bytes, name: str) -> str:
    head = answer.partition(b"\r\n\r\n")[0].decode("latin-1").lower()
    found = [line.partition(":")[2] for line in head.split("\r\n") if line.startswith(name)]
    return found[0].strip() if found else "0"


def _read_answers(tls: ssl.SSLSocket, count: int) -> list[dict[str, Any]]:
    data, answers = b"", []
    while len(answers) < count:
        chunk = tls.recv(65536)
        assert chunk, "the server closed the connection early"
        data += chunk
        while b"\r\n\r\n" in data:
            head, _, rest = data.partition(b"\r\n\r\n")
            length = next(
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            if len(rest) < length:
                break
            answers.append(json.loads(rest[:length]))
            data = rest[length:]
    return answers
