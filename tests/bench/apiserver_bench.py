"""What a user feels: create latency and creates/s through a real kube-apiserver, with and
without dragate, next to a ValidatingAdmissionPolicy doing the same checks in CEL.

One control plane (etcd + kube-apiserver of the e2e toolchain, tests/e2e/toolchain/build.sh)
holding an audit load of Tenants and ResourceClaims (apiserver_load.py), dragate in cluster
mode in its two roles as the chart runs them (apiserver_roles.py: `dragate serve --role
webhook` answering reviews with its watch caches and the TenantUsage ledger, `--role
controller` beside it auditing the cluster during the rounds, both under the chart's service
account, whose own requests the chart's webhooks skip), and the same objects for every
variant:

  none           no admission webhook or policy (the baseline)
  vap            a ValidatingAdmissionPolicy: class allow-list and per-claim count cap in CEL
                 (what the API server can do without a webhook; it cannot count quota
                 across objects)
  noop-validate  the no-op AdmissionReview server (tests/bench/noop_server.py: a Flask app on
                 the same gunicorn worker class, settings and TLS) behind the chart's
                 validating webhooks: what any webhook round trip costs through the API server
  validate       dragate's validating webhooks
  noop-mutate    the no-op behind the chart's validating and mutating webhooks
  noop-patch     the same, but the no-op answers each Pod on /mutate with the very patch
                 dragate's rewrite makes of it: what the API server's work on a rewritten
                 Pod costs (the patch applied, a Pod with claims stored), without dragate
  mutate         dragate's validating and mutating webhooks
  mutate-map     dragate's validating and mutating webhooks behind its rewriting
                 MutatingAdmissionPolicy (`dragate rewrite-policy`; beta in v1.34, GA in
                 v1.36): the API server rewrites the legacy Pod itself, the mutating webhook
                 is skipped, one webhook round trip instead of two

Every webhook variant registers the chart's own configurations (`helm template` of
charts/dragate in url mode, tests/e2e/chart_webhooks.py: its rules, matchConditions, failure
policies and timeouts), renamed after the variant and each webhook also scoped to the
variant's namespaces by the label `dragate-bench/variant`, so the bench calls dragate
exactly when a chart install would (the mutating webhook only for Pods that still ask for
legacy GPUs, never for claims). Every variant's admission is registered at once: switching
variants is only creating in another namespace, so the sequential creates run in cycles of
a BLOCK of every variant in turn, and a slow moment of the shared machine lands on every
variant alike instead of on one variant's whole share. The targets are judged on the
difference of the p50 and p99 to the no-op's, with an interval from a bootstrap over the
cycles (paired.py).

Kinds: a ResourceClaim (one GPU) and a legacy Pod (`nvidia.com/gpu: 1`, rewritten to a claim
template by the mutating webhook). For each variant and kind: sequential creates on one
keep-alive connection (latency as `kubectl apply` feels it) and CONNECTIONS concurrent
connections (creates/s as a controller creating Pods feels it), each in namespaces and a
tenant of its own so no variant inherits another's ledger. Figures are client-side, over TLS,
with the load generator on the same machine: compare each variant with `none` of the same run.

    python tests/bench/apiserver_bench.py [--sequential N] [--concurrent N]
                                          [--audit-load TENANTS,CLAIMS]
    python tests/bench/run.py --only apiserver
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parents[1]
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))  # the e2e package (pyproject: pythonpath = ["tests"])

import paired  # noqa: E402
from apiserver_load import AuditLoad, parse_audit_load, populate  # noqa: E402
from apiserver_objects import KINDS, VARIANTS, make, namespace, namespaces, path  # noqa: E402
from apiserver_roles import AUDIT_INTERVAL_S, RoleWatch, align, read_chart_limits  # noqa: E402
from apiserver_setup import connect, prepare, register  # noqa: E402
from processcpu import CpuMeter, per_create_ms, with_children  # noqa: E402
from timing import percentile, pod_pss_mib, summarize  # noqa: E402

NOOP_OF = {"validate": "noop-validate", "mutate": "noop-mutate"}
PATCHED_OF = {"mutate": "noop-patch"}
CLAIM_TWINS = (("validate", "mutate"), ("noop-validate", "noop-mutate"))
"""Variants whose claims meet the very same webhooks (the mutating ones match only legacy
Pods): the same create measured twice in every cycle."""
JUDGED = (
    ("claim", CLAIM_TWINS[0], CLAIM_TWINS[1], "the no-op webhook"),
    ("pod", ("mutate",), ("noop-patch",), "the no-op webhooks answering with its patch"),
)
"""(kind, dragate's variants, the baseline's, what the baseline is) of the targets: a claim
over the no-op with the twins pooled on both sides; a legacy Pod (validating + mutating) over
the no-op pair answering with dragate's very patch, so the API server's own work on the
rewritten Pod is the same on both sides."""
CONNECTIONS = 8
ROUNDS = 12
BLOCK = 8
"""Sequential creates of one variant and kind in a row. A cycle runs a block of every
variant and kind in turn, a fraction of a second in all, so a disturbance of the shared
machine (the API server's garbage collection, the controller's audit writes) lands on the
variants of one cycle alike, and what a create leaves running in the background lands
mostly on its own variant's next creates."""
SETTLE_SECONDS = 0.3
NO_LOAD = AuditLoad(0, 0)
FULL_LOAD = "10000,100000"
STEADY_SECONDS = 3600.0
"""How long the controller may take to its second audit pass: the first writes a
PolicyReport per namespace at the controller's 20 writes a second."""


