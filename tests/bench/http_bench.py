"""`dragate serve` against the no-op baseline: a Flask app on the same gunicorn worker class
(`gevent`, one worker), settings, TLS and certificate.

For each concurrency level (keep-alive connections, closed loop) and each target the load
generator reports requests/s and latency percentiles. Each (target, connections) cell is
measured in several short rounds, interleaved (noop, validate, mutate, then validate, mutate,
noop, ...), so that drift on the machine (other work, the host's scheduling) hits every
target alike: a cell reports the median of its rounds and their spread, and a
ratio to the no-op is the median of the ratios within each round. One long run per cell let
the no-op's own curve dip at a different connection count in each run. The load generator
runs on the same machine and takes CPU from the servers: compare the ratios, not the
absolute throughput. One connection is measured twice: with the load generator sharing the
servers' CPUs like every other level, and `apart` (servers on one CPU, the load generator on
another, as an API server and its webhook are on different machines): sharing, wrk and the
kernel's TLS run between two reviews on the worker's CPU and evict what the review had in
cache, which costs dragate's larger working set more than the no-op's.
"""

from __future__ import annotations

import json
import ssl
import statistics
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


MEDIAN_KEYS = ("rps", "min_us", "p50_us", "p90_us", "p99_us", "max_us", "mean_us")


def run(
    tmp: Path, levels: tuple[int, ...], seconds: float, client: str, rounds: int = 3
) -> dict[str, Any]:
    """`rounds` interleaved runs of `seconds` for every (target, connections) cell."""
    policies = workload.write_policies(tmp / "policies")
    state = workload.write_state(tmp / "state.json")
    bodies = workload.review_bodies()
    with servers.serving(tmp, policies, state) as served:
        found = verdicts(served, bodies)
        for server, path in TARGETS.values():  # warm the workers' caches
            loadgen.load(served[server].url + path, bodies[path], 8, min(seconds, 1.0), client)
        curves: dict[str, list[dict[str, Any]]] = {t: [] for t in TARGETS}
        for connections in levels:
            runs = _rounds(
                served,
                bodies,
                connections=connections,
                seconds=seconds,
                client=client,
                rounds=rounds,
            )
            for target, own in runs.items():
                curves[target].append(cell(connections, own))
        apart = _apart(served, bodies, seconds=seconds, client=client, rounds=rounds)
        memory = {name: s.memory() for name, s in served.items()}
    return {
        "verdicts": found,
        "curves": curves,
        "apart": apart,
        "memory": memory,
        "body_bytes": {path: len(body) for path, body in bodies.items()},
        "seconds_per_point": seconds,
        "rounds": rounds,
    }


def _apart(
    served: dict[str, servers.Served],
    bodies: dict[str, bytes],
    *,
    seconds: float,
    client: str,
    rounds: int,
) -> dict[str, dict[str, Any]]:
    """One connection, the load generator on a CPU of its own: each target's cell ({} on a
    machine with one CPU)."""
    with servers.cpus_apart(list(served.values())) as apart:
        if not apart:
            return {}
        runs = _rounds(served, bodies, connections=1, seconds=seconds, client=client, rounds=rounds)
    return {target: cell(1, own) for target, own in runs.items()}


def _rounds(
    served: dict[str, servers.Served],
    bodies: dict[str, bytes],
    *,
    connections: int,
    seconds: float,
    client: str,
    rounds: int,
) -> dict[str, list[dict[str, Any]]]:
    """Every target once per round, the order rotated each round (no target always first)."""
    names = list(TARGETS)
    runs: dict[str, list[dict[str, Any]]] = {t: [] for t in names}
    for index in range(rounds):
        for target in names[index % len(names) :] + names[: index % len(names)]:
            server, path = TARGETS[target]
            url = served[server].url + path
            runs[target].append(loadgen.load(url, bodies[path], connections, seconds, client))
    return runs


def cell(connections: int, runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One (target, connections) cell: the median of each figure over its rounds, the rps
    spread, and every round's rps (so a ratio can be taken within a round)."""
    rps = [r["rps"] for r in runs]
    row: dict[str, Any] = {"connections": connections}
    for key in MEDIAN_KEYS:
        values = [r[key] for r in runs if r.get(key) is not None]
        row[key] = round(statistics.median(values), 1) if values else None
    row.update(
        rps_min=min(rps),
        rps_max=max(rps),
        rps_spread=round((max(rps) - min(rps)) / row["rps"], 3) if row["rps"] else None,
        rounds_rps=rps,
        rounds_p50_us=[r.get("p50_us") for r in runs],
        requests=sum(r["requests"] for r in runs),
        errors=sum(r.get("errors", 0) for r in runs),
        non_2xx=sum(r.get("non_2xx", 0) for r in runs),
        client=runs[0].get("client"),
    )
    return row


def _at(curve: list[dict[str, Any]], connections: int) -> dict[str, Any] | None:
    return next((row for row in curve if row["connections"] == connections), None)


def _paired(own: dict[str, Any], base: dict[str, Any], key: str) -> list[tuple[float, float]]:
    """(own, no-op) figures of the same round; a cell of one run pairs its single figures."""
    mine, theirs = own.get(f"rounds_{key}") or [own[key]], base.get(f"rounds_{key}") or [base[key]]
    return [(a, b) for a, b in zip(mine, theirs, strict=False) if a is not None and b is not None]


def round_ratios(own: dict[str, Any], base: dict[str, Any]) -> list[float]:
    """rps over the no-op's, round by round (the same moment on the machine)."""
    return [round(a / b, 3) for a, b in _paired(own, base, "rps") if b]


def ratios(result: dict[str, Any]) -> dict[str, Any]:
    """Throughput at 8 connections (median of the per-round ratios, and their range) and p50
    at 1 connection, each endpoint against no-op."""
    curves = result["curves"]
    out: dict[str, Any] = {}
    for endpoint in ("validate", "mutate"):
        base8, own8 = _at(curves["noop"], 8), _at(curves[endpoint], 8)
        base1, own1 = _at(curves["noop"], 1), _at(curves[endpoint], 1)
        if base8 and own8:  # None when the no-op completed nothing (a starved CI machine)
            each = round_ratios(own8, base8)
            out[f"{endpoint}_rps_ratio_at_8"] = round(statistics.median(each), 3) if each else None
            out[f"{endpoint}_rps_ratio_range_at_8"] = [min(each), max(each)] if each else None
        out.update(_at_one(endpoint, own1, base1, ""))
        apart = result.get("apart") or {}
        out.update(_at_one(endpoint, apart.get(endpoint), apart.get("noop"), "_apart"))
    return out


def _at_one(
    endpoint: str, own: dict[str, Any] | None, base: dict[str, Any] | None, suffix: str
) -> dict[str, Any]:
    """p50 over the no-op's (median of the per-round differences) and p99, at 1 connection."""
    if not base or not own or None in (base["p50_us"], own["p50_us"]):  # "no samples"
        return {}
    deltas = [a - b for a, b in _paired(own, base, "p50_us")]
    return {
        f"{endpoint}_p50_delta_ms_at_1{suffix}": round(statistics.median(deltas) / 1000, 3),
        f"{endpoint}_p99_ms_at_1{suffix}": round(own["p99_us"] / 1000, 3),
    }
