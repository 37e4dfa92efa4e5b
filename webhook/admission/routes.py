"""`/validate` and `/mutate`: the one way a review is answered, from WSGI environ to JSON reply.

`ReviewRoutes` sits in front of the Flask app (which keeps /healthz, /readyz and /metrics) and
answers every request for the two review paths itself: a POST is reviewed, any other method
gets a JSON 405. A review is the webhook's only hot path, so it reads the WSGI environ
directly: no Flask or Werkzeug request, context, URL adapter or response object per review.
Every reply is JSON: an AdmissionReview (200) or `{code, message[, uid]}`. The connection's
socket, for the peer certificate under `--client-ca` and to end a connection whose framing is
lost, is gunicorn's WSGI extension `gunicorn.socket`.
"""

from __future__ import annotations

import functools
import json
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any
from urllib.parse import parse_qs

import gevent
from werkzeug.exceptions import HTTPException
from werkzeug.http import HTTP_STATUS_CODES

from webhook.admission import metrics
from webhook.admission.deadline import budget
from webhook.admission.firstrequest import shut_down
from webhook.admission.handler import Admitter
from webhook.admission.review import BadReview, encode_review, parse_review
from webhook.types import AdmissionRequest
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
UNNAMED = "this client certificate's names are not among --client-name"
TWO_NAMES = "this client certificate's subject has more than one Common Name"
AMBIGUOUS: frozenset[str] = frozenset({"\0more than one Common Name"})
"""What `peer_names` gives for a subject of several CNs: Kubernetes reads one of them as the
client's name, so a certificate whose other CN is allowed must not pass for it."""
ARRIVED = "dragate.arrived"
"""The environ key holding `time.monotonic()` when the request reached the app (turns.py):
a review's deadline counts from there, before its body is read and parsed."""
BODY_READ_SECONDS = 5.0
"""How long one read of a request body waits for the client's next bytes. The API server
sends a review's body right behind its headers, so a body that stops short of its declared
length is a client gone or a hostile one: it is answered 408 and the connection closed, rather
than held until the connection's socket timeout."""
DRAIN_BYTES = 64 * 1024 * 1024
"""At most this much of a body refused unread is read and dropped before the connection
closes (`drain`)."""
FRAMING = "a request with both Content-Length and Transfer-Encoding is refused (RFC 9112 6.3)"


@record
class Reply:
    """An HTTP status code and a JSON body, ready for WSGI or for a Flask Response, and what
    to do once it has been sent (a review's metrics and log line)."""

    code: int
    body: bytes
    after: Callable[[], None] | None = None
    close: bool = False  # ask the server to close the connection once this is sent

    @property
    def status(self) -> str:
        """Werkzeug's status line (`400 BAD REQUEST`), as the Flask routes send it."""
        return f"{self.code} {HTTP_STATUS_CODES.get(self.code, 'UNKNOWN').upper()}"

    def headers(self) -> list[tuple[str, str]]:
        headers = [("Content-Type", "application/json"), ("Content-Length", str(len(self.body)))]
        return [*headers, ("Connection", "close")] if self.close else headers


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
        if reply.code == 413 and client_closes(environ):
            reply = replace(reply, after=then(reply.after, functools.partial(drain, environ)))
        if reply.close:
            reply = replace(reply, after=then(reply.after, functools.partial(hang_up, environ)))
        start_response(reply.status, reply.headers())
        return [reply.body] if reply.after is None else Sent([reply.body], reply.after)

    def _reply(self, environ: Environ, mutate: bool) -> Reply:
        if environ.get("REQUEST_METHOD") != "POST":
            return json_error(405, NOT_ALLOWED)
        options = self._admitter.options
        if options.require_client_cert:
            names = peer_names(environ)
            if names is None:
                return json_error(403, UNCERTIFIED)
            if names is AMBIGUOUS:
                return json_error(403, TWO_NAMES)
            if options.client_names and not names & options.client_names:
                return json_error(403, UNNAMED)
        return guarded(self._admitter, environ, mutate=mutate)


class Sent(list[bytes]):
    """The body, and what runs once the server has written it: WSGI servers call `close` on
    what the app returned after sending it (PEP 3333), so the client never waits for what
    follows. It runs once; what it raises is logged."""

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


def client_closes(environ: Environ) -> bool:
    """Whether the client asked for the connection to close after this answer."""
    if "close" in environ.get("HTTP_CONNECTION", "").lower():
        return True
    return environ.get("SERVER_PROTOCOL") == "HTTP/1.0"


def then(first: Callable[[], None] | None, second: Callable[[], None]) -> Callable[[], None]:
    """`first` (if any), then `second`."""
    if first is None:
        return second

    def both() -> None:
        try:
            first()
        finally:
            second()

    return both


def drain(environ: Environ) -> None:
    """Read and drop the rest of a body refused unread, once the answer is sent, on a
    connection the client asked to close: closing a socket with unread bytes in it sends a
    reset, and a client still writing its body (urllib, Go's net/http) would read the reset
    rather than the answer. Each read waits at most `BODY_READ_SECONDS`; at most
    `DRAIN_BYTES` are read. On a kept-alive connection gunicorn's parser drains the rest
    itself before the next request."""
    stream, left = environ["wsgi.input"], DRAIN_BYTES
    try:
        while left > 0:
            chunk = _read(stream, min(65536, left))
            if not chunk:
                return
            left -= len(chunk)
    except (TimeoutError, BadReview):
        return


