"""Heavy reviews beside legitimate ones, against a real `dragate serve`.

Two clients send legacy Pods of as many uniquely named GPU containers as fit the 3 MiB body
limit (each a valid object: Kubernetes would store it), to /mutate and /validate in turn,
while a third sends ordinary claim reviews. Every review is answered; the ordinary ones
within 1 s each (the guarantee), with their p50 and max in the test output. A heavy review
sent beside the two streams with `?timeout=2s` is answered within it.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Iterator

import pytest
from reliability.reliability_support import (
    ReviewLoad,
    Serve,
    latency_summary,
    legacy_gpu_pod,
    request,
    review,
    serving,
    tls_context,
)

MIB = 1024 * 1024
HEAVY_BYTES = 3 * MIB - 64 * 1024  # the review's own fields take the rest
HEAVY_STREAMS = 2
SECONDS = 10.0
LEGIT_SECONDS = 1.0


class LatencyBoundExceeded(AssertionError):
    """A legitimate review answered later than LEGIT_SECONDS."""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    with serving(tmp_path_factory.mktemp("heavy"), "heavy") as running:
        yield running


class HeavyStream:
    """One client sending the heavy Pod, to /mutate and /validate in turn, until stopped."""

    def __init__(self, server: Serve, n: int, stop: threading.Event) -> None:
        self.server, self.n, self.stop = server, n, stop
        self.body = review(legacy_gpu_pod(f"legacy-{n}", HEAVY_BYTES), f"heavy-{n}")
        assert len(json.dumps(self.body)) <= 3 * MIB
        self.answers: list[tuple[str, int, bool]] = []  # (path, status, uid echoed)
        self.errors: list[str] = []
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        trust = self.server.cert_dir / "ca.crt"
        while not self.stop.is_set():
            path = ("/mutate", "/validate")[len(self.answers) % 2]
            try:
                status, answer = request(self.server.port, trust, "POST", path, self.body,
                                         timeout=30)  # fmt: skip
            except OSError as err:
                self.errors.append(repr(err))
                continue
            echoed = status == 200 and answer["response"]["uid"] == f"heavy-{self.n}"
            self.answers.append((path, status, echoed))


def test_ordinary_reviews_beside_heavy_legacy_pods(server: Serve) -> None:
    stop = threading.Event()
    heavy = [HeavyStream(server, n, stop) for n in range(HEAVY_STREAMS)]
    for stream in heavy:
        stream.thread.start()
    with ReviewLoad(server, 1, "legit") as legit:
        time.sleep(SECONDS)
        stop.set()
    for stream in heavy:
        stream.thread.join(timeout=60)
    summary = latency_summary(legit.latencies)
    answers = [a for stream in heavy for a in stream.answers]
    print(f"\nordinary reviews beside {len(answers)} heavy ones: {json.dumps(summary)}")
    assert legit.failures == [] and len(legit.latencies) >= 5
    assert [e for s in heavy for e in s.errors] == []
    assert answers and all(status == 200 and echoed for _, status, echoed in answers), answers
    if summary["max_ms"] >= LEGIT_SECONDS * 1000:
        raise LatencyBoundExceeded(f"ordinary reviews over {LEGIT_SECONDS}s: {summary}")


TIMEOUT_SECONDS, TIMEOUT_SLACK = 2.0, 0.1
TIMED = 4


def _timed_heavy_review(server: Serve, data: bytes) -> tuple[float, int]:
    """Seconds from dialling to the answer of one heavy review sent with `?timeout=2s`, as
    the API server's clock runs, and the answer's status."""
    began = time.monotonic()
    conn = http.client.HTTPSConnection(
        "127.0.0.1", server.port, context=tls_context(server.cert_dir / "ca.crt"), timeout=30
    )
    try:
        conn.request("POST", f"/validate?timeout={TIMEOUT_SECONDS:g}s", body=data,
                     headers={"Content-Type": "application/json"})  # fmt: skip
        response = conn.getresponse()
        response.read()
        return time.monotonic() - began, response.status
    finally:
        conn.close()


def test_a_heavy_review_meets_its_timeout_beside_two_heavy_streams(server: Serve) -> None:
    """The deadline counts from the request's arrival, before its 3 MiB body is read and
    parsed: the answer comes within the API server's `?timeout=2s` (0.1 s slack for the
    client's side), whichever way the review ends."""
    stop = threading.Event()
    heavy = [HeavyStream(server, n, stop) for n in range(HEAVY_STREAMS)]
    data = json.dumps(review(legacy_gpu_pod("timed", HEAVY_BYTES), "timed")).encode()
    for stream in heavy:
        stream.thread.start()
    try:
        time.sleep(1.0)  # both streams are sending
        timed = [_timed_heavy_review(server, data) for _ in range(TIMED)]
    finally:
        stop.set()
        for stream in heavy:
            stream.thread.join(timeout=60)
    print(f"\nheavy reviews with ?timeout=2s beside two heavy streams: {timed}")
    assert all(status == 200 for _, status in timed), timed
    assert max(s for s, _ in timed) <= TIMEOUT_SECONDS + TIMEOUT_SLACK, timed
