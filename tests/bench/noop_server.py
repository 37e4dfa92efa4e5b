"""The baseline: an AdmissionReview endpoint that parses, echoes the uid and allows.

Served by dragate's own gunicorn application class with the same ServeConfig (workers,
threads, keep-alive, TLS context hook, worker tmp dir), so the only difference from
`dragate serve` is the WSGI app. Run: `python tests/bench/noop_server.py --port P --cert-dir D`.
With `--patch FILE` (a JSON patch), every Pod reviewed on /mutate is answered with that patch:
what the API server's own work on dragate's rewrite costs, without dragate's reviews.
"""

from __future__ import annotations

import argparse
import base64
import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from webhook.admission.config import ServeConfig, TlsFiles
from webhook.admission.server import DragateServer

StartResponse = Callable[[str, list[tuple[str, str]]], Any]


def noop_app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
    """Parse the review, answer allowed with its uid; /healthz and /readyz answer ok."""
    return _answer(environ, start_response, None)


def patching_app(patch: list[dict[str, Any]]) -> Callable[..., Iterable[bytes]]:
    """The no-op, but a Pod reviewed on /mutate is answered with `patch`."""
    encoded = base64.b64encode(json.dumps(patch).encode()).decode()

    def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        return _answer(environ, start_response, encoded)

    return app


def _answer(
    environ: dict[str, Any], start_response: StartResponse, patch: str | None
) -> Iterable[bytes]:
    if environ.get("PATH_INFO") in ("/healthz", "/readyz"):
        return _json(start_response, {"status": "ok"})
    length = int(environ.get("CONTENT_LENGTH") or 0)
    request = json.loads(environ["wsgi.input"].read(length))["request"]
    response: dict[str, Any] = {"uid": request["uid"], "allowed": True}
    pod = request.get("kind", {}).get("kind") == "Pod"
    if patch is not None and pod and environ.get("PATH_INFO") == "/mutate":
        response.update(patchType="JSONPatch", patch=patch)
    reply = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}
    return _json(start_response, reply)


def _json(start_response: StartResponse, body: dict[str, Any]) -> list[bytes]:
    data = json.dumps(body).encode()
    start_response(
        "200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(data)))]
    )
    return [data]


class NoopServer(DragateServer):
    """DragateServer's settings, the no-op app (or the patching one)."""

    def __init__(self, config: ServeConfig, patch: list[dict[str, Any]] | None = None) -> None:
        self.patch = patch
        super().__init__(config)

    def load(self) -> Any:
        return noop_app if self.patch is None else patching_app(self.patch)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--cert-dir", type=Path, required=True)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--patch", type=Path, help="a JSON patch for every Pod on /mutate")
    args = parser.parse_args()
    tls = TlsFiles(args.cert_dir / "tls.crt", args.cert_dir / "tls.key")
    config = ServeConfig(
        policy_dir=Path("."),
        tls=tls,
        host=args.host,
        port=args.port,
        workers=args.workers,
        threads=args.threads,
        log_level="info",
    )
    patch = json.loads(args.patch.read_text()) if args.patch else None
    NoopServer(config, patch).run()


if __name__ == "__main__":
    main()
