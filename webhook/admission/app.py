"""The WSGI app: /validate and /mutate in front, Flask behind for /healthz, /readyz, /metrics.

`create_app` takes everything it needs as arguments (tests pass a fake context and reviewer);
`make_app` is what each gunicorn worker calls after fork: it loads policies, gets its context
from `webhook.assembly` (the one place offline and cluster pieces are chosen) and starts the
policy watcher in that worker. Every request for `/validate` and `/mutate` is answered by
`routes.ReviewRoutes`, the one path a review takes; Flask never sees one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from flask import Flask, Response, jsonify
from werkzeug.exceptions import HTTPException

from webhook import pipeline
from webhook.admission import jsonlog, metrics, routes
from webhook.admission.config import AdmissionOptions, ServeConfig
from webhook.admission.handler import Admitter, Reviewer
from webhook.admission.reload import PolicyHolder, PolicyWatcher
from webhook.assembly import ReadinessCheck, serving_context
from webhook.pipeline import Context, Identity
from webhook.policy.loading import load_policies
from webhook.types import PolicySet


def make_app(config: ServeConfig, fallback: PolicySet | None = None) -> Flask:
    """gunicorn's WSGI app for one worker: policies, context, watcher, reviewer.

    `fallback` is the policy set the master loaded, served when the files are unreadable now.
    """
    jsonlog.configure(config.log_level)

    holder = PolicyHolder([str(config.policy_dir)], load_policies, fallback=fallback)
    watcher = PolicyWatcher(holder, config.reload_interval)
    context, readiness = serving_context(
        holder.get, config.cluster, config.state_file, config.ledger_file
    )
    app = create_app(
        context, holder, config.admission, pipeline.review,
        cert=config.tls.cert, readiness=readiness,
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
    readiness: Sequence[ReadinessCheck] = (),
    cert: Path | None = None,
) -> Flask:
    """The WSGI app; everything it touches comes in through the arguments."""
    app = Flask("dragate")
    own = Identity(options.own_namespace, options.own_service_account)
    admitter = Admitter(replace(context, own=own), options, reviewer)
    app.add_url_rule("/healthz", "healthz", lambda: jsonify(status="ok"))
    app.add_url_rule("/readyz", "readyz", lambda: _readyz(holder, readiness))
    app.add_url_rule("/metrics", "metrics", lambda: _metrics(cert))
    app.register_error_handler(HTTPException, _http_error)
    app.register_error_handler(Exception, _internal_error)
    app.wsgi_app = routes.ReviewRoutes(app.wsgi_app, admitter)  # type: ignore[method-assign]
    return app


def _response(reply: routes.Reply) -> Response:
    return Response(reply.body, status=reply.code, mimetype="application/json")


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


def _http_error(err: HTTPException) -> Response:
    return _response(routes.http_error(err))


def _internal_error(err: Exception) -> Response:
    return _response(routes.internal_error(err))