# ------------------------------------------------------------------------- measuring


@dataclass
class Measured:
    """One variant and kind's creates, gathered over the rounds."""

    sequential: list[float] = field(default_factory=list)
    sequential_cycles: list[int] = field(default_factory=list)
    """The cycle (see `measure`) of each sequential sample, for the paired bootstrap."""
    sequential_failed: int = 0
    concurrent: list[float] = field(default_factory=list)
    concurrent_failed: int = 0
    concurrent_wall: float = 0.0
    sequential_cpu: dict[str, int] = field(default_factory=dict)
    """Nanoseconds each process group ran during the sequential blocks."""
    sequential_creates: int = 0

    def add_cpu(self, spent: dict[str, int], creates: int) -> None:
        for name, ns in spent.items():
            self.sequential_cpu[name] = self.sequential_cpu.get(name, 0) + ns
        self.sequential_creates += creates

    def row(self, name: str, kind: str) -> dict[str, Any]:
        return {
            "variant": name,
            "kind": kind,
            "sequential": {**summarize(self.sequential), "failed": self.sequential_failed},
            "cpu_ms_per_create": per_create_ms(self.sequential_cpu, self.sequential_creates),
            "concurrent": {
                **summarize(self.concurrent),
                "failed": self.concurrent_failed,
                "connections": CONNECTIONS,
                "creates_per_s": round(len(self.concurrent) / self.concurrent_wall, 1),
            },
        }


def sequential(
    client: Any, kind: str, ns: str, names: range, *, into: Measured | None, cycle: int = 0
) -> None:
    """Creates one after another on one connection (latency as one user feels it), named
    after `names`, each recorded in `into` with its cycle (None: untimed warm-ups)."""
    failed, first_failure = 0, ""
    for i in names:
        started = time.perf_counter_ns()
        status, body = client.create(path(kind, ns), make(kind, f"s{i}"))
        elapsed = (time.perf_counter_ns() - started) / 1000
        if status != 201:
            failed += 1
            first_failure = first_failure or f"{status}: {str(body)[:300]}"
        if into is not None:
            into.sequential.append(elapsed)
            into.sequential_cycles.append(cycle)
    if failed == len(names):  # a variant that admits nothing measures nothing
        raise RuntimeError(f"every create of {kind} in {ns} failed, the first: {first_failure}")
    if into is not None:
        into.sequential_failed += failed


