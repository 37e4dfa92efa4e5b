"""The baseline: a no-op Flask app that parses the AdmissionReview, echoes its uid and allows.

Served by dragate's own gunicorn application (`DragateServer`, so `gunicorn_settings` of the
same ServeConfig: the `gevent` worker class, one worker, keep-alive, connection limit,
TLS context hook and certificate, worker tmp dir, the first request's header deadline)
with another `application()`, so the only difference from `dragate serve` is the WSGI app.
Run:
`python tests/bench/noop_server.py --port P --cert-dir D`.
With `--patch FILE` (a JSON patch), every Pod reviewed on /mutate is answered with that patch:
what the API server's own work on dragate's rewrite costs, without dragate's reviews.
Run as a script, it patches the standard library with gevent first, as `dragate serve` does
(`webhook.cli.entry`); imported (tests, instructions.py), it patches nothing.
"""

from __future__ import annotations

if __name__ == "__main__":
    from gevent import monkey  # type: ignore[import-untyped, unused-ignore]

    monkey.patch_all()

import argparse
import base64
import json
from pathlib import Path
from typing import Any

from flask import Flask, request

from webhook.admission.config import ServeConfig, TlsFiles
from webhook.admission.server import DragateServer


def noop_app(patch: list[dict[str, Any]] | None = None) -> Flask:
    """/validate and /mutate allow every review with its uid; with `patch`, a Pod reviewed on
    /mutate is answered with it. /healthz and /readyz answer ok."""
    encoded = base64.b64encode(json.dumps(patch).encode()).decode() if patch else None
    app = Flask("noop")
    app.add_url_rule("/healthz", "healthz", _ok)
    app.add_url_rule("/readyz", "readyz", _ok)
    app.add_url_rule("/validate", "validate", lambda: _answer(None), methods=["POST"])
    app.add_url_rule("/mutate", "mutate", lambda: _answer(encoded), methods=["POST"])
    return app


def _ok() -> dict[str, Any]:
    return {"status": "ok"}


def _answer(patch: str | None) -> dict[str, Any]:
    review = request.get_json(force=True)["request"]
    response: dict[str, Any] = {"uid": review["uid"], "allowed": True}
    if patch is not None and review.get("kind", {}).get("kind") == "Pod":
        response.update(patchType="JSONPatch", patch=patch)
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}


class NoopServer(DragateServer):
    """DragateServer's settings, the no-op app (or the patching one)."""

    def __init__(self, config: ServeConfig, patch: list[dict[str, Any]] | None = None) -> None:
        self.patch = patch
        super().__init__(config)

    def application(self) -> Any:
        return noop_app(self.patch)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--cert-dir", type=Path, required=True)
    parser.add_argument("--graceful-timeout", type=int, default=ServeConfig.graceful_timeout)
    parser.add_argument("--patch", type=Path, help="a JSON patch for every Pod on /mutate")
    args = parser.parse_args()
    tls = TlsFiles(args.cert_dir / "tls.crt", args.cert_dir / "tls.key")
    config = ServeConfig(
        policy_dir=Path("."), tls=tls, host=args.host, port=args.port,
        graceful_timeout=args.graceful_timeout, log_level="info",
    )  # fmt: skip
    patch = json.loads(args.patch.read_text()) if args.patch else None
    NoopServer(config, patch).run()


if __name__ == "__main__":
    main()
