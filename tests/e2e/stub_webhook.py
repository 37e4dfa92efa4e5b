"""A stand-in admission webhook for e2e plumbing tests: allows everything, adds a warning.

    python stub_webhook.py --port 8443 --cert-file tls.crt --key-file tls.key \
        [--warning TEXT] [--record requests.jsonl]

POST on any path answers an admission.k8s.io/v1 AdmissionReview with `allowed: true` and the
warning "<TEXT>: <operation> <kind> <namespace>/<name>"; GET /healthz answers "ok".
With --record, one JSON line per review is appended to the file.
Standard library only, so it runs with any Python 3.11.
"""

from __future__ import annotations

import argparse
import json
import ssl
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit


def review_response(review: dict[str, Any], warning_prefix: str) -> dict[str, Any]:
    request = review["request"]
    obj = request.get("object") or request.get("oldObject") or {}
    name = obj.get("metadata", {}).get("name") or obj.get("metadata", {}).get("generateName", "")
    target = f"{request.get('namespace') or ''}/{name}"
    warning = f"{warning_prefix}: {request['operation']} {request['kind']['kind']} {target}"
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": request["uid"], "allowed": True, "warnings": [warning]},
    }


def summary(path: str, review: dict[str, Any]) -> dict[str, Any]:
    request = review["request"]
    return {
        "path": urlsplit(path).path,  # the apiserver appends ?timeout=<timeoutSeconds>s
        "operation": request["operation"],
        "kind": request["kind"],
        "requestKind": request.get("requestKind"),
        "namespace": request.get("namespace"),
        "name": request.get("name"),
        "dryRun": request.get("dryRun", False),
    }


class Handler(BaseHTTPRequestHandler):
    warning_prefix = "dragate-stub"
    record: Path | None = None

    def do_GET(self) -> None:
        if urlsplit(self.path).path in ("/healthz", "/readyz"):
            self._send(200, b"ok", "text/plain")
        else:
            self._send(404, b"not found", "text/plain")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        try:
            review = json.loads(self.rfile.read(length))
            response = review_response(review, self.warning_prefix)
        except (ValueError, KeyError, TypeError) as error:
            self._send(400, f"bad AdmissionReview: {error}".encode(), "text/plain")
            return
        if self.record:
            with self.record.open("a") as out:
                out.write(json.dumps(summary(self.path, review)) + "\n")
        self._send(200, json.dumps(response).encode(), "application/json")

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        sys.stdout.write(f"{self.address_string()} {format % args}\n")
        sys.stdout.flush()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--cert-file", required=True)
    parser.add_argument("--key-file", required=True)
    parser.add_argument("--warning", default="dragate-stub")
    parser.add_argument("--record", type=Path)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    Handler.warning_prefix = args.warning
    Handler.record = args.record
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(args.cert_file, args.key_file)
    server = ThreadingHTTPServer((args.host, args.port), Handler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    print(f"stub webhook serving on https://{args.host}:{args.port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
