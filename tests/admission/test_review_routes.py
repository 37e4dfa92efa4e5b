"""The one path of /validate and /mutate: `ReviewRoutes`, in front of Flask.

Every request for the two review paths is answered there (a review for POST, a JSON 405 for
any other method); Flask only sees the other paths. Each case states the status and what the
JSON body says; every reply is JSON with the headers a WSGI server needs.
"""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Callable
from typing import Any

import gevent
import pytest
from admission import admission_support
from admission.admission_support import encode, pod, review_body
from flask import Flask
from werkzeug.test import Client, TestResponse

from webhook.admission import routes
from webhook.admission.routes import json_reply

JSON = "application/json"
Case = dict[str, Any]


def _without_uid() -> dict[str, Any]:
    body = review_body()
    del body["request"]["uid"]
    return body


CASES = [  # (request, options, status, what the body holds)
    pytest.param({"data": encode(review_body())}, {}, 200, '"allowed":true', id="allowed"),
    pytest.param(
        {"data": encode(review_body(pod(deny="yes")))}, {}, 200, '"allowed":false', id="denied"
    ),
    pytest.param(
        {"path": "/mutate", "data": encode(review_body())},
        {},
        200,
        '"patchType":"JSONPatch"',
        id="mutate-patch",
    ),
    pytest.param(
        {"data": encode(review_body(dryRun=True))},
        {},
        200,
        '"warnings":["dry run: nothing reserved"]',
        id="dry-run-warning",
    ),
    pytest.param(
        {"data": encode(review_body(pod("nowhere")))},
        {},
        200,
        "namespace nowhere has no tenant",
        id="no-tenant",
    ),
    pytest.param(
        {"data": b"{not json"},
        {},
        400,
        "body is not valid JSON: Expecting property",
        id="malformed-json",
    ),
    pytest.param({"data": b"\xff\xfe\x00"}, {}, 400, "body is not valid JSON", id="not-utf8"),
    pytest.param(
        {"data": encode(review_body()), "content_type": "text/plain"},
        {},
        400,
        "Content-Type must be application/json, got 'text/plain'",
        id="wrong-content-type",
    ),
    pytest.param(
        {"data": encode(review_body()), "content_type": None},
        {},
        400,
        "Content-Type must be application/json, got 'none'",
        id="no-content-type",
    ),
    pytest.param(
        {"data": encode(_without_uid())}, {}, 400, "missing request.uid", id="missing-uid"
    ),
    pytest.param(
        {"data": encode(review_body(operation="PATCH"))},
        {},
        400,
        '"uid":"705ab4f5-6393-11e8-b7cc-42010a800002"',
        id="bad-operation-uid",
    ),
    pytest.param(
        {"data": encode(review_body(pod(filler="x" * 4096)))},
        {"max_body_bytes": 2048},
        413,
        "bytes exceeds the 2048-byte limit",
        id="oversized-declared",
    ),
    pytest.param(
        {"data": encode(review_body(pod(filler="x" * 4096))), "chunked": True},
        {"max_body_bytes": 2048},
        413,
        "body exceeds the 2048-byte limit",
        id="oversized-chunked",
    ),
    pytest.param(
        {"data": encode(review_body()), "chunked": True, "content_length": 10},
        {},
        400,
        "both Content-Length and Transfer-Encoding",
        id="length-and-chunked",
    ),
    pytest.param(
        {"data": encode(review_body()), "chunked": True}, {}, 200, '"allowed":true', id="chunked"
    ),
    pytest.param(
        {"data": encode(review_body()), "content_length": 100_000},
        {},
        200,
        '"allowed":true',
        id="truncated-body",
    ),
    pytest.param(
        {"data": encode(review_body(pod(crash="yes")))},
        {},
        500,
        "internal error; see the webhook log for this uid",
        id="pipeline-crash",
    ),
    pytest.param(
        {"path": "/validate?timeout=1s", "data": encode(review_body(pod(sleep="2")))},
        {"timeout_margin": 0.1},
        200,
        "could not finish the review within 0.9s",
        id="deadline-overrun-validate",
    ),
    pytest.param(
        {"path": "/mutate?timeout=1s", "data": encode(review_body(pod(sleep="2")))},
        {"timeout_margin": 0.1},
        200,
        "mutation skipped, review exceeded 0.9s",
        id="deadline-overrun-mutate",
    ),
    pytest.param({"method": "GET"}, {}, 405, "The method is not allowed", id="get-validate"),
    pytest.param(
        {"method": "PUT", "path": "/mutate"}, {}, 405, "The method is not allowed", id="put-mutate"
    ),
    pytest.param(
        {"method": "OPTIONS"}, {}, 405, "The method is not allowed", id="options-validate"
    ),
    pytest.param(
        {"path": "/validate/", "data": encode(review_body())},
        {},
        404,
        "The requested URL was not found",
        id="trailing-slash",
    ),
    pytest.param(
        {"path": "/nope", "data": encode(review_body())},
        {},
        404,
        "The requested URL was not found",
        id="unknown-path",
    ),
    pytest.param({"method": "GET", "path": "/healthz"}, {}, 200, '{"status":"ok"}', id="healthz"),
    pytest.param(
        {"data": encode(review_body())},
        {"require_client_cert": True},
        403,
        "reviews need a client certificate",
        id="no-client-cert",
    ),
]


