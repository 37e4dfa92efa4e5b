"""`/validate` and `/mutate`: the one way a review is answered, from WSGI environ to JSON reply.

`ReviewRoutes` sits in front of the Flask app (which keeps /healthz, /readyz and /metrics) and
answers every request for the two review paths itself: a POST is reviewed, any other method
gets a JSON 405. A review is the webhook's only hot path, so it reads the WSGI environ
directly: no Flask or Werkzeug request, context, URL adapter or response object per review.
Every reply is JSON: an AdmissionReview (200) or `{code, message[, uid]}`.

Relies on (checked with gunicorn 27.0.1; canaries: tests/canary/test_gunicorn.py):
- `environ['gunicorn.socket']`: the connection's socket, for the peer certificate.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qs

from werkzeug.exceptions import HTTPException
from werkzeug.http import HTTP_STATUS_CODES

from webhook.admission import metrics
from webhook.admission.deadline import budget
from webhook.admission.handler import Admitter
from webhook.admission.review import BadReview, encode_review, parse_review
from webhook.types.blocking import WouldBlock
from webhook.types.records import record

log = logging.getLogger("dragate.http")
Environ = dict[str, Any]
StartResponse = Callable[..., Any]
WsgiApp = Callable[[Environ, StartResponse], Iterable[bytes]]
ROUTES = {"/validate": False, "/mutate": True}
"""Path -> `mutate`: the routes `ReviewRoutes` answers (a review for POST, 405 otherwise)."""

_ENCODER = json.JSONEncoder(ensure_ascii=True, sort_keys=True, separators=(",", ":"))
"""What Flask's `jsonify` does outside debug mode, built once rather than per reply."""
NOT_ALLOWED = "The method is not allowed for the requested URL."
UNCERTIFIED = "reviews need a client certificate signed by --client-ca"


