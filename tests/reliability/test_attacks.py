"""The attacks of issue 15 against a real `dragate serve`: each once cost a cluster-wide outage.

- bodies over the limit: a 413 JSON answer the client actually reads, whether it writes its
  whole body first (`urllib.request`) or waits for `100 Continue` (gunicorn sends it, then
  the 413 follows);
- framing and contract gaps: a declared 10^12-byte body, OPTIONS, broken chunked framing:
  each a JSON error with its status, never HTML, never a 200; requests gunicorn's parser
  refuses before the app (a broken request line, a header over the limits, an ambiguous or
  invalid length, a NUL or a folded line in a header) get its own 4xx, one log line, and the
  connection closes, with nothing behind them answered; the server keeps serving after each;
- a YAML alias bomb in the policy directory: reported on /readyz as an invalid policy while
  the last good set serves, and the next good change is picked up.

Hostile connections held open beside reviews are in test_slow_clients.py.
"""

from __future__ import annotations

import json
import socket
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from reliability.reliability_support import (
    Serve,
    claim,
    eventually,
    pod,
    request,
    review,
    serving,
    start,
    tls_context,
    write_policies,
)

from webhook.admission.routes import BODY_READ_SECONDS

HEADERS = b"POST /validate HTTP/1.1\r\nHost: dragate\r\nContent-Type: application/json\r\n"
MIB = 1024 * 1024
LIMIT = 3 * MIB


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serve]:
    with serving(tmp_path_factory.mktemp("attacks"), "attacks") as running:
        yield running


def _tls(port: int, timeout: float = 30) -> ssl.SSLSocket:
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    raw = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    return context.wrap_socket(raw, server_hostname="localhost")


def _review_answered(server: Serve, uid: str) -> None:
    body = review(claim(f"c-{uid}", "team-a"), uid, dry_run=True)
    status, answer = request(server.port, server.cert_dir / "ca.crt", "POST", "/validate", body)
    assert status == 200 and answer["response"]["allowed"] is True, answer


# --------------------------------------------------------------------------- bodies over the limit


def test_a_client_writing_its_whole_body_first_reads_the_413(server: Serve) -> None:
    """urllib writes all 12 MiB before reading: the answer waits for it, it is not an EOF."""
    context = tls_context(server.cert_dir / "ca.crt")
    sent = urllib.request.Request(
        f"https://127.0.0.1:{server.port}/validate", data=b" " * (12 * MIB), method="POST",
        headers={"Content-Type": "application/json"},
    )  # fmt: skip
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(sent, context=context, timeout=30)
    assert refused.value.code == 413
    assert refused.value.headers["Content-Type"] == "application/json"
    answer = json.loads(refused.value.read())
    assert answer["code"] == 413 and f"exceeds the {LIMIT}-byte limit" in answer["message"]
    _review_answered(server, "after-12-mib")


def test_expect_100_continue_over_the_limit_gets_a_continue_then_the_413(server: Serve) -> None:
    """gunicorn sends `100 Continue` before the app sees the request; the 413 follows it, and
    a client that waits for it never sends the body."""
    with _tls(server.port, timeout=10) as tls:
        tls.sendall(HEADERS + b"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n" % (LIMIT + 1))
        (interim, _), (code, body) = _answers(tls, 2)
    assert (interim, code) == (100, 413)
    assert json.loads(body)["code"] == 413
    _review_answered(server, "after-expect")


def test_expect_100_continue_within_the_limit_is_reviewed(server: Serve) -> None:
    """The other side of the same rule: a body the server wants is asked for, then judged."""
    data = json.dumps(review(claim("c-continue", "team-a"), "continue", dry_run=True)).encode()
    with _tls(server.port, timeout=10) as tls:
        tls.sendall(HEADERS + b"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n" % len(data))
        assert tls.recv(4096).startswith(b"HTTP/1.1 100 Continue\r\n")
        tls.sendall(data)
        code, _, body = _read_answer(tls)
    assert code == 200 and json.loads(body)["response"]["allowed"] is True


# --------------------------------------------------------------------------- framing


