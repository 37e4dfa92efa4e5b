"""The thin WSGI route for POST /validate and /mutate answers byte for byte as Flask would.

`ReviewRoutes` answers the two review routes in front of Flask; everything else, and every
other method on them, goes to Flask. Each case is sent both ways (through the app, and to
the Flask app with the thin route taken out) and the status line, headers and body must be
identical.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import pytest
from admission.admission_support import encode, pod, review_body
from flask import Flask
from werkzeug.test import Client, TestResponse

from webhook.admission import routes
from webhook.admission.routes import ReviewRoutes, json_reply

JSON = "application/json"
Case = dict[str, Any]


def _without_uid() -> dict[str, Any]:
    body = review_body()
    del body["request"]["uid"]
    return body


CASES = [
    pytest.param({"data": encode(review_body())}, {}, id="allowed"),
    pytest.param({"data": encode(review_body(pod(deny="yes")))}, {}, id="denied"),
    pytest.param({"path": "/mutate", "data": encode(review_body())}, {}, id="mutate-patch"),
    pytest.param({"data": encode(review_body(dryRun=True))}, {}, id="dry-run-warning"),
    pytest.param({"data": encode(review_body(pod("nowhere")))}, {}, id="no-tenant"),
    pytest.param({"data": b"{not json"}, {}, id="malformed-json"),
    pytest.param({"data": b"\xff\xfe\x00"}, {}, id="not-utf8"),
    pytest.param({"data": encode(review_body()), "content_type": "text/plain"}, {},
                 id="wrong-content-type"),
    pytest.param({"data": encode(review_body()), "content_type": None}, {},
                 id="no-content-type"),
    pytest.param({"data": encode(_without_uid())}, {}, id="missing-uid"),
    pytest.param({"data": encode(review_body(operation="PATCH"))}, {}, id="bad-operation-uid"),
    pytest.param({"data": encode(review_body(pod(filler="x" * 4096)))},
                 {"max_body_bytes": 2048}, id="oversized-declared"),
    pytest.param({"data": encode(review_body(pod(filler="x" * 4096))), "chunked": True},
                 {"max_body_bytes": 2048}, id="oversized-chunked"),
    pytest.param({"data": encode(review_body()), "content_length": 100_000}, {},
                 id="truncated-body"),
    pytest.param({"data": encode(review_body(pod(crash="yes")))}, {}, id="pipeline-crash"),
    pytest.param({"path": "/validate?timeout=1s", "data": encode(review_body(pod(sleep="2")))},
                 {"timeout_margin": 0.1}, id="deadline-overrun-validate"),
    pytest.param({"path": "/mutate?timeout=1s", "data": encode(review_body(pod(sleep="2")))},
                 {"timeout_margin": 0.1}, id="deadline-overrun-mutate"),
    pytest.param({"method": "GET"}, {}, id="get-validate"),
    pytest.param({"method": "PUT", "path": "/mutate"}, {}, id="put-mutate"),
    pytest.param({"method": "OPTIONS"}, {}, id="options-validate"),
    pytest.param({"path": "/validate/", "data": encode(review_body())}, {}, id="trailing-slash"),
    pytest.param({"path": "/nope", "data": encode(review_body())}, {}, id="unknown-path"),
    pytest.param({"method": "GET", "path": "/healthz"}, {}, id="healthz"),
]


def _send(client: Client, case: Case) -> TestResponse:
    content_type = case.get("content_type", JSON)
    headers = {"Content-Type": content_type} if content_type else {}
    data = case.get("data", b"")
    extra: dict[str, Any] = {}
    if case.get("chunked"):
        headers["Transfer-Encoding"] = "chunked"
        extra = {"input_stream": io.BytesIO(data),
                 "environ_overrides": {"wsgi.input_terminated": True}}
    elif "content_length" in case:
        extra = {"input_stream": io.BytesIO(data), "content_length": case["content_length"]}
    else:
        extra = {"data": data}
    method, path = case.get("method", "POST"), case.get("path", "/validate")
    return client.open(path, method=method, headers=headers, **extra)


def _flask_only(app: Flask) -> Client:
    """The same app with the thin route taken out: Flask routes every request."""
    assert isinstance(app.wsgi_app, ReviewRoutes)
    return Client(app.wsgi_app.app)


@pytest.mark.parametrize(("case", "options"), CASES)
def test_thin_route_answers_exactly_as_flask(
    make_app: Callable[..., Flask], case: Case, options: dict[str, Any]
) -> None:
    app = make_app(**options)
    thin, flask = _send(app.test_client(), case), _send(_flask_only(app), case)
    assert (thin.status, thin.headers.to_wsgi_list(), thin.data) == (
        flask.status, flask.headers.to_wsgi_list(), flask.data
    )  # fmt: skip
    assert thin.is_json


def test_an_escaping_error_is_the_same_500(
    make_app: Callable[..., Flask], monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_: Any) -> None:
        raise RuntimeError("parser bug")

    monkeypatch.setattr(routes, "parse_review", broken)
    app = make_app()
    case = {"data": encode(review_body())}
    thin, flask = _send(app.test_client(), case), _send(_flask_only(app), case)
    assert thin.status_code == 500 and thin.get_json() == {"code": 500, "message": "internal error"}
    assert (thin.status, thin.headers.to_wsgi_list(), thin.data) == (
        flask.status, flask.headers.to_wsgi_list(), flask.data
    )  # fmt: skip


@pytest.mark.parametrize(
    ("method", "path", "through_flask"),
    [
        ("POST", "/validate", False),
        ("POST", "/mutate", False),
        ("GET", "/validate", True),
        ("POST", "/validate/", True),
        ("GET", "/healthz", True),
    ],
    ids=["post-validate", "post-mutate", "get-validate", "trailing-slash", "healthz"],
)
def test_only_review_posts_bypass_flask(
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
