"""`POST /validate` and `POST /mutate`: from a WSGI request to a JSON reply, without Flask.

A review is the webhook's only hot path, and Flask's per-request machinery (contexts, URL
adapter, response object, signals) was a third of the CPU a review spent outside the
pipeline. So `ReviewRoutes` sits in front of the Flask app and answers exactly these two
method and path pairs itself; every other request (GET /validate's 405 included) goes to
Flask unchanged.
The Flask views of the two routes call the same `answer`, so both ways give byte-identical
replies: same status line, same headers, same JSON (Flask's `jsonify` settings).

Relies on (checked with gunicorn 27.0.1; canaries: tests/canary/test_gunicorn.py):
- `environ['gunicorn.socket']`: the connection's socket, for the peer certificate.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from werkzeug.exceptions import HTTPException
from werkzeug.http import HTTP_STATUS_CODES
from werkzeug.wrappers import Request

from webhook.admission import bounds, metrics
from webhook.admission.deadline import budget
from webhook.admission.handler import Admitter
from webhook.admission.review import BadReview, parse_review, render_response

log = logging.getLogger("dragate.http")
StartResponse = Callable[..., Any]
WsgiApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]
ROUTES = {"/validate": False, "/mutate": True}
"""Path -> `mutate`: the routes `ReviewRoutes` answers itself (POST only)."""

_ENCODER = json.JSONEncoder(ensure_ascii=True, sort_keys=True, separators=(",", ":"))
"""What Flask's `jsonify` does outside debug mode, built once rather than per reply."""


@dataclass(frozen=True)
class Reply:
    """An HTTP status code and a JSON body, ready for WSGI or for a Flask Response."""

    code: int
    body: bytes

    @property
    def status(self) -> str:
        """Werkzeug's status line (`400 BAD REQUEST`), so both routes send the same bytes."""
        return f"{self.code} {HTTP_STATUS_CODES.get(self.code, 'UNKNOWN').upper()}"

    def headers(self) -> list[tuple[str, str]]:
        return [("Content-Type", "application/json"), ("Content-Length", str(len(self.body)))]


def json_reply(code: int, body: object) -> Reply:
    """`jsonify(body), code` as bytes: compact, sorted keys, ASCII, newline-terminated."""
    return Reply(code, (_ENCODER.encode(body) + "\n").encode("ascii"))


def json_error(code: int, message: str, uid: str = "") -> Reply:
    body: dict[str, Any] = {"code": code, "message": message}
    if uid:
        body["uid"] = uid
    return json_reply(code, body)


class ReviewRoutes:
    """WSGI middleware: answers the two review routes, hands everything else to `app`."""

    def __init__(self, app: WsgiApp, admitter: Admitter, request_class: type[Request]) -> None:
        self.app = app
        self._admitter = admitter
        self._request_class = request_class

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        mutate = ROUTES.get(environ.get("PATH_INFO", ""))
        if mutate is None or environ.get("REQUEST_METHOD") != "POST":
            return self.app(environ, start_response)
        if self._admitter.options.require_client_cert and not peer_certified(environ):
            reply = json_error(403, "reviews need a client certificate signed by --client-ca")
        else:
            reply = guarded(self._admitter, self._request_class(environ), mutate=mutate)
        start_response(reply.status, reply.headers())
        return [reply.body]


def peer_certified(environ: dict[str, Any]) -> bool:
    """True when the TLS peer presented a certificate the client CA verified (mTLS)."""
    sock = environ.get("gunicorn.socket")
    getpeercert = getattr(sock, "getpeercert", None)
    try:
        return bool(getpeercert()) if getpeercert is not None else False
    except (OSError, ValueError):
        return False


def guarded(admitter: Admitter, request: Request, *, mutate: bool) -> Reply:
    """`answer`, with the app's error handlers' replies for what escapes it."""
    try:
        return answer(admitter, request, mutate=mutate)
    except HTTPException as err:  # e.g. the client closed before sending the whole body
        return http_error(err)
    except Exception as err:
        return internal_error(err)


def answer(admitter: Admitter, request: Request, *, mutate: bool) -> Reply:
    """400 for anything that is not an AdmissionReview, else the admitter's reply."""
    try:
        body = read_body(request, admitter.options.max_body_bytes)
        parsed = parse_review(body, request.content_type)
    except BadReview as err:
        return _bad_request(err, mutate)
    except TimeoutError:  # DeadlineSocket's bound on reading a request ran out mid-body
        log.warning("request body not received in time", extra={"endpoint": request.path})
        return json_error(408, "request body not received in time")
    refused = bounds.refusal(parsed)
    if refused is not None:  # no review: the object is over a limit Kubernetes enforces
        log.warning("object over Kubernetes limits", extra={"uid": parsed.uid})
        return json_reply(200, render_response(parsed.uid, refused, mutate=mutate))
    seconds = budget(
        request.args.get("timeout"),
        admitter.options.default_timeout,
        admitter.options.timeout_margin,
    )
    try:
        return json_reply(200, admitter.admit(parsed, mutate=mutate, budget=seconds))
    except Exception:
        log.exception("internal error during review", extra={"uid": parsed.uid})
        return json_error(500, "internal error; see the webhook log for this uid", parsed.uid)


def read_body(request: Request, limit: int) -> bytes:
    """The request body, refused above `limit` even when Content-Length is absent (chunked)."""
    length = request.content_length
    if length is not None and length > limit:
        _discard(request, DRAIN_FACTOR * limit)
        raise BadReview(f"body of {length} bytes exceeds the {limit}-byte limit")
    chunks, size = [], 0
    while size <= limit:
        chunk = request.stream.read(min(65536, limit + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    if size > limit:
        _discard(request, DRAIN_FACTOR * limit)
        raise BadReview(f"body exceeds the {limit}-byte limit")
    return b"".join(chunks)


DRAIN_FACTOR = 4
"""An oversized body is read and dropped up to this many times the limit before answering.

A client still sending when the server answers and closes gets a reset instead of the 400
and its message; reading a bounded amount lets it see why. Past the bound the connection is
closed regardless, so a huge body cannot hold a worker thread.
"""


def _discard(request: Request, remaining: int) -> None:
    while remaining > 0:
        chunk = request.stream.read(min(65536, remaining))
        if not chunk:
            return
        remaining -= len(chunk)


def _bad_request(err: BadReview, mutate: bool) -> Reply:
    endpoint = "mutate" if mutate else "validate"
    metrics.REQUESTS.labels("unknown", "unknown", endpoint, "bad_request").inc()
    log.warning("bad review", extra={"uid": err.uid, "error": err.message, "endpoint": endpoint})
    return json_error(400, err.message, err.uid)


def http_error(err: HTTPException) -> Reply:
    """404, 405, 413 and friends as JSON; routing errors are the caller's, never a 500."""
    code = err.code or 400
    if code == 413:  # Werkzeug's own size guard: report it as the documented 400
        code = 400
    return json_error(code, err.description or err.name)


def internal_error(err: Exception) -> Reply:
    log.exception("unhandled error", exc_info=err)
    return json_error(500, "internal error")
