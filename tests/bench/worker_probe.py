"""Inside the served worker: garbage collections and pauses per review, and the time the
review takes in the worker, against the latency the client sees (the tail's suspects).

`dragate serve`'s own app (make_app, with the benchmark's policies and state), served by
DragateServer (the gevent worker, one per server), with `gc.callbacks` timing every
collection and a WSGI wrapper timing every request; wrk (or the Python client) loads
/validate or /mutate. `--gc stock` undoes the worker's collector settings after make_app
(`gc.unfreeze`, thresholds 700/10/10), so the settings can be compared A/B:

    python tests/bench/worker_probe.py [--path /validate] [--connections 1] [--seconds 10]
                                       [--rounds 3] [--gc stock|served]
"""

from __future__ import annotations

import argparse
import atexit
import gc
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import loadgen
import servers
import workload
from timing import summarize

from webhook.admission.routes import Sent

STOCK_THRESHOLDS = (700, 10, 10)


class _Probe:
    """Collections (count and pause per generation) and request times in the worker."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.pauses: dict[int, list[float]] = {0: [], 1: [], 2: []}
        self.requests: list[float] = []
        self._started = 0.0

    def on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.pauses[info["generation"]].append((time.perf_counter() - self._started) * 1e6)

    def wrap(self, app: Callable[..., Iterable[bytes]]) -> Callable[..., Iterable[bytes]]:
        def timed(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
            started = time.perf_counter()
            sent = app(environ, start_response)
            body = b"".join(sent)
            if environ.get("PATH_INFO") in ("/validate", "/mutate"):
                self.requests.append((time.perf_counter() - started) * 1e6)
            close = getattr(sent, "close", None)  # a review's accounting, after the send
            return [body] if close is None else Sent([body], close)

        return timed

    def dump(self) -> None:
        data = {
            "pid": os.getpid(),
            "requests": len(self.requests),
            "request_us": summarize(self.requests),
            "collections": {str(g): len(p) for g, p in self.pauses.items()},
            "pause_us": {str(g): summarize(p) for g, p in self.pauses.items()},
            "frozen": gc.get_freeze_count(),
            "tracked": len(gc.get_objects()),
            "thresholds": gc.get_threshold(),
        }
        (self.out / f"worker-{os.getpid()}.json").write_text(json.dumps(data))

    def reset(self) -> str:
        self.requests.clear()
        for pauses in self.pauses.values():
            pauses.clear()
        return "ok"


def serve(args: argparse.Namespace) -> None:
    """The probe server: `dragate serve`'s app and settings, probed (runs in a subprocess)."""
    from webhook.admission.app import make_app
    from webhook.admission.server import DragateServer
    from webhook.cli.serve import build_config

    out = Path(args.out)

    class ProbeServer(DragateServer):
        def application(self) -> Any:
            app = make_app(self.config)
            if args.gc == "stock":
                gc.unfreeze()
                gc.set_threshold(*STOCK_THRESHOLDS)
            probe = _Probe(out)
            gc.callbacks.append(probe.on_gc)
            atexit.register(probe.dump)
            app.wsgi_app = probe.wrap(app.wsgi_app)  # type: ignore[method-assign]
            app.add_url_rule("/probe-reset", "probe-reset", probe.reset)
            return app

    config = build_config(
        policy_dir=Path(args.policies), host="127.0.0.1", port=args.port,
        cert_dir=Path(args.cert_dir), state_file=Path(args.state), ledger_file=Path(args.ledger),
        dns_names=(), max_connections=8192, max_body_bytes=3 * 1024 * 1024, client_ca=None,
        client_names=(), on_timeout="deny", own_namespace="", own_service_account="",
        reload_interval=1.0,
        graceful_timeout=5, log_level="warning", kubeconfig=None, in_cluster=False,
        quota_grants=True,
    )  # fmt: skip
    ProbeServer(config).run()


def _start(tmp: Path, gc_mode: str) -> servers.Served:
    port = servers.free_port()
    args = [
        str(Path(__file__).resolve()), "serve", "--port", str(port), "--gc", gc_mode,
        "--out", str(tmp / "out"), "--cert-dir", str(tmp / "certs"),
        "--policies", str(workload.write_policies(tmp / "policies")),
        "--state", str(workload.write_state(tmp / "state.json")),
        "--ledger", str(tmp / "ledger.sqlite3"),
    ]  # fmt: skip
    (tmp / "out").mkdir(parents=True, exist_ok=True)
    return servers._start(f"probe-{gc_mode}", args, tmp, port)


def measure(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Per round: the client's figures; the worker's collections and review times of the
    last round."""
    rows = []
    body = workload.review_bodies()[args.path]
    with tempfile.TemporaryDirectory(prefix="dragate-probe-") as tmp:
        served = _start(Path(tmp), args.gc)
        try:
            url = served.url + args.path
            loadgen.load(url, body, 8, 2.0, args.client)  # warm the worker
            for round_ in range(args.rounds):
                _get(served.url + "/probe-reset")
                client = loadgen.load(url, body, args.connections, args.seconds, args.client)
                rows.append({"round": round_, "client": client})
        finally:
            servers.stop(served)
        workers = [json.loads(p.read_text()) for p in Path(tmp, "out").glob("worker-*.json")]
    rows.append({"worker_last_round": workers})
    return rows


def _get(url: str) -> None:
    import ssl
    import urllib.request

    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    request = urllib.request.Request(url, headers={"Connection": "close"})
    with urllib.request.urlopen(request, timeout=10, context=context) as reply:
        reply.read()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", nargs="?", default="measure", choices=("measure", "serve"))
    parser.add_argument("--gc", choices=("stock", "served"), default="served")
    parser.add_argument("--path", choices=("/validate", "/mutate"), default="/validate")
    parser.add_argument("--connections", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--client", choices=("auto", "wrk", "python"), default="auto")
    for name in ("--port", "--out", "--cert-dir", "--policies", "--state", "--ledger"):
        parser.add_argument(name, type=int if name == "--port" else str)
    args = parser.parse_args()
    if args.mode == "serve":
        serve(args)
        return
    print(json.dumps(measure(args), indent=2))


if __name__ == "__main__":
    main()
