"""`dragate serve` against the no-op baseline: same gunicorn settings, TLS and certificate.

For each concurrency level (keep-alive connections, closed loop) and each target the load
generator reports requests/s and latency percentiles; targets are interleaved per level so
that drift on the machine hits all of them alike. The load generator runs on the same
machine and takes CPU from the servers: compare the ratios, not the absolute throughput.
"""

from __future__ import annotations

import json
import ssl
import urllib.request
from pathlib import Path
from typing import Any

import loadgen
import servers
import workload

TARGETS = {
    "noop": ("noop", "/validate"),
    "validate": ("dragate", "/validate"),
    "mutate": ("dragate", "/mutate"),
}


def _post(url: str, body: bytes) -> dict[str, Any]:
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    request = urllib.request.Request(url, body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10, context=context) as reply:
        answer: dict[str, dict[str, Any]] = json.loads(reply.read())
    return answer["response"]


def verdicts(served: dict[str, servers.Served], bodies: dict[str, bytes]) -> dict[str, Any]:
    """What each target answers: every review must be allowed (and /mutate must patch)."""
    found = {}
    for target, (server, path) in TARGETS.items():
        response = _post(served[server].url + path, bodies[path])
        assert response["allowed"], response
        found[target] = {
            "allowed": response["allowed"],
            "patched": "patch" in response,
            "warnings": len(response.get("warnings") or []),
        }
    assert found["mutate"]["patched"], "the legacy Pod was not rewritten"
    return found


def run(tmp: Path, levels: tuple[int, ...], seconds: float, client: str) -> dict[str, Any]:
    policies = workload.write_policies(tmp / "policies")
    state = workload.write_state(tmp / "state.json")
    bodies = workload.review_bodies()
    with servers.serving(tmp, policies, state) as served:
        found = verdicts(served, bodies)
        for server, path in TARGETS.values():  # warm caches and both workers
            loadgen.load(served[server].url + path, bodies[path], 8, min(seconds, 1.0), client)
        curves: dict[str, list[dict[str, Any]]] = {t: [] for t in TARGETS}
        for connections in levels:
            for target, (server, path) in TARGETS.items():
                row = loadgen.load(
                    served[server].url + path, bodies[path], connections, seconds, client
                )
                curves[target].append({"connections": connections, **row})
        memory = {name: s.worker_memory() for name, s in served.items()}
    return {
        "verdicts": found,
        "curves": curves,
        "worker_memory": memory,
        "body_bytes": {path: len(body) for path, body in bodies.items()},
        "seconds_per_point": seconds,
    }


def _at(curve: list[dict[str, Any]], connections: int) -> dict[str, Any] | None:
    return next((row for row in curve if row["connections"] == connections), None)


def ratios(result: dict[str, Any]) -> dict[str, Any]:
    """Throughput at 8 connections and p50 at 1 connection, each endpoint against no-op."""
    curves, out = result["curves"], {}
    for endpoint in ("validate", "mutate"):
        base8, own8 = _at(curves["noop"], 8), _at(curves[endpoint], 8)
        base1, own1 = _at(curves["noop"], 1), _at(curves[endpoint], 1)
        if base8 and own8:  # None when the no-op completed nothing (a starved CI machine)
            ratio = own8["rps"] / base8["rps"] if base8["rps"] else None
            out[f"{endpoint}_rps_ratio_at_8"] = None if ratio is None else round(ratio, 3)
        if base1 and own1 and None not in (base1["p50_us"], own1["p50_us"]):  # "no samples"
            delta_us = own1["p50_us"] - base1["p50_us"]
            out[f"{endpoint}_p50_delta_ms_at_1"] = round(delta_us / 1000, 3)
            out[f"{endpoint}_p99_ms_at_1"] = round(own1["p99_us"] / 1000, 3)
    return out
