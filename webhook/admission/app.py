"""The WSGI app: /validate and /mutate in front, Flask behind for /healthz, /readyz, /metrics.

`create_app` takes everything it needs as arguments (tests pass a fake context and reviewer);
`make_app` is what the gunicorn worker calls after fork: it loads policies, gets its context
from `webhook.assembly` (the one place offline and cluster pieces are chosen) and starts the
policy watcher, then settles the garbage collector (`settle_collector`). Every request for
`/validate` and `/mutate` is answered by `routes.ReviewRoutes`, the one path a review takes;
Flask never sees one. In front of both, `turns.Turns` gives each request its arrival time, one
yield of the event loop and a bounded write of its answer.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from flask import Flask, Response, jsonify
from werkzeug.exceptions import HTTPException

from webhook import pipeline
from webhook.admission import jsonlog, metrics, offloop, routes, turns
from webhook.admission.config import AdmissionOptions, ServeConfig
from webhook.admission.handler import Admitter, Reviewer
from webhook.admission.offloop import yield_now
from webhook.admission.reload import PolicyHolder, PolicyWatcher, policy_report
from webhook.assembly import ReadinessCheck, policy_feed, serving_context
from webhook.pipeline import Context, Identity
from webhook.types import PolicySet

METRICS_SECONDS = 1.0
"""How long one rendering of /metrics is served (`Exposition`)."""


def make_app(config: ServeConfig, fallback: PolicySet | None = None) -> Flask:
    """gunicorn's WSGI app for the worker: policies, context, watcher, reviewer.

    `fallback` is the policy set the master loaded, served when the files are unreadable now.
    """
    jsonlog.configure(config.log_level)

    feed = policy_feed(config.cluster)
    paths = [str(config.policy_dir)] if config.policy_dir is not None else []
    holder = PolicyHolder(
        paths, feed.load, fallback=fallback, changes=feed.changes, runner=offloop.off_loop
    )
    watcher = PolicyWatcher(holder, config.reload_interval)
    context, readiness = serving_context(
        holder.get, config.cluster, config.state_file, config.ledger_file, feed=feed
    )
    app = create_app(
        context, holder, config.admission, pipeline.review,
        cert=config.tls.cert, readiness=readiness, on_first_ready=settle_collector,
    )  # fmt: skip
    watcher.ensure_running()
    app.extensions["dragate.watcher"] = watcher
    settle_collector()
    return app


def settle_collector() -> None:
    """Collect once and freeze what the worker has loaded, so no later collection walks it.

    - After make_app a worker tracks every object it loaded (modules, Flask, policies,
      compiled CEL, state); one full collection walks all of them, a stall of every request
      in the worker. A collection does not walk frozen objects.
    - In steady state a review frees what it allocates by reference counting, so collections
      are rare either way, and the served tail comes from the machine's scheduling rather
      than the collector (tests/bench/worker_probe.py compares both; docs/benchmarks.md).
    - A full collection still comes whenever long-lived objects grow by a quarter (caches
      filling: cluster mode's watch caches, the ledger), and without the freeze it walks the
      whole heap each time; with it, only what was made since.
    The thresholds stay CPython's (700, 10, 10): collections are already rare next to
    reviews, and a larger first threshold only makes each young collection longer.
    Called again once the worker is first ready (cluster mode: caches listed): `make_app`
    passes it to `create_app` as `on_first_ready`.
    Frozen objects that are later dropped are still freed by reference counting; only cyclic
    garbage among them would stay, and boot-time objects are not dropped in cycles.
    """
    gc.collect()
    gc.freeze()


def create_app(
    context: Context,
    holder: PolicyHolder,
    options: AdmissionOptions,
    reviewer: Reviewer,
    *,
    readiness: Sequence[ReadinessCheck] = (),
    cert: Path | None = None,
    on_first_ready: Callable[[], None] = lambda: None,
    metrics_seconds: float = METRICS_SECONDS,
) -> Flask:
    """The WSGI app; everything it touches comes in through the arguments. `on_first_ready`
    runs once, the first time /readyz finds every check passing. /metrics is rendered at most
    once per `metrics_seconds` (`Exposition`). The controller's state is no part of it: the
    controller role shows it on its own probe port (`webhook.admission.controlprocess`)."""
    app = Flask("dragate")
    own = Identity(options.own_namespace, options.own_service_account)
    admitter = Admitter(replace(context, own=own), options, reviewer, pause=yield_now)
    app.add_url_rule("/healthz", "healthz", lambda: jsonify(status="ok"))
    first_ready = _Once(on_first_ready)
    app.add_url_rule("/readyz", "readyz", lambda: _readyz(holder, readiness, first_ready))
    app.add_url_rule("/metrics", "metrics", Exposition(cert, metrics_seconds))
    app.register_error_handler(HTTPException, _http_error)
    app.register_error_handler(Exception, _internal_error)
    reviews = routes.ReviewRoutes(app.wsgi_app, admitter)
    app.wsgi_app = turns.Turns(reviews)  # type: ignore[method-assign]
    return app


def _response(reply: routes.Reply) -> Response:
    return Response(reply.body, status=reply.code, mimetype="application/json")


class _Once:
    """Runs `action` the first time it is called, never again (thread-safe enough: a second
    concurrent first call only repeats an idempotent action)."""

    def __init__(self, action: Callable[[], None]) -> None:
        self._action: Callable[[], None] | None = action

    def __call__(self) -> None:
        action, self._action = self._action, None
        if action is not None:
            action()


def _readyz(
    holder: PolicyHolder,
    checks: Sequence[ReadinessCheck],
    first_ready: Callable[[], None],
) -> tuple[Response, int]:
    """200 while a policy set is served, even a stale one (the body says so); 503 otherwise.
    The first time every check passes, the collector freezes what the caches loaded."""
    results = {name: ok for ok, name in (check() for check in checks)}
    results["policies"] = holder.loaded is not None
    if all(results.values()):
        first_ready()
    body = {
        "status": "ok" if all(results.values()) else "unready",
        "policies": policy_report(holder),
        "checks": results,
    }
    return jsonify(body), 200 if all(results.values()) else 503


class Exposition:
    """/metrics, rendered at most once per `METRICS_SECONDS`: a scrape within that time of
    the last one gets the same text. Prometheus scrapes every 10 s or more; a client asking
    for /metrics on every request (pipelined, or on many connections) costs the loop the
    answer's bytes, not a rendering each, and every other connection keeps its turns."""

    def __init__(self, cert: Path | None, seconds: float) -> None:
        self._cert, self._seconds = cert, seconds
        self._rendered: tuple[float, bytes, str] | None = None

    def __call__(self) -> Response:
        now = time.monotonic()
        if self._rendered is None or now - self._rendered[0] >= self._seconds:
            data, content_type = metrics.exposition(self._cert)
            self._rendered = (now, data, content_type)
        _, data, content_type = self._rendered
        return Response(data, content_type=content_type)


def _http_error(err: HTTPException) -> Response:
    return _response(routes.http_error(err))


def _internal_error(err: Exception) -> Response:
    return _response(routes.internal_error(err))