def concurrent(
    clients: list[Any], kind: str, ns: str, count: int, *, into: Measured, prefix: str
) -> None:
    """`count` creates over the clients' connections in a closed loop: creates/s."""
    per_connection = max(1, count // len(clients))
    lock = threading.Lock()

    def work(worker: int) -> None:
        client, own, failed = clients[worker], [], 0
        for i in range(per_connection):
            started = time.perf_counter_ns()
            status, _ = client.create(path(kind, ns), make(kind, f"{prefix}c{worker}-{i}"))
            own.append((time.perf_counter_ns() - started) / 1000)
            failed += status != 201
        with lock:
            into.concurrent.extend(own)
            into.concurrent_failed += failed

    threads = [threading.Thread(target=work, args=(w,)) for w in range(len(clients))]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    into.concurrent_wall += time.perf_counter() - started


def rotated(turn: int) -> tuple[str, ...]:
    """The variants in a different order each round or cycle, so that no variant always runs
    right after the same other one (and takes on the background work it left)."""
    shift = turn % len(VARIANTS)
    return VARIANTS[shift:] + VARIANTS[:shift]


def meter(cluster: Any, servers: dict[str, Any]) -> CpuMeter:
    """The processes a create can wake: the control plane, the webhook servers (master and
    worker) and this process, the load generator."""
    control = {p.name: p.pid for p in cluster.processes}

    def served(*names: str) -> Callable[[], list[int]]:
        return lambda: [pid for n in names for pid in with_children(servers[n].process.pid)]

    return CpuMeter(
        {
            "kube-apiserver": lambda: [control["kube-apiserver"]],
            "etcd": lambda: [control["etcd"]],
            "dragate": served("dragate"),
            "no-op": served("noop", "noop-patch"),
            "load generator": lambda: [os.getpid()],
        }
    )


def measure(
    cluster: Any, sequential_count: int, concurrent_count: int, rounds: int, cpu: CpuMeter
) -> dict[tuple[str, str], Measured]:
    """Every variant and kind, with the admission of every variant registered at once. Each
    round: one untimed create of each (the API server's connections to the webhooks
    warm), the sequential cycles (`cycles`), a pause for the background work they left, then
    a block of concurrent creates of each variant and kind."""
    measured = {(v, k): Measured() for v in VARIANTS for k in KINDS}
    one, many = connect(cluster), [connect(cluster) for _ in range(CONNECTIONS)]
    per_round = max(1, sequential_count // rounds // BLOCK)
    try:
        for client in (one, *many):  # every connection's TLS handshake before timing
            client.create(
                path("claim", namespace("none", "claim", "seq")), make("claim", f"w{id(client)}")
            )
        for turn in range(rounds):
            first = turn * per_round
            warm(one, turn)
            cycles(one, range(first, first + per_round), measured, cpu)
            time.sleep(SETTLE_SECONDS)
            for name, kind in ((v, k) for v in rotated(turn) for k in KINDS):
                ns, count = namespace(name, kind, "conc"), concurrent_count // rounds
                concurrent(many, kind, ns, count, into=measured[(name, kind)], prefix=f"r{turn}-")
            time.sleep(SETTLE_SECONDS)
            print(f"apiserver: round {turn + 1} of {rounds} done", file=sys.stderr, flush=True)
    finally:
        for client in (one, *many):
            client.close()
    return measured


def warm(client: Any, turn: int) -> None:
    """One untimed create of every variant and kind (named `s-<turn + 1>`): the API server's
    connection to each webhook is open again before the cycles are timed."""
    for name, kind in ((v, k) for v in VARIANTS for k in KINDS):
        sequential(client, kind, namespace(name, kind, "seq"), range(-turn - 1, -turn), into=None)


def cycles(
    client: Any, numbers: range, measured: dict[tuple[str, str], Measured], cpu: CpuMeter
) -> None:
    """Sequential cycles on one connection: in each, a BLOCK of creates of every variant and
    kind in turn, in an order rotated cycle by cycle. The CPU of each block is read from
    /proc (`cpu`)."""
    for cycle in numbers:
        for name, kind in ((v, k) for v in rotated(cycle) for k in KINDS):
            into = measured[(name, kind)]
            names = range(cycle * BLOCK, (cycle + 1) * BLOCK)
            cpu.start()
            sequential(client, kind, namespace(name, kind, "seq"), names, into=into, cycle=cycle)
            into.add_cpu(cpu.stop(), BLOCK)


def run(
    bin_dir: Path,
    sequential_count: int,
    concurrent_count: int,
    rounds: int = ROUNDS,
    load: AuditLoad = NO_LOAD,
) -> dict[str, Any]:
    """The whole comparison on a fresh control plane holding the audit load: every variant
    and kind measured while dragate's controller audits the cluster beside its webhook."""
    from e2e.cluster import running_cluster

    with running_cluster(bin_dir, controller_manager=False, mutating_policies=True) as cluster:
        populated = populate(lambda: connect(cluster), load)
        servers = prepare(cluster, cluster.workdir, load)
        watch = RoleWatch(servers["dragate"].process.pid, servers["controller"])
        try:
            watch.start()  # from the roles' start on: registration and the first passes too
            register(cluster, servers)
            counts = (sequential_count, concurrent_count, rounds)
            measured, roles = _measured_with_roles(cluster, servers, watch, counts)
            reviews = review_times(servers["dragate"].process.log_path)
            memory = {
                name: pod_memory(servers[name].process.pid) for name in ("noop", "noop-patch")
            }
        finally:
            watch.stop()
            for served in servers.values():
                served.stop()
    rows = [m.row(name, kind) for (name, kind), m in measured.items()]
    return {
        "rows": rows,
        "added": added(rows),
        "claim_twins": claim_twins(measured),
        "judged": judged(measured),
        "reviews": reviews,
        "memory": memory,
        "audit_load": populated,
        **roles,
        "connections": CONNECTIONS,
        "rounds": rounds,
        "sequential_count": sequential_count,
        "concurrent_count": concurrent_count,
    }


def _measured_with_roles(
    cluster: Any,
    servers: dict[str, Any],
    watch: RoleWatch,
    counts: tuple[int, int, int],
) -> tuple[dict[tuple[str, str], Measured], dict[str, Any]]:
    """The rounds, begun in the controller's steady state (its first pass's PolicyReports
    written) just before its next audit pass is due, so the pass runs while reviews are
    measured; each role's memory and the passes that overlapped the rounds. `counts`:
    sequential creates, concurrent creates, rounds."""
    watch.wait_passes(2, timeout=STEADY_SECONDS)
    aligned = align(watch.seen())
    cpu_before, started = watch.cpu_ns(), time.time()
    cpu_meter = meter(cluster, servers)
    measured = measure(cluster, *counts, cpu_meter)
    ended, cpu = time.time(), watch.cpu_ns() - cpu_before
    in_flight = AUDIT_INTERVAL_S + 2 * max(watch.seen().values())  # a pass begun in the rounds
    overlapped = watch.wait_overlap(started, ended, timeout=in_flight)
    watch.stop()  # the last sample: memory at the end of the rounds
    roles = {
        "roles": watch.memory(read_chart_limits()),
        "audit": {
            "passes_during": overlapped,
            "window_s": round(ended - started, 1),
            "aligned_wait_s": round(aligned, 1),
            "controller_cpu_s": round(cpu / 1e9, 2),
        },
    }
    return measured, roles


def pod_memory(master: int) -> dict[str, float]:
    """A server's memory after the run as a pod's: the PSS of its master and its one worker
    ({} when the worker is gone)."""
    pids = with_children(master)
    return pod_pss_mib(*pids) if len(pids) == 2 else {}


def review_times(log: Path) -> list[dict[str, Any]]:
    """dragate's own time per review (its log's `duration_ms`), by variant, kind, level
    (seq: one connection, conc: CONNECTIONS) and endpoint: what of the added latency is the
    review itself, and what is the webhook call around it."""
    found: dict[tuple[str, str, str, str], list[float]] = {}
    for line in log.read_text(errors="replace").splitlines():
        if not line.startswith("{"):
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        ns = str(entry.get("namespace", ""))
        measured = namespaces().get(ns)
        if entry.get("msg") != "review" or measured is None:
            continue
        key = (*measured, ns.rsplit("-", 1)[1], str(entry.get("endpoint")))
        found.setdefault(key, []).append(float(entry["duration_ms"]) * 1000)
    return [
        {"variant": v, "kind": k, "level": level, "endpoint": e, **summarize(samples)}
        for (v, k, level, e), samples in sorted(found.items())
    ]


def added(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per kind and variant: p50/p99 added over `none` at one connection, creates/s ratio;
    for dragate's variants also the p50 and p99 over the no-op webhook behind the same
    configurations (`over_noop_p50_ms`: dragate's own share; the rest is the round trip)
    and, for `mutate`, over the no-op that answers with dragate's patch (`over_patch_*`)."""
    by = {(r["variant"], r["kind"]): r for r in rows}
    out = []
    for row in rows:
        none = by.get(("none", row["kind"]))
        if none is None or row["variant"] == "none":
            continue
        seq, conc = row["sequential"], row["concurrent"]
        entry = {
            "kind": row["kind"],
            "variant": row["variant"],
            "added_p50_ms": _ms_between(seq, none["sequential"], "p50_us"),
            "added_p99_ms": _ms_between(seq, none["sequential"], "p99_us"),
            "creates_per_s_ratio": round(
                conc["creates_per_s"] / none["concurrent"]["creates_per_s"], 3
            ),
        }
        entry.update(_cpu_added(row.get("cpu_ms_per_create"), none.get("cpu_ms_per_create")))
        noop = by.get((NOOP_OF.get(row["variant"], ""), row["kind"]))
        for name, base in (
            ("noop", noop),
            ("patch", by.get((PATCHED_OF.get(row["variant"], ""), row["kind"]))),
        ):
            if base is not None:
                for p in ("p50", "p99"):
                    entry[f"over_{name}_{p}_ms"] = _ms_between(seq, base["sequential"], f"{p}_us")
        out.append(entry)
    return out


def claim_twins(measured: dict[tuple[str, str], Measured]) -> dict[str, Any]:
    """A claim's one-connection p99 in each of two twin variants (CLAIM_TWINS) and in both
    pooled: the twins' difference is how finely one variant's p99 resolves on this machine."""
    found: dict[str, Any] = {}
    for first, second in CLAIM_TWINS:
        if (first, "claim") not in measured or (second, "claim") not in measured:
            return {}
        one, two = measured[(first, "claim")].sequential, measured[(second, "claim")].sequential
        found[first] = {
            "twin": second,
            "p99_ms": _p99_ms(one),
            "twin_p99_ms": _p99_ms(two),
            "pooled_p99_ms": _p99_ms(one + two),
            "samples": len(one) + len(two),
        }
    return {"pairs": found}


def judged(measured: dict[tuple[str, str], Measured]) -> list[dict[str, Any]]:
    """What dragate adds to the p50 and p99 at one connection over its no-op (JUDGED), each
    with its bootstrap interval over the cycles (paired.py)."""
    found = []
    for kind, variants, baselines, what in JUDGED:
        if not all((v, kind) in measured for v in (*variants, *baselines)):
            continue
        mine, base = (_cycles(measured, names, kind) for names in (variants, baselines))
        for quantile, fraction in (("p50", 0.50), ("p99", 0.99)):
            gap = paired.difference(mine, base, fraction)
            if gap is not None:
                found.append(
                    {"kind": kind, "quantile": quantile, "variants": list(variants),
                     "baselines": list(baselines), "what": what, **gap.as_dict()}
                )  # fmt: skip
    return found


def _cycles(
    measured: dict[tuple[str, str], Measured], variants: tuple[str, ...], kind: str
) -> paired.Cycles:
    return paired.merged(
        *(
            paired.by_cycle(measured[(v, kind)].sequential, measured[(v, kind)].sequential_cycles)
            for v in variants
        )
    )


def _p99_ms(samples_us: list[float]) -> float:
    return round(percentile(sorted(samples_us), 0.99) / 1000, 2)


def _cpu_added(mine: dict[str, float] | None, base: dict[str, float] | None) -> dict[str, float]:
    """The API server's CPU per create over no admission's, and every process's together."""
    if not mine or not base:
        return {}
    return {
        "apiserver_cpu_added_ms": round(mine["kube-apiserver"] - base["kube-apiserver"], 2),
        "cpu_added_ms": round(mine["total"] - base["total"], 2),
    }


def _ms_between(mine: dict[str, Any], base: dict[str, Any], key: str) -> float:
    return round((float(mine[key]) - float(base[key])) / 1000, 2)


def curve(sequential_count: int, concurrent_count: int, load: AuditLoad) -> dict[str, Any]:
    """For run.py: the whole comparison on a fresh control plane (the toolchain must be built)."""
    from kube_ledger_bench import toolchain

    bin_dir = toolchain()
    if bin_dir is None:
        raise RuntimeError("the e2e toolchain is not built: tests/e2e/toolchain/build.sh")
    return run(bin_dir, sequential_count, concurrent_count, load=load)


def main() -> None:
    from kube_ledger_bench import toolchain

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sequential", type=int, default=3840)
    parser.add_argument("--concurrent", type=int, default=960)
    parser.add_argument(
        "--audit-load", type=parse_audit_load, default=parse_audit_load(FULL_LOAD),
        metavar="TENANTS,CLAIMS", help="in the cluster before measuring (none: no load)",
    )  # fmt: skip
    args = parser.parse_args()
    bin_dir = toolchain()
    if bin_dir is None:
        raise SystemExit("the e2e toolchain is not built: tests/e2e/toolchain/build.sh")
    print(
        json.dumps(run(bin_dir, args.sequential, args.concurrent, load=args.audit_load), indent=2)
    )


if __name__ == "__main__":
    main()