def hang_up(environ: Environ) -> None:
    """End the connection (`firstrequest.shut_down`): once the answer is sent after a body
    that stopped short or broke its framing (where the next request would start is unknown),
    or when an answer has waited too long to be written (turns.py)."""
    shut_down(environ.get("gunicorn.socket"))


def peer_names(environ: Environ) -> frozenset[str] | None:
    """The Common Name and DNS names of the certificate the TLS peer presented and the client
    CA verified (mTLS); None when it presented none, `AMBIGUOUS` when its subject has more
    than one Common Name."""
    sock = environ.get("gunicorn.socket")
    getpeercert = getattr(sock, "getpeercert", None)
    try:
        cert = getpeercert() if getpeercert is not None else None
    except (OSError, ValueError):
        return None
    if not cert:
        return None
    common = [v for rdn in cert.get("subject", ()) for k, v in rdn if k == "commonName"]
    if len(common) > 1:
        return AMBIGUOUS
    dns = {v for k, v in cert.get("subjectAltName", ()) if k == "DNS"}
    return frozenset(common) | dns


def guarded(admitter: Admitter, environ: Environ, *, mutate: bool) -> Reply:
    """`answer`, with a JSON 500 for what escapes it (a bug must not become an HTML page)."""
    try:
        return answer(admitter, environ, mutate=mutate)
    except Exception as err:
        return internal_error(err)


def received(environ: Environ, limit: int, mutate: bool) -> AdmissionRequest | Reply:
    """The AdmissionReview's request, or the JSON 4xx that answers a body that is none."""
    try:
        return parse_review(read_body(environ, limit), environ.get("CONTENT_TYPE"))
    except TooLarge as err:
        return _bad_request(err, mutate, code=413)
    except BadFraming as err:
        return replace(_bad_request(err, mutate), close=True)
    except BadReview as err:
        return _bad_request(err, mutate)
    except TimeoutError:  # the client sent no bytes for BODY_READ_SECONDS mid-body
        log.warning("request body not received in time", extra={"endpoint": _endpoint(mutate)})
        return replace(json_error(408, "request body not received in time"), close=True)


def answer(admitter: Admitter, environ: Environ, *, mutate: bool) -> Reply:
    """400 for anything that is not an AdmissionReview, else the admitter's reply."""
    parsed = received(environ, admitter.options.max_body_bytes, mutate)
    if isinstance(parsed, Reply):
        return parsed
    options = admitter.options
    seconds = budget(_timeout(environ), options.default_timeout, options.timeout_margin)
    arrived = environ.get(ARRIVED)  # the API server's timeout runs from its request
    spent = time.monotonic() - arrived if arrived is not None else 0.0
    try:
        admitted = admitter.admit(parsed, mutate=mutate, budget=seconds, spent=spent)
        return Reply(200, encode_review(admitted.reply), admitted.account)
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


class TooLarge(BadReview):
    """A body over the size limit: answered 413 without reading it (no `100 Continue` is
    sent for it); the server reads and drops the rest after the answer."""


class BadFraming(BadReview):
    """A request whose body length is ambiguous: answered 400, and the connection closed."""


def read_body(environ: Environ, limit: int) -> bytes:
    """The request body, refused above `limit` even when Content-Length is absent (chunked).

    Without a Content-Length the body is read to its end only when the server marks the input
    as terminated (chunked bodies); otherwise it is empty, as in Werkzeug.
    """
    stream, length = environ["wsgi.input"], _content_length(environ)
    if length is not None and length > limit:
        raise TooLarge(f"body of {length} bytes exceeds the {limit}-byte limit")
    if length is None and not environ.get("wsgi.input_terminated"):
        return b""
    wanted = limit + 1 if length is None else length
    chunks, size = [], 0
    while size < wanted:
        chunk = _read(stream, min(65536, wanted - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    if size > limit:
        raise TooLarge(f"body exceeds the {limit}-byte limit")
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _read(stream: Any, size: int) -> bytes:
    """One read, bounded by `BODY_READ_SECONDS` (gevent's documented `Timeout`: the server's
    reads are cooperative, so the greenlet waiting on the socket is the one interrupted)."""
    try:
        with gevent.Timeout(BODY_READ_SECONDS, TimeoutError("request body read timed out")):
            chunk: bytes = stream.read(size)
    except TimeoutError:
        raise
    except Exception as err:  # broken chunked framing, or the client gone mid-body
        raise BadFraming(f"malformed request body: {err}") from None
    return chunk


def _content_length(environ: Environ) -> int | None:
    """The declared length; none for a chunked body. Both at once is refused (BadFraming)."""
    value = environ.get("CONTENT_LENGTH")
    if "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower():
        if value:
            raise BadFraming(FRAMING)
        return None
    try:
        return max(0, int(value)) if value else None
    except ValueError:
        return None


def _endpoint(mutate: bool) -> str:
    return "mutate" if mutate else "validate"


def _bad_request(err: BadReview, mutate: bool, code: int = 400) -> Reply:
    endpoint = _endpoint(mutate)
    metrics.request_counter("unknown", "unknown", endpoint, "bad_request").inc()
    log.warning("bad review", extra={"uid": err.uid, "error": err.message, "endpoint": endpoint})
    return json_error(code, err.message, err.uid)


def http_error(err: HTTPException) -> Reply:
    """404, 405, 413 and friends as JSON; routing errors are the caller's, never a 500."""
    return json_error(err.code or 400, err.description or err.name)


def internal_error(err: Exception) -> Reply:
    log.exception("unhandled error", exc_info=err)
    return json_error(500, "internal error")