def _send(client: Client, case: Case) -> TestResponse:
    content_type = case.get("content_type", JSON)
    headers = {"Content-Type": content_type} if content_type else {}
    data = case.get("data", b"")
    extra: dict[str, Any] = {}
    if case.get("chunked"):
        headers["Transfer-Encoding"] = "chunked"
        length = str(case.get("content_length", ""))  # the test client sets one of its own
        extra = {
            "input_stream": io.BytesIO(data),
            "environ_overrides": {"wsgi.input_terminated": True, "CONTENT_LENGTH": length},
        }
    elif "content_length" in case:
        extra = {"input_stream": io.BytesIO(data), "content_length": case["content_length"]}
    else:
        extra = {"data": data}
    method, path = case.get("method", "POST"), case.get("path", "/validate")
    return client.open(path, method=method, headers=headers, **extra)


STATUS_LINES = {
    200: "200 OK",
    400: "400 BAD REQUEST",
    403: "403 FORBIDDEN",
    413: "413 REQUEST ENTITY TOO LARGE",
    404: "404 NOT FOUND",
    405: "405 METHOD NOT ALLOWED",
    500: "500 INTERNAL SERVER ERROR",
}


@pytest.mark.parametrize(("case", "options", "code", "fragment"), CASES)
def test_each_answer_is_json_with_its_status(
    make_app: Callable[..., Flask],
    case: Case,
    options: dict[str, Any],
    code: int,
    fragment: str,
) -> None:
    answer = _send(make_app(**options).test_client(), case)
    assert answer.status == STATUS_LINES[code]
    closes = [("Connection", "close")] if case.get("content_length") and case.get("chunked") else []
    assert answer.headers.to_wsgi_list() == [
        ("Content-Type", "application/json"),
        ("Content-Length", str(len(answer.data))),
        *closes,
    ]
    assert fragment in answer.get_data(as_text=True) and answer.data.endswith(b"}\n")
    document = json.loads(answer.data)
    if code != 200 or case.get("path", "/validate").startswith("/healthz"):
        return
    assert document["response"]["uid"] == "705ab4f5-6393-11e8-b7cc-42010a800002"


def test_an_escaping_error_is_a_json_500(
    make_app: Callable[..., Flask], monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_: Any) -> None:
        raise RuntimeError("parser bug")

    monkeypatch.setattr(routes, "parse_review", broken)
    answer = _send(make_app().test_client(), {"data": encode(review_body())})
    assert answer.status_code == 500
    assert answer.get_json() == {"code": 500, "message": "internal error"}


@pytest.mark.parametrize(
    ("method", "path", "through_flask"),
    [
        ("POST", "/validate", False),
        ("POST", "/mutate", False),
        ("GET", "/validate", False),
        ("DELETE", "/mutate", False),
        ("POST", "/validate/", True),
        ("GET", "/healthz", True),
    ],
    ids=[
        "post-validate",
        "post-mutate",
        "get-validate",
        "delete-mutate",
        "trailing-slash",
        "healthz",
    ],
)
def test_flask_never_sees_a_review_path(
    make_app: Callable[..., Flask], method: str, path: str, through_flask: bool
) -> None:
    app = make_app()
    seen: list[str] = []
    app.before_request(lambda: seen.append(path) and None)
    app.test_client().open(path, method=method, json=review_body())
    assert bool(seen) is through_flask


@pytest.mark.parametrize(
    "body",
    [
        {"b": 1, "a": [True, None, 1.5], "c": {"z": "x", "y": ""}},
        {"message": "Ünïcode \u2013 \u201cquotes\u201d \U0001f680", "uid": "u"},
        {"response": {"warnings": ["a\nb", "\u2028"], "allowed": False}},
    ],
    ids=["sorted-keys", "non-ascii", "escapes"],
)
def test_json_reply_is_what_jsonify_sends(body: dict[str, Any]) -> None:
    app = Flask("jsonify")
    with app.app_context():
        expected = app.json.response(body).get_data()
    assert json_reply(200, body).body == expected


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("", None),
        ("timeout=10s", "10s"),
        ("timeout=1s&timeout=2s", "1s"),
        ("a=1&timeout=500ms", "500ms"),
        ("timeout=", None),
        ("timeout=%31s", "1s"),
        ("x=1", None),
    ],
    ids=["none", "one", "first-of-two", "among-others", "empty", "escaped", "absent"],
)
def test_the_timeout_is_the_first_value_of_the_query(query: str, expected: str | None) -> None:
    for _ in range(2):  # parsed once, then remembered
        assert routes._timeout({"QUERY_STRING": query}) == expected


