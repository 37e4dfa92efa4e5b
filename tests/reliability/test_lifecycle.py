"""A real `dragate serve` over its life: draining on SIGTERM, and memory after big reviews.

- SIGTERM (what the kubelet sends a terminating pod) with reviews in flight, light and heavy:
  every one is answered, then the process exits 0; a kept-alive connection goes on being
  answered until its client closes it.
- After 20 reviews of objects near the 3 MiB body limit, the pod's memory (PSS of the
  gunicorn master and its worker, what the kernel charges the pod for) stays well under the
  chart's 768 MiB limit.
"""

from __future__ import annotations

import http.client
import json
import signal
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from reliability.reliability_support import (
    Serve,
    claim,
    legacy_gpu_pod,
    pod,
    pod_memory_mib,
    request,
    review,
    serving,
    start,
    tls_context,
    write_policies,
)

MIB = 1024 * 1024
BODY_LIMIT = 3 * MIB
CHART_LIMIT_MIB = 768
PSS_BOUND_MIB = 600  # the margin under the chart's limit
BIG_REVIEWS = 20


def annotated(obj: dict[str, Any], target_bytes: int) -> dict[str, Any]:
    """`obj` with one annotation filling its review up to about `target_bytes`."""
    size = len(json.dumps(review(obj, "x" * 36)))
    obj["metadata"]["annotations"] = {"big": "x" * (target_bytes - size - 64)}
    return obj


# --------------------------------------------------------------------------- SIGTERM


def _in_flight(
    port: int, trust: Path, path: str, body: dict[str, Any]
) -> tuple[ssl.SSLSocket, bytes]:
    """A connection the server has accepted, holding all of a review but its last byte."""
    data = json.dumps(body).encode()
    raw = socket.create_connection(("127.0.0.1", port), timeout=30)
    tls = tls_context(trust).wrap_socket(raw, server_hostname="127.0.0.1")
    head = (f"POST {path} HTTP/1.1\r\nHost: dragate\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(data)}\r\n\r\n").encode()  # fmt: skip
    tls.sendall(head + data[:-1])
    return tls, data[-1:]


def _answer(tls: ssl.SSLSocket) -> tuple[int, dict[str, Any]]:
    received = b""
    while b"\r\n\r\n" not in received:
        chunk = tls.recv(65536)
        assert chunk, f"closed before an answer: {received!r}"
        received += chunk
    head, _, body = received.partition(b"\r\n\r\n")
    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length:")))  # fmt: skip
    while len(body) < length:
        chunk = tls.recv(65536)
        assert chunk, "closed inside the answer"
        body += chunk
    return int(head.split(b" ")[1]), json.loads(body)


IN_FLIGHT = [
    # (path, object, how many): light claim reviews, and heavy legacy Pods taking the worker
    # most of a second each
    ("/validate", lambda n: claim(f"drain-{n}", "team-a"), 8),
    ("/validate", lambda n: legacy_gpu_pod(f"heavy-{n}", 2 * MIB), 3),
    ("/mutate", lambda n: pod(f"light-{n}", "team-a"), 4),
]


def test_sigterm_answers_every_review_in_flight_then_exits_0(tmp_path: Path) -> None:
    server = start(tmp_path, "drain", policies=write_policies(tmp_path / "policies",
                   {"team-a": 100}), cert_dir=tmp_path / "certs")  # fmt: skip
    trust = server.cert_dir / "ca.crt"
    flights = []
    try:
        for path, make, count in IN_FLIGHT:
            for n in range(count):
                body = review(make(n), f"{path[1:]}-{len(flights)}", dry_run=True)
                flights.append(
                    (body["request"]["uid"], *_in_flight(server.port, trust, path, body))
                )
        server.process.send_signal(signal.SIGTERM)
        time.sleep(1.5)  # the worker has seen it (it checks every second) and stops accepting
        for _, tls, last in flights:
            tls.sendall(last)
        answers = [(uid, _answer(tls)) for uid, tls, _ in flights]
    finally:
        for _, tls, _ in flights:
            tls.close()
        code = server.stop()
    assert [(uid, status) for uid, (status, _) in answers] == [(uid, 200) for uid, _ in answers]
    assert all(body["response"]["uid"] == uid for uid, (_, body) in answers)
    assert code == 0, server.logs()[-3000:]
    assert "graceful timeout" not in server.logs().lower()