def _read_answer(tls: ssl.SSLSocket) -> tuple[int, dict[str, str], bytes]:
    """The first answer on the connection: status, headers (lower-case names), body."""
    received = b""
    while b"\r\n\r\n" not in received:
        chunk = tls.recv(65536)
        assert chunk, f"closed before an answer: {received!r}"
        received += chunk
    head, _, rest = received.partition(b"\r\n\r\n")
    headers = _headers(head)
    while len(rest) < int(headers.get("content-length", "0")):
        chunk = tls.recv(65536)
        assert chunk, "closed inside the body"
        rest += chunk
    return int(head.split(b" ")[1]), headers, rest


def _headers(head: bytes) -> dict[str, str]:
    lines = head.decode("latin-1").split("\r\n")[1:]
    return {n.strip().lower(): v.strip() for n, _, v in (x.partition(":") for x in lines)}


def _closed(tls: ssl.SSLSocket) -> bool:
    """True when the server closes the connection after its answer (no further bytes)."""
    tls.settimeout(1)  # the close, when it comes, follows the answer at once
    try:
        return tls.recv(4096) == b""
    except (ConnectionResetError, ssl.SSLError):
        return True
    except TimeoutError:
        return False


JSON_ERRORS = [
    # (raw request, status, words in the JSON message, whether the connection is closed)
    pytest.param(HEADERS + b"Content-Length: 1000000000000\r\n\r\n", 413,
                 f"exceeds the {LIMIT}-byte limit", False, id="declared-a-terabyte"),
    pytest.param(b"OPTIONS /validate HTTP/1.1\r\nHost: dragate\r\n\r\n", 405,
                 "not allowed", False, id="options-validate"),
    pytest.param(HEADERS + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n", 400,
                 "malformed request body", True, id="bad-chunk-size"),
    pytest.param(HEADERS + b"Transfer-Encoding: chunked\r\n\r\n5\r\n{}xxxyyy\r\n0\r\n\r\n",
                 400, "malformed request body", True, id="chunk-longer-than-its-size"),
]  # fmt: skip


@pytest.mark.parametrize(("raw", "status", "words", "closes"), JSON_ERRORS)
def test_errors_are_json_with_their_status(
    server: Serve, raw: bytes, status: int, words: str, closes: bool
) -> None:
    """A broken body leaves the next request's start unknown: the connection ends after the
    answer (gunicorn writes the `Connection` header itself, so the close is the signal)."""
    with _tls(server.port, timeout=10) as tls:
        tls.sendall(raw)
        code, headers, body = _read_answer(tls)
        assert code == status, body
        assert headers["content-type"] == "application/json"
        answer = json.loads(body)
        assert answer["code"] == status and words.lower() in answer["message"].lower(), answer
        assert _closed(tls) is closes
    _review_answered(server, f"after-{status}")


STOCK_ERRORS = [
    # (raw request, status): refused by gunicorn's parser before any app code runs
    pytest.param(b"POST /validate HTTP/9\r\nHost: dragate\r\n\r\n", 400, id="bad-version"),
    pytest.param(b"POST /validate\r\nHost: dragate\r\n\r\n", 400, id="bad-request-line"),
    pytest.param(b"GET /" + b"a" * 4095 + b" HTTP/1.1\r\nHost: d\r\n\r\n", 414,
                 id="request-line-over-4-kib"),
    pytest.param(HEADERS + b"X-Pad: " + b"a" * 4094 + b"\r\n\r\n", 431,
                 id="header-field-over-4-kib"),
    pytest.param(HEADERS + b"".join(b"X-%d: a\r\n" % i for i in range(15)) + b"\r\n", 431,
                 id="over-16-headers"),
    pytest.param(HEADERS + b"X-Pad: " + b"a" * 65000 + b"\r\n" * 2, 431,
                 id="header-line-of-64-kib"),
    pytest.param(HEADERS + b"Transfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n", 400,
                 id="length-and-chunked"),
    pytest.param(HEADERS + b"Transfer-Encoding: gzip, chunked\r\nContent-Length: 2\r\n\r\n",
                 400, id="length-and-gzip-chunked"),
    pytest.param(HEADERS + b"Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}x", 400,
                 id="two-different-lengths"),
    pytest.param(HEADERS + b"Content-Length: 2, 3\r\n\r\n{}x", 400, id="length-list"),
    pytest.param(HEADERS + b"Content-Length: -1\r\n\r\n", 400, id="negative-length"),
    pytest.param(HEADERS + b"Content-Length: +2\r\n\r\n{}", 400, id="signed-length"),
    pytest.param(HEADERS + b"X-Nul: a\x00b\r\n\r\n", 400, id="nul-in-a-header-value"),
    pytest.param(HEADERS + b"X-Folded: a\r\n b\r\n\r\n", 400, id="obs-fold"),
]  # fmt: skip


