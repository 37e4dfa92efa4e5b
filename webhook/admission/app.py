"""The Flask app: /validate, /mutate, /healthz, /readyz, /metrics.

`create_app` takes everything it needs as arguments (tests pass a fake context and reviewer);
`make_app` is what each gunicorn worker calls after fork: it loads policies, builds the
context in `build_context` (the one place offline and cluster pieces are chosen) and starts
the policy watcher in that worker.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from flask import Flask, Response, jsonify, request
from werkzeug.exceptions import HTTPException

from webhook import pipeline
from webhook.admission import cluster, jsonlog, metrics
from webhook.admission.config import AdmissionOptions, ServeConfig
from webhook.admission.deadline import DeadlineRunner, budget
from webhook.admission.handler import Admitter, Reviewer
from webhook.admission.reload import PolicyHolder, PolicyWatcher
from webhook.admission.review import BadReview, parse_review
from webhook.ledger.memory import MemoryLedger
from webhook.ledger.sqlite import SqliteLedger
from webhook.pipeline import Context
from webhook.sources.offline import offline_context
from webhook.sources.policies import load_policies
from webhook.sources.state import SnapshotState, load_state
from webhook.types import PolicySet

log = logging.getLogger("dragate.http")
ReadinessCheck = Callable[[], tuple[bool, str]]
"""A named condition for /readyz, e.g. "watch caches synced" once cluster mode lands."""


def build_context(
    config: ServeConfig, holder: PolicyHolder
) -> tuple[Context, list[ReadinessCheck]]:
    """The one place that picks cluster state and ledger; swap pieces here, nowhere else."""
    if config.cluster is not None:
        mode = cluster.connect(config.cluster, holder.get)
        mode.start()
        return mode.context, [mode.ready]
    state = load_state(str(config.state_file)) if config.state_file else SnapshotState.empty()
    ledger = SqliteLedger(str(config.ledger_file)) if config.ledger_file else MemoryLedger()
    return offline_context(holder.get, state, ledger), []


def make_app(config: ServeConfig, fallback: PolicySet | None = None) -> Flask:
    """gunicorn's WSGI app for one worker: policies, context, watcher, reviewer.

    `fallback` is the policy set the master loaded, served when the files are unreadable now.
    """
    jsonlog.configure(config.log_level)

    holder = PolicyHolder([str(config.policy_dir)], load_policies, fallback=fallback)
    watcher = PolicyWatcher(holder, config.reload_interval)
    context, readiness = build_context(config, holder)
    app = create_app(
        context, holder, config.admission, pipeline.review,
        threads=config.threads, cert=config.tls.cert, readiness=readiness,
    )  # fmt: skip
    watcher.ensure_running()
    app.extensions["dragate.watcher"] = watcher
    return app


def create_app(
    context: Context,
    holder: PolicyHolder,
    options: AdmissionOptions,
    reviewer: Reviewer,
    *,
    threads: int = 4,
    readiness: Sequence[ReadinessCheck] = (),
    cert: Path | None = None,
) -> Flask:
    """The WSGI app; everything it touches comes in through the arguments."""
    app = Flask("dragate")
    admitter = Admitter(context, options, reviewer, DeadlineRunner(max_workers=threads + 4))
    app.add_url_rule(
        "/validate", "validate", lambda: _review(admitter, mutate=False), methods=["POST"]
    )
    app.add_url_rule("/mutate", "mutate", lambda: _review(admitter, mutate=True), methods=["POST"])
    app.add_url_rule("/healthz", "healthz", lambda: jsonify(status="ok"))
    app.add_url_rule("/readyz", "readyz", lambda: _readyz(holder, readiness))
    app.add_url_rule("/metrics", "metrics", lambda: _metrics(cert))
    app.register_error_handler(HTTPException, _http_error)
    app.register_error_handler(Exception, _internal_error)
    return app


def _review(admitter: Admitter, *, mutate: bool) -> tuple[Response, int]:
    """POST handler: 400 for anything that is not an AdmissionReview, else the reply."""
    try:
        body = _body(admitter.options.max_body_bytes)
        parsed = parse_review(body, request.content_type)
    except BadReview as err:
        return _bad_request(err, mutate)
    except TimeoutError:  # slowclients' bound on reading a request ran out mid-body
        log.warning("request body not received in time", extra={"endpoint": request.path})
        return _json_error(408, "request body not received in time")
    seconds = budget(
        request.args.get("timeout"),
        admitter.options.default_timeout,
        admitter.options.timeout_margin,
    )
    try:
        return jsonify(admitter.admit(parsed, mutate=mutate, budget=seconds)), 200
    except Exception:
        log.exception("internal error during review", extra={"uid": parsed.uid})
        return _json_error(500, "internal error; see the webhook log for this uid", parsed.uid)


def _body(limit: int) -> bytes:
    """The request body, refused above `limit` even when Content-Length is absent (chunked)."""
    length = request.content_length
    if length is not None and length > limit:
        _discard(DRAIN_FACTOR * limit)
        raise BadReview(f"body of {length} bytes exceeds the {limit}-byte limit")
    chunks, size = [], 0
    while size <= limit:
        chunk = request.stream.read(min(65536, limit + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    if size > limit:
        _discard(DRAIN_FACTOR * limit)
        raise BadReview(f"body exceeds the {limit}-byte limit")
    return b"".join(chunks)


DRAIN_FACTOR = 4
"""An oversized body is read and dropped up to this many times the limit before answering.

A client still sending when the server answers and closes gets a reset instead of the 400
and its message; reading a bounded amount lets it see why. Past the bound the connection is
closed regardless, so a huge body cannot hold a worker thread.
"""


def _discard(remaining: int) -> None:
    while remaining > 0:
        chunk = request.stream.read(min(65536, remaining))
        if not chunk:
            return
        remaining -= len(chunk)


def _bad_request(err: BadReview, mutate: bool) -> tuple[Response, int]:
    endpoint = "mutate" if mutate else "validate"
    metrics.REQUESTS.labels("unknown", "unknown", endpoint, "bad_request").inc()
    log.warning("bad review", extra={"uid": err.uid, "error": err.message, "endpoint": endpoint})
    return _json_error(400, err.message, err.uid)


def _readyz(holder: PolicyHolder, checks: Sequence[ReadinessCheck]) -> tuple[Response, int]:
    """200 while a policy set is served, even a stale one (the body says so); 503 otherwise."""
    status = holder.status
    results = {name: ok for ok, name in (check() for check in checks)}
    body = {
        "status": "ok" if all(results.values()) else "unready",
        "policies": {
            "state": "stale" if status.stale else "current",
            "digest": status.digest,
            "loadedAt": status.loaded_at,
            "errors": list(status.errors),
        },
        "checks": results,
    }
    return jsonify(body), 200 if all(results.values()) else 503


def _metrics(cert: Path | None) -> Response:
    data, content_type = metrics.exposition(cert)
    return Response(data, content_type=content_type)


def _json_error(code: int, message: str, uid: str = "") -> tuple[Response, int]:
    body: dict[str, Any] = {"code": code, "message": message}
    if uid:
        body["uid"] = uid
    return jsonify(body), code


def _http_error(err: HTTPException) -> tuple[Response, int]:
    """404, 405, 413 and friends as JSON; routing errors are the caller's, never a 500."""
    code = err.code or 400
    if code == 413:  # Werkzeug's own size guard: report it as the documented 400
        code = 400
    return _json_error(code, err.description or err.name)


def _internal_error(err: Exception) -> tuple[Response, int]:
    log.exception("unhandled error", exc_info=err)
    return _json_error(500, "internal error")