@record
class Reply:
    """An HTTP status code and a JSON body, ready for WSGI or for a Flask Response, and what
    to do once it has been sent (a review's metrics and log line)."""

    code: int
    body: bytes
    after: Callable[[], None] | None = None

    @property
    def status(self) -> str:
        """Werkzeug's status line (`400 BAD REQUEST`), as the Flask routes send it."""
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
    """WSGI middleware: answers the two review paths, hands every other path to `app`."""

    def __init__(self, app: WsgiApp, admitter: Admitter) -> None:
        self.app = app
        self._admitter = admitter

    def __call__(self, environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        mutate = ROUTES.get(environ.get("PATH_INFO", ""))
        if mutate is None:
            return self.app(environ, start_response)
        reply = self._reply(environ, mutate)
        start_response(reply.status, reply.headers())
        return [reply.body] if reply.after is None else Sent([reply.body], reply.after)

    def _reply(self, environ: Environ, mutate: bool) -> Reply:
        if environ.get("REQUEST_METHOD") != "POST":
            return json_error(405, NOT_ALLOWED)
        if self._admitter.options.require_client_cert and not peer_certified(environ):
            return json_error(403, UNCERTIFIED)
        return guarded(self._admitter, environ, mutate=mutate)


class Sent(list[bytes]):
    """The body, and what runs once the server has written it: WSGI servers call `close` on
    what the app returned after sending it (PEP 3333; gunicorn in `handle_request`'s finally,
    the loop after writing a `buffered` answer), so the client never waits for what follows.
    It runs once; what it raises is logged."""

    def __init__(self, body: list[bytes], after: Callable[[], None]) -> None:
        super().__init__(body)
        self._after: Callable[[], None] | None = after

    def close(self) -> None:
        after, self._after = self._after, None
        if after is None:
            return
        try:
            after()
        except Exception:
            log.exception("accounting a sent reply failed")


def peer_certified(environ: Environ) -> bool:
    """True when the TLS peer presented a certificate the client CA verified (mTLS)."""
    sock = environ.get("gunicorn.socket")
    getpeercert = getattr(sock, "getpeercert", None)
    try:
        return bool(getpeercert()) if getpeercert is not None else False
    except (OSError, ValueError):
        return False


def guarded(admitter: Admitter, environ: Environ, *, mutate: bool) -> Reply:
    """`answer`, with a JSON 500 for what escapes it (a bug must not become an HTML page);
    WouldBlock goes on to the worker, which serves the request again on a pool thread."""
    try:
        return answer(admitter, environ, mutate=mutate)
    except WouldBlock:
        raise  # the worker serves the request again where it may wait
    except Exception as err:
        return internal_error(err)


def answer(admitter: Admitter, environ: Environ, *, mutate: bool) -> Reply:
    """400 for anything that is not an AdmissionReview, else the admitter's reply."""
    try:
        body = read_body(environ, admitter.options.max_body_bytes)
        parsed = parse_review(body, environ.get("CONTENT_TYPE"))
    except BadReview as err:
        return _bad_request(err, mutate)
    except TimeoutError:  # DeadlineSocket's bound on reading a request ran out mid-body
        log.warning("request body not received in time", extra={"endpoint": _endpoint(mutate)})
        return json_error(408, "request body not received in time")
    options = admitter.options
    seconds = budget(_timeout(environ), options.default_timeout, options.timeout_margin)
    try:
        admitted = admitter.admit(parsed, mutate=mutate, budget=seconds)
        return Reply(200, encode_review(admitted.reply), admitted.account)
    except WouldBlock:
        raise
    except Exception:
        log.exception("internal error during review", extra={"uid": parsed.uid})
        return json_error(500, "internal error; see the webhook log for this uid", parsed.uid)


def _timeout(environ: Environ) -> str | None:
    """The apiserver's `?timeout=` (first value, as Werkzeug's `request.args` gives it)."""
    query = environ.get("QUERY_STRING")
    return _timeout_in(query) if query else None


@functools.lru_cache(maxsize=64)
def _timeout_in(query: str) -> str | None:
    """The API server sends the same query string with every review: it is parsed once."""
    values = parse_qs(query).get("timeout")
    return values[0] if values else None


def read_body(environ: Environ, limit: int) -> bytes:
    """The request body, refused above `limit` even when Content-Length is absent (chunked).

    Without a Content-Length the body is read to its end only when the server marks the input
    as terminated (gunicorn does, for chunked bodies); otherwise it is empty, as in Werkzeug.
    """
    stream, length = environ["wsgi.input"], _content_length(environ)
    if length is not None and length > limit:
        _discard(stream, min(length, DRAIN_FACTOR * limit))
        raise BadReview(f"body of {length} bytes exceeds the {limit}-byte limit")
    if length is None and not environ.get("wsgi.input_terminated"):
        return b""
    wanted = limit + 1 if length is None else length
    chunks, size = [], 0
    while size < wanted:
        chunk = stream.read(min(65536, wanted - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    if size > limit:
        _discard(stream, DRAIN_FACTOR * limit)
        raise BadReview(f"body exceeds the {limit}-byte limit")
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _content_length(environ: Environ) -> int | None:
    """The declared length; none for a chunked body, whatever else was sent (as Werkzeug)."""
    if "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower():
        return None
    value = environ.get("CONTENT_LENGTH")
    try:
        return max(0, int(value)) if value else None
    except ValueError:
        return None


DRAIN_FACTOR = 4
"""An oversized body is read and dropped up to this many times the limit before answering.

A client still sending when the server answers and closes gets a reset instead of the 400
and its message; reading a bounded amount lets it see why. Past the bound the connection is
closed regardless, so a huge body cannot hold a worker thread.
"""


def _discard(stream: Any, remaining: int) -> None:
    while remaining > 0:
        chunk = stream.read(min(65536, remaining))
        if not chunk:
            return
        remaining -= len(chunk)


def _endpoint(mutate: bool) -> str:
    return "mutate" if mutate else "validate"


def _bad_request(err: BadReview, mutate: bool) -> Reply:
    endpoint = _endpoint(mutate)
    metrics.request_counter("unknown", "unknown", endpoint, "bad_request").inc()
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