@pytest.mark.parametrize(("raw", "status"), STOCK_ERRORS)
def test_requests_the_parser_refuses_are_4xx_and_closed(
    server: Serve, raw: bytes, status: int
) -> None:
    """gunicorn's own answer: its status, `Connection: close`, its fixed HTML page (no app
    code runs: the API server never sends such a request), and one JSON log line without a
    traceback."""
    before = len(server.logs())
    with _tls(server.port, timeout=10) as tls:
        tls.sendall(raw)
        code, headers, _ = _read_answer(tls)
        assert (code, headers.get("connection")) == (status, "close")
        assert _closed(tls)
    eventually(lambda: "Invalid request from ip=" in server.logs()[before:], what="its log line")
    lines = server.logs()[before:].splitlines()
    refused = [json.loads(x) for x in lines if "Invalid request from ip=" in x]
    assert len(refused) == 1 and refused[0]["level"] == "warning", lines
    assert "Traceback" not in server.logs()[before:]
    _review_answered(server, f"after-stock-{status}")


SHORT_BODIES = [
    # (declared length, bytes sent before the client falls silent)
    pytest.param(100, b'{"kind"', id="part-of-the-body"),
    pytest.param(2, b"", id="no-body-at-all"),
]  # fmt: skip


@pytest.mark.parametrize(("length", "sent"), SHORT_BODIES)
def test_a_body_that_stops_short_is_answered_408_within_seconds(
    server: Serve, length: int, sent: bytes
) -> None:
    """A body read waits at most `BODY_READ_SECONDS` for the next bytes, not the 120 s
    keep-alive timeout: the client reads a JSON 408 and the connection closes."""
    with _tls(server.port, timeout=60) as tls:
        began = time.monotonic()
        tls.sendall(HEADERS + b"Content-Length: %d\r\n\r\n%s" % (length, sent))
        code, headers, body = _read_answer(tls)
        waited = time.monotonic() - began
        assert (code, json.loads(body)["code"]) == (408, 408), headers
        assert BODY_READ_SECONDS <= waited < 60, waited
        assert _closed(tls)
    _review_answered(server, f"after-short-{length}")


AMBIGUOUS = [
    # headers giving the body's length two ways, each with a request smuggled behind the body
    pytest.param(b"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n", id="length-and-chunked"),
    pytest.param(b"Content-Length: %d\r\nContent-Length: 3\r\n", id="two-content-lengths"),
]  # fmt: skip


@pytest.mark.parametrize("framing", AMBIGUOUS)
def test_an_ambiguous_length_is_read_one_way_and_smuggles_nothing(
    server: Serve, framing: bytes
) -> None:
    """gunicorn's parser, the one parser on the connection, refuses a length given two ways
    before the app runs (RFC 9112 6.3): a 400, the connection closed, and neither the body
    nor the request sent behind it on the same connection is answered (docs/decisions.md,
    How the webhook is served)."""
    data = json.dumps(review(claim("c-ambiguous", "team-a"), "ambiguous", dry_run=True)).encode()
    head = framing % len(data) if b"%d" in framing else framing
    follow = b"GET /healthz HTTP/1.1\r\nHost: dragate\r\n\r\n"
    with _tls(server.port, timeout=10) as tls:
        body = b"%x\r\n%s\r\n0\r\n\r\n" % (len(data), data)
        tls.sendall(HEADERS + head + b"\r\n" + body + follow)
        code, headers, _ = _read_answer(tls)
        assert (code, headers.get("connection")) == (400, "close")
        assert _closed(tls)  # nothing more: no review, no /healthz


def _answers(tls: ssl.SSLSocket, count: int) -> list[tuple[int, bytes]]:
    """`count` answers read one after another from the connection: (status, body)."""
    stream, answers = tls.makefile("rb"), []
    for _ in range(count):
        status = int(stream.readline().split(b" ")[1])
        headers = _headers(b"\r\n" + b"".join(iter(stream.readline, b"\r\n")))
        answers.append((status, stream.read(int(headers.get("content-length", "0")))))
    return answers


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
