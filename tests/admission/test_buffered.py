"""A buffered request answered without gunicorn's second parse (webhook/admission/buffered.py).

gunicorn is the judge: what `parse` takes, gunicorn's own parser accepts, and the environ
built from it matches gunicorn's `wsgi.create` key for key (bar the objects each server makes
for itself); what `parse` leaves is left to gunicorn. The server-level proof (the real
`dragate serve` over TLS answers the same bytes both ways) is test_loopserving.py.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

import pytest
from gunicorn.config import Config
from gunicorn.http import get_parser
from gunicorn.http.wsgi import create

from webhook.admission.buffered import Limits, http_date, parse, respond
from webhook.admission.buffered import environ as buffered_environ

DEFAULTS = Limits.of(Config())  # gunicorn's own: 4094-byte line, 100 fields of 8190 bytes
BODY = b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u"}}'
CLIENT, SERVER = ("10.0.0.7", 51234), ("0.0.0.0", 8443)


def request(
    *fields: bytes, line: bytes = b"POST /validate?timeout=10s HTTP/1.1", body: bytes = BODY
) -> bytes:
    head = [line, b"Host: dragate.dragate.svc:443", *fields]
    if not any(f.lower().startswith(b"content-length") for f in fields):
        head.append(b"Content-Length: %d" % len(body))
    return b"\r\n".join(head) + b"\r\n\r\n" + body


API_SERVER = request(
    b"User-Agent: kube-apiserver-admission",
    b"Accept: application/json, */*",
    b"Content-Type: application/json",
    b"Accept-Encoding: gzip",
)
TAKEN = {
    "the-api-server": API_SERVER,
    "requests-keep-alive": request(b"Connection: keep-alive", b"Content-Type: application/json"),
    "repeated-field": request(b"X-Trace: a", b"X-Trace: b"),
    "percent-encoded-path": request(line=b"POST /val%69date HTTP/1.1"),
    "no-query": request(line=b"POST /mutate HTTP/1.1"),
    "value-padding": request(b"Content-Type: \t application/json  "),
    "empty-body": request(body=b""),
}
LEFT = {
    "get": request(line=b"GET /validate HTTP/1.1"),
    "http-1.0": request(line=b"POST /validate HTTP/1.0"),
    "absolute-form": request(line=b"POST https://dragate/validate HTTP/1.1"),
    "space-in-target": request(line=b"POST /val idate HTTP/1.1"),
    "fragment-in-target": request(line=b"POST /validate#x HTTP/1.1"),
    "connection-close": request(b"Connection: close"),
    "connection-upgrade": request(b"Connection: Upgrade", b"Upgrade: h2c"),
    "expect-continue": request(b"Expect: 100-continue"),
    "chunked": request(b"Transfer-Encoding: chunked", b"Content-Length: 0", body=b""),
    "underscore-in-name": request(b"X_Forwarded_For: 1.2.3.4"),
    "space-before-colon": request(b"Content-Type : application/json"),
    "folded-line": request(b"X-A: one", b" two"),
    "control-in-value": request(b"X-A: one\x01two"),
    "no-colon": request(b"X-A"),
    "length-not-the-body": request(b"Content-Length: 3"),
    "two-lengths": request(b"Content-Length: %d" % len(BODY), b"Content-Length: %d" % len(BODY)),
    "line-over-the-limit": request(line=b"POST /validate?" + b"a" * 4100 + b" HTTP/1.1"),
    "field-over-the-limit": request(b"X-A: " + b"a" * 8190),
    "too-many-fields": request(*(b"X-%d: 1" % i for i in range(100))),
    "no-end-of-headers": b"POST /validate HTTP/1.1\r\nHost: x\r\n",
}


def gunicorn_environ(data: bytes) -> dict[str, Any]:
    """What gunicorn's parser and `wsgi.create` make of `data` (on a TLS listener)."""
    cfg = Config()
    cfg.set("certfile", __file__)  # only turns is_ssl on: req.scheme is https
    cfg.set("workers", 2)
    left, right = socket.socketpair()
    with left, right:
        parser = get_parser(cfg, left, CLIENT)
        parser.unreader.unread(data)
        _, env = create(next(parser), left, CLIENT, SERVER, cfg)
    env["wsgi.multithread"] = True  # what ThreadWorker.handle_request sets next
    return env