def test_a_kept_alive_connection_is_answered_while_draining(tmp_path: Path) -> None:
    """The API server keeps sending on its pooled connections after the endpoint goes: a
    review arriving on one is answered, with `Connection: close` (gunicorn's, once its worker
    stops) so that the client dials a replica that stays; new connections are refused, and
    the process exits 0."""
    server = start(tmp_path, "keepalive", policies=write_policies(tmp_path / "policies",
                   {"team-a": 2}), cert_dir=tmp_path / "certs")  # fmt: skip
    conn = http.client.HTTPSConnection(
        "127.0.0.1", server.port, context=tls_context(server.cert_dir / "ca.crt"), timeout=15
    )

    def answer(uid: str) -> tuple[bool, str]:
        data = json.dumps(review(claim(f"c-{uid}", "team-a"), uid, dry_run=True))
        conn.request("POST", "/validate", body=data, headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        body = json.loads(response.read())
        allowed = response.status == 200 and bool(body["response"]["allowed"])
        return allowed, str(response.getheader("Connection", ""))

    try:
        assert answer("before") == (True, "keep-alive")
        server.process.send_signal(signal.SIGTERM)
        time.sleep(1.5)  # the worker has seen it and stops accepting
        assert answer("draining") == (True, "close")
        with pytest.raises(ConnectionRefusedError):
            answer("redialled")
    finally:
        conn.close()
        code = server.stop()
    assert code == 0, server.logs()[-3000:]


# --------------------------------------------------------------------------- memory


@pytest.fixture
def memory_server(tmp_path: Path) -> Iterator[Serve]:
    with serving(tmp_path, "memory") as running:
        yield running


BIG = [
    # (path, object near the body limit): a big annotation, a legacy Pod of many containers
    ("/validate", lambda: annotated(claim("big-claim", "team-a"), BODY_LIMIT - 4096)),
    ("/mutate", lambda: annotated(legacy_gpu_pod("big-pod", 1000), BODY_LIMIT - 4096)),
    ("/validate", lambda: legacy_gpu_pod("many-containers", BODY_LIMIT - 64 * 1024)),
    ("/mutate", lambda: annotated(pod("plain", "team-a"), BODY_LIMIT - 4096)),
]


def test_memory_after_big_reviews_stays_under_the_chart_limit(memory_server: Serve) -> None:
    server, trust = memory_server, memory_server.cert_dir / "ca.crt"
    bodies = [(path, review(make(), f"big-{i}")) for i, (path, make) in enumerate(BIG)]
    sizes = [len(json.dumps(body)) for _, body in bodies]
    assert all(BODY_LIMIT - 128 * 1024 < size <= BODY_LIMIT for size in sizes), sizes
    before = pod_memory_mib(server)
    statuses: list[int] = []

    def send(first: int) -> None:
        for i in range(first, BIG_REVIEWS, 4):
            path, body = bodies[i % len(bodies)]
            statuses.append(request(server.port, trust, "POST", path, body, timeout=60)[0])

    threads = [threading.Thread(target=send, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    after = pod_memory_mib(server)
    print(f"\npod memory before {before}, after {BIG_REVIEWS} big reviews {after} "
          f"(chart limit {CHART_LIMIT_MIB} MiB)")  # fmt: skip
    assert statuses == [200] * BIG_REVIEWS
    assert after["pss_mib"] < PSS_BOUND_MIB