@pytest.mark.parametrize(
    ("query", "budget"),
    [("timeout=10s", 9.75), ("timeout=2s", 1.75), ("", 9.75), ("timeout=1m", 29.75)],
    ids=["apiserver-10s", "apiserver-2s", "default", "capped-at-30s"],
)
def test_the_review_runs_in_the_request_thread_with_the_deadline_passed_down(
    make_app: Callable[..., Flask], query: str, budget: float
) -> None:
    """No pool between the WSGI thread and the pipeline: the reviewer is called in the
    thread serving the request, with a deadline made from the API server's `?timeout=`."""
    seen: list[tuple[int, float]] = []

    def recording(request: Any, context: Any, *, mutate: bool = False, deadline: Any) -> Any:
        seen.append((threading.get_ident(), deadline.at - deadline.clock()))
        return admission_support.review(request, context, mutate=mutate, deadline=deadline)

    client = make_app(recording).test_client()
    for path in ("/validate", "/mutate"):
        answer = client.post(
            path, query_string=query, data=encode(review_body()), content_type=JSON
        )
        assert answer.status_code == 200 and answer.get_json()["response"]["allowed"]
    assert [ident for ident, _ in seen] == [threading.get_ident()] * 2
    assert all(budget - 0.5 < left <= budget for _, left in seen), seen


class _Peer:
    """A TLS socket as the server hands it to the app, with a verified peer certificate."""

    def __init__(self, cert: dict[str, Any]) -> None:
        self._cert = cert

    def getpeercert(self) -> dict[str, Any]:
        return self._cert


API_SERVER = {"subject": ((("commonName", "apiserver"),),)}
KUBELET = {"subject": ((("commonName", "kubelet"),),), "subjectAltName": (("DNS", "node-1"),)}
NAMED = {"subject": ((("organizationName", "x"),),), "subjectAltName": (("DNS", "apiserver"),)}
TWO_CNS = {"subject": ((("commonName", "kubelet"),), (("commonName", "apiserver"),))}
TWO_IN_ONE = {"subject": ((("commonName", "apiserver"), ("commonName", "kubelet")),)}


@pytest.mark.parametrize(
    ("cert", "names", "code", "key"),
    [
        pytest.param(API_SERVER, frozenset({"apiserver"}), 200, "gunicorn.socket", id="cn-allowed"),
        pytest.param(NAMED, frozenset({"apiserver"}), 200, "gunicorn.socket", id="dns-allowed"),
        pytest.param(KUBELET, frozenset({"apiserver"}), 403, "gunicorn.socket", id="other-name"),
        pytest.param(KUBELET, frozenset(), 200, "gunicorn.socket", id="any-name"),
        pytest.param({}, frozenset(), 403, "gunicorn.socket", id="no-certificate"),
        pytest.param(TWO_CNS, frozenset({"apiserver"}), 403, "gunicorn.socket", id="two-cns"),
        pytest.param(TWO_IN_ONE, frozenset({"apiserver"}), 403, "gunicorn.socket", id="two-in-one"),
        pytest.param(TWO_CNS, frozenset(), 403, "gunicorn.socket", id="two-cns-any-name"),
    ],
)
def test_client_names_decide_who_may_send_reviews(
    make_app: Callable[..., Flask], cert: dict[str, Any], names: frozenset[str], code: int, key: str
) -> None:
    app = make_app(require_client_cert=True, client_names=names)
    answer = app.test_client().post(
        "/validate",
        data=encode(review_body()),
        content_type=JSON,
        environ_overrides={key: _Peer(cert)},
    )
    assert answer.status_code == code and answer.is_json
    if code == 403:
        assert "certificate" in answer.get_json()["message"]


class Stalled:
    """A body stream whose client sent part of the body, then nothing: each read waits."""

    def __init__(self, sent: bytes) -> None:
        self.sent = sent

    def read(self, size: int) -> bytes:
        chunk, self.sent = self.sent[:size], self.sent[size:]
        if not chunk:
            gevent.sleep(30)
        return chunk


@pytest.mark.parametrize("sent", [b"", b'{"kind"'], ids=["nothing", "part"])
def test_a_body_that_stops_short_is_a_408_that_closes(
    monkeypatch: pytest.MonkeyPatch, sent: bytes
) -> None:
    monkeypatch.setattr(routes, "BODY_READ_SECONDS", 0.05)
    environ = {"wsgi.input": Stalled(sent), "CONTENT_LENGTH": "100"}
    reply = routes.received(environ, 1024, mutate=False)
    assert isinstance(reply, routes.Reply) and (reply.code, reply.close) == (408, True)
    assert json.loads(reply.body)["message"] == "request body not received in time"