IGNORED = {"wsgi.input", "wsgi.errors", "wsgi.file_wrapper", "gunicorn.socket", "wsgi.early_hints"}


@pytest.mark.parametrize("data", TAKEN.values(), ids=TAKEN.keys())
def test_the_environ_is_gunicorns(data: bytes) -> None:
    parsed = parse(data, DEFAULTS)
    assert parsed is not None
    mine = buffered_environ(parsed, "sock", CLIENT, SERVER, multiprocess=True)
    theirs = gunicorn_environ(data)
    assert {k: v for k, v in mine.items() if k not in IGNORED} == {
        k: v for k, v in theirs.items() if k not in IGNORED
    }
    assert mine["wsgi.input"].read() == theirs["wsgi.input"].read() == parsed.body
    assert mine["gunicorn.socket"] == "sock"


@pytest.mark.parametrize("data", LEFT.values(), ids=LEFT.keys())
def test_what_the_api_server_never_sends_is_left_to_gunicorn(data: bytes) -> None:
    assert parse(data, DEFAULTS) is None


def test_gunicorns_limits_are_the_ones_given() -> None:
    assert parse(API_SERVER, replace(DEFAULTS, line=20)) is None
    assert parse(API_SERVER, replace(DEFAULTS, fields=4)) is None
    assert parse(API_SERVER, replace(DEFAULTS, field_size=30)) is None
    assert parse(API_SERVER, Limits(line=0, fields=0, field_size=0)) is not None  # 0: none


class Body(list[bytes]):
    """An app's iterable that records when it is closed."""

    closed = 0

    def close(self) -> None:
        self.closed += 1


App = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def app_returning(
    headers: list[tuple[str, str]], body: Body, *, write: bytes = b"", status: str = "200 OK"
) -> App:
    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        writer = start_response(status, headers)
        if write:
            writer(write)
        return body

    return app


def split(data: bytes) -> tuple[str, dict[str, str], bytes]:
    head, _, body = data.partition(b"\r\n\r\n")
    status, *lines = head.decode("latin-1").split("\r\n")
    return status, dict(line.split(": ", 1) for line in lines), body


def test_an_answer_is_one_http_response_closed_after_it_is_sent() -> None:
    body = Body([b'{"a":', b"1}"])
    answer = respond(
        app_returning([("Content-Type", "application/json")], body), {}, keep_alive=True
    )
    status, headers, payload = split(answer.data)
    assert status == "HTTP/1.1 200 OK" and payload == b'{"a":1}'
    assert headers == {
        "Content-Type": "application/json",
        "Content-Length": "7",
        "Date": http_date(),
    }
    assert body.closed == 0
    answer.close()
    assert body.closed == 1


def test_the_server_sets_the_framing_headers_itself() -> None:
    """The app's Content-Length (wrong here), Connection and Date never reach the wire:
    a wrong length would desynchronise the kept-alive connection."""
    app = app_returning(
        [("Content-Length", "99"), ("Connection", "keep-alive"), ("Date", "then")],
        Body([b"xy"]),
        write=b"w",
        status="403 FORBIDDEN",
    )
    status, headers, payload = split(respond(app, {}, keep_alive=False).data)
    assert status == "HTTP/1.1 403 FORBIDDEN" and payload == b"wxy"
    assert headers == {"Content-Length": "3", "Date": http_date(), "Connection": "close"}


@pytest.mark.parametrize(
    "headers",
    [[("X-A", "1\r\nSet-Cookie: x")], [("X-A\n", "1")]],
    ids=["crlf-in-value", "newline-in-name"],
)
def test_a_header_that_would_split_the_response_is_refused(headers: list[tuple[str, str]]) -> None:
    body = Body([b"x"])
    with pytest.raises(ValueError, match="invalid response header"):
        respond(app_returning(headers, body), {}, keep_alive=True)
    assert body.closed == 1


def test_an_app_that_never_starts_a_response_is_an_error_and_its_body_is_closed() -> None:
    body = Body([b"x"])
    with pytest.raises(AssertionError, match="start_response"):
        respond(lambda environ, start_response: body, {}, keep_alive=True)
    assert body.closed == 1


def test_what_the_app_raises_reaches_the_worker() -> None:
    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        raise LookupError("boom")

    with pytest.raises(LookupError):
        respond(app, {}, keep_alive=True)
