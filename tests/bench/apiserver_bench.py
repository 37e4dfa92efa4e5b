"""What a user feels: create latency and creates/s through a real kube-apiserver, with and
without dragate, next to a ValidatingAdmissionPolicy doing the same checks in CEL.

One control plane (etcd + kube-apiserver of the e2e toolchain, tests/e2e/toolchain/build.sh),
one `dragate serve --kubeconfig` (cluster mode, as the chart runs it: watch caches and the
TenantUsage ledger, under the chart's service account, whose own requests the chart's
webhooks skip), and the same objects for every variant:

  none           no admission webhook or policy (the baseline)
  vap            a ValidatingAdmissionPolicy: class allow-list and per-claim count cap in CEL
                 (what the API server can do without a webhook; it cannot count quota
                 across objects)
  noop-validate  the no-op AdmissionReview server (tests/bench/noop_server.py: same gunicorn
                 class, settings and TLS) behind the chart's validating webhooks: what any
                 webhook round trip costs through the API server
  validate       dragate's validating webhooks
  noop-mutate    the no-op behind the chart's validating and mutating webhooks
  noop-patch     the same, but the no-op answers each Pod on /mutate with the very patch
                 dragate's rewrite makes of it: what the API server's work on a rewritten
                 Pod costs (the patch applied, a Pod with claims stored), without dragate
  mutate         dragate's validating and mutating webhooks

Every webhook variant registers the chart's own configurations (`helm template` of
charts/dragate in url mode, tests/e2e/chart_webhooks.py: its rules, matchConditions, failure
policies and timeouts), each webhook also scoped to the variant's namespaces by the label
`dragate-bench/variant`, so the bench calls dragate exactly when a chart install would (the
mutating webhook only for Pods that still ask for legacy GPUs, never for claims).

Kinds: a ResourceClaim (one GPU) and a legacy Pod (`nvidia.com/gpu: 1`, rewritten to a claim
template by the mutating webhook). For each variant and kind: sequential creates on one
keep-alive connection (latency as `kubectl apply` feels it) and CONNECTIONS concurrent
connections (creates/s as a controller creating Pods feels it), each in fresh namespaces and
a fresh tenant so no variant inherits another's ledger. Figures are client-side, over TLS,
with the load generator on the same machine: compare each variant with `none` of the same run.

    python tests/bench/apiserver_bench.py [--sequential N] [--concurrent N]
    python tests/bench/run.py --only apiserver
"""

from __future__ import annotations

import argparse
import http.client
import json
import shutil
import ssl
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parents[1]
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))  # the e2e package (pyproject: pythonpath = ["tests"])

from timing import summarize  # noqa: E402

VARIANTS = ("none", "vap", "noop-validate", "validate", "noop-mutate", "noop-patch", "mutate")
WEBHOOKS = {  # variant: (server, mutating webhook registered)
    "noop-validate": ("noop", False),
    "validate": ("dragate", False),
    "noop-mutate": ("noop", True),
    "noop-patch": ("noop-patch", True),
    "mutate": ("dragate", True),
}
NOOP_OF = {"validate": "noop-validate", "mutate": "noop-mutate"}
PATCHED_OF = {"mutate": "noop-patch"}
KINDS = ("claim", "pod")
LABEL = "dragate-bench/variant"
RELEASE = "dragate-bench"
PROBED_WEBHOOK = "claims.validate.dragate.io"  # the chart's webhook a claim probe reaches
CONNECTIONS = 8
ROUNDS = 3
CLASS = "gpu.nvidia.com"
MAX_PER_CLAIM = 8
REPO = TESTS.parent
CRD = REPO / "webhook" / "defaults" / "crds" / "tenantusages.yaml"


def namespace(variant: str, kind: str, level: str) -> str:
    return f"bench-{variant}-{kind}-{level}"


def namespaces() -> dict[str, tuple[str, str]]:
    """Every namespace the bench creates: (variant, kind) it measures."""
    return {namespace(v, k, lv): (v, k) for v in VARIANTS for k in KINDS for lv in ("seq", "conc")}


# ------------------------------------------------------------------------- objects


def claim(name: str, count: int = 1) -> dict[str, Any]:
    request = {"name": "gpu", "exactly": {"deviceClassName": CLASS, "count": count}}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {"devices": {"requests": [request]}},
    }


def legacy_pod(name: str, gpus: int = 1) -> dict[str, Any]:
    limits = {"nvidia.com/gpu": str(gpus)}
    container = {"name": "cuda", "image": "cuda:12", "resources": {"limits": limits}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [container]},
    }


def path(kind: str, ns: str) -> str:
    if kind == "claim":
        return f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims"
    return f"/api/v1/namespaces/{ns}/pods"


def make(kind: str, name: str) -> dict[str, Any]:
    return claim(name) if kind == "claim" else legacy_pod(name)


def policies(directory: Path) -> Path:
    """The example policies (CEL guardrails, legacy mapping) plus one tenant per namespace."""
    shutil.copytree(REPO / "policies", directory, ignore=shutil.ignore_patterns("tests"))
    tenants = [
        {
            "apiVersion": "dragate.io/v1alpha1",
            "kind": "Tenant",
            "metadata": {"name": ns},
            "spec": {
                "namespaces": [ns],
                "allowedDeviceClasses": [CLASS],
                "quota": [
                    {
                        "deviceClassName": CLASS,
                        "maxDevices": 100_000,
                        "maxDevicesPerClaim": MAX_PER_CLAIM,
                    }
                ],
            },
        }
        for ns in namespaces()
    ]
    (directory / "bench-tenants.yaml").write_text(
        "\n---\n".join(json.dumps(t) for t in tenants) + "\n"
    )
    return directory


def admission_policy() -> list[dict[str, Any]]:
    """The VAP variant: dragate's allow-list and per-claim cap, as CEL the API server runs."""
    claims = (
        f"object.spec.devices.requests.all(r, has(r.exactly) && "
        f"r.exactly.deviceClassName in ['{CLASS}'] && "
        f"(!has(r.exactly.count) || r.exactly.count <= {MAX_PER_CLAIM}))"
    )
    pods = (
        "object.spec.containers.all(c, !has(c.resources) || !has(c.resources.limits) || "
        "!('nvidia.com/gpu' in c.resources.limits) || "
        "quantity(c.resources.limits['nvidia.com/gpu'])"
        f".compareTo(quantity('{MAX_PER_CLAIM}')) <= 0)"
    )
    objects: list[dict[str, Any]] = []
    for name, group, resource, expression in (
        ("claims", "resource.k8s.io", "resourceclaims", claims),
        ("pods", "", "pods", pods),
    ):
        policy = f"bench-gpu-{name}"
        objects.append(
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingAdmissionPolicy",
                "metadata": {"name": policy},
                "spec": {
                    "failurePolicy": "Fail",
                    "matchConstraints": {
                        "resourceRules": [
                            {
                                "apiGroups": [group],
                                "apiVersions": ["*"],
                                "resources": [resource],
                                "operations": ["CREATE", "UPDATE"],
                            }
                        ]
                    },
                    "validations": [
                        {
                            "expression": expression,
                            "message": "GPU class not allowed or over the cap",
                        }
                    ],
                },
            }
        )
        objects.append(
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingAdmissionPolicyBinding",
                "metadata": {"name": policy},
                "spec": {
                    "policyName": policy,
                    "validationActions": ["Deny"],
                    "matchResources": {
                        "namespaceSelector": {"matchLabels": {"dragate-bench/variant": "vap"}}
                    },
                },
            }
        )
    return objects


# ------------------------------------------------------------------------- the client


class Client:
    """One keep-alive HTTPS connection to the API server as the admin user."""

    def __init__(self, host: str, port: int, context: ssl.SSLContext) -> None:
        self._connection = http.client.HTTPSConnection(host, port, context=context, timeout=30)

    def create(self, url: str, obj: dict[str, Any], dry_run: bool = False) -> tuple[int, Any]:
        body = json.dumps(obj).encode()
        query = "?dryRun=All" if dry_run else ""
        self._connection.request("POST", url + query, body, {"Content-Type": "application/json"})
        reply = self._connection.getresponse()
        return reply.status, json.loads(reply.read() or b"null")

    def close(self) -> None:
        self._connection.close()


def tls_context(cluster: Any) -> ssl.SSLContext:
    pki = cluster.pki
    context = ssl.create_default_context(cafile=str(pki.ca_path))
    context.load_cert_chain(pki.directory / "admin.crt", pki.directory / "admin.key")
    return context


def connect(cluster: Any) -> Client:
    host, _, port = cluster.server_url.removeprefix("https://").rpartition(":")
    return Client(host, int(port), tls_context(cluster))


# ------------------------------------------------------------------------- measuring


@dataclass
class Measured:
    """One variant and kind's creates, gathered over the rounds."""

    sequential: list[float] = field(default_factory=list)
    sequential_failed: int = 0
    concurrent: list[float] = field(default_factory=list)
    concurrent_failed: int = 0
    concurrent_wall: float = 0.0

    def row(self, name: str, kind: str) -> dict[str, Any]:
        return {
            "variant": name,
            "kind": kind,
            "sequential": {**summarize(self.sequential), "failed": self.sequential_failed},
            "concurrent": {
                **summarize(self.concurrent),
                "failed": self.concurrent_failed,
                "connections": CONNECTIONS,
                "creates_per_s": round(len(self.concurrent) / self.concurrent_wall, 1),
            },
        }


def sequential(
    cluster: Any, kind: str, ns: str, count: int, *, into: Measured, prefix: str, warmup: int = 5
) -> None:
    """`count` creates one after another on one connection: latency as one user feels it."""
    client = connect(cluster)
    failed, first_failure = 0, ""
    try:
        for i in range(warmup + count):
            started = time.perf_counter_ns()
            status, body = client.create(path(kind, ns), make(kind, f"{prefix}s{i}"))
            elapsed = (time.perf_counter_ns() - started) / 1000
            if status != 201:
                failed += 1
                first_failure = first_failure or f"{status}: {str(body)[:300]}"
            if i >= warmup:
                into.sequential.append(elapsed)
    finally:
        client.close()
    if failed == warmup + count:  # a variant that admits nothing measures nothing
        raise RuntimeError(f"every create of {kind} in {ns} failed, the first: {first_failure}")
    into.sequential_failed += failed


def concurrent(
    cluster: Any, kind: str, ns: str, count: int, *, into: Measured, prefix: str
) -> None:
    """`count` creates over CONNECTIONS connections in a closed loop: creates/s."""
    per_connection = max(1, count // CONNECTIONS)
    lock = threading.Lock()

    def work(worker: int) -> None:
        client, own, failed = connect(cluster), [], 0
        try:
            for i in range(per_connection):
                started = time.perf_counter_ns()
                status, _ = client.create(path(kind, ns), make(kind, f"{prefix}c{worker}-{i}"))
                own.append((time.perf_counter_ns() - started) / 1000)
                failed += status != 201
        finally:
            client.close()
        with lock:
            into.concurrent.extend(own)
            into.concurrent_failed += failed

    threads = [threading.Thread(target=work, args=(w,)) for w in range(CONNECTIONS)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    into.concurrent_wall += time.perf_counter() - started


# ------------------------------------------------------------------------- variants


def _wait(probe: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if probe():
            return
        time.sleep(0.3)
    raise TimeoutError(f"{what} did not take effect in {timeout:.0f}s")


def _denied_by(cluster: Any, ns: str, marker: str | None) -> bool:
    """Whether an over-cap claim (dry run) is refused, and by whom (`marker` in the message)."""
    client = connect(cluster)
    try:
        status, body = client.create(path("claim", ns), claim("probe", 100), dry_run=True)
    finally:
        client.close()
    if marker is None:
        return status == 201
    return status != 201 and marker in json.dumps(body)


def _webhook_calls(cluster: Any) -> float:
    """How many calls the API server made to PROBED_WEBHOOK so far (its /metrics)."""
    client = connect(cluster)
    try:
        client._connection.request("GET", "/metrics")
        text = client._connection.getresponse().read().decode()
    finally:
        client.close()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("apiserver_admission_webhook_admission_duration_seconds_count{")
        and f'name="{PROBED_WEBHOOK}"' in line
    )


def _called(cluster: Any, ns: str) -> bool:
    """Whether an allowed claim (dry run) in `ns` reaches the chart's claim webhook."""
    before = _webhook_calls(cluster)
    client = connect(cluster)
    try:
        client.create(path("claim", ns), claim("probe"), dry_run=True)
    finally:
        client.close()
    return _webhook_calls(cluster) > before


@contextmanager
def _policy(cluster: Any, probe_ns: str) -> Iterator[None]:
    cluster.kubectl(
        "apply",
        "-f",
        "-",
        input=json.dumps({"apiVersion": "v1", "kind": "List", "items": admission_policy()}),
    )
    _wait(lambda: _denied_by(cluster, probe_ns, "bench-gpu-claims"), "the VAP")
    try:
        yield
    finally:
        for kind in ("validatingadmissionpolicybinding", "validatingadmissionpolicy"):
            for what in ("claims", "pods"):
                cluster.kubectl("delete", kind, f"bench-gpu-{what}", "--ignore-not-found")
        _wait(lambda: _denied_by(cluster, probe_ns, None), "removing the VAP")


@contextmanager
def variant(cluster: Any, name: str, servers: dict[str, Any]) -> Iterator[None]:
    """Admission configured for `name`, and removed again afterwards."""
    from e2e import chart_webhooks

    probe_ns = namespace(name, "claim", "seq")
    if name == "none":
        yield
        return
    if name == "vap":
        with _policy(cluster, probe_ns):
            yield
        return
    server_name, mutating = WEBHOOKS[name]
    served = servers[server_name].server
    objects = chart_webhooks.render(
        cluster.bin_dir / "helm", RELEASE, served.base_url, served.ca_bundle_pem, mutating=mutating
    )
    registration = chart_webhooks.apply(cluster, chart_webhooks.scoped(objects, {LABEL: name}))
    if server_name == "dragate":
        _wait(lambda: _denied_by(cluster, probe_ns, "dragate"), f"dragate ({name})")
    else:
        _wait(lambda: _called(cluster, probe_ns), f"the no-op webhook ({name})")
    try:
        yield
    finally:
        registration.delete(cluster)
        _wait(lambda: not _called(cluster, probe_ns), f"removing {name}")


def _prepare(cluster: Any, workdir: Path) -> dict[str, Any]:
    """CRD, DeviceClasses, namespaces, a running dragate and no-op (not registered yet)."""
    from e2e.dragate_server import DATA, DragateServer, serve_command

    cluster.kubectl("apply", "-f", str(CRD))
    cluster.kubectl(
        "wait", "--for=condition=Established", "crd/tenantusages.dragate.io", "--timeout=60s"
    )
    cluster.kubectl("apply", "-f", str(DATA / "inventory.yaml"))
    items = [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": ns, "labels": {LABEL: variant}},
        }
        for ns, (variant, _) in namespaces().items()
    ]
    cluster.kubectl(
        "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
    )
    kubeconfig = service_account_kubeconfig(cluster, workdir / "dragate.kubeconfig")
    command = serve_command(kubeconfig, policies(workdir / "policies"))
    patch = workdir / "dragate-patch.json"
    patch.write_text(json.dumps(dragate_patch(workdir / "policies")))
    launched: dict[str, Any] = {}
    try:
        launched["dragate"] = DragateServer.launch(command, workdir, name="dragate-bench")
        launched["noop"] = DragateServer.launch(NOOP_COMMAND, workdir, name="noop-bench")
        patching = [*NOOP_COMMAND, "--patch", str(patch)]
        launched["noop-patch"] = DragateServer.launch(patching, workdir, name="noop-patch-bench")
    except BaseException:
        for server in launched.values():
            server.stop()
        raise
    return launched


def chart_user(cluster: Any) -> str:
    """The user the chart runs dragate as: its webhooks' `not-dragate-itself` condition."""
    from e2e import chart_webhooks

    helm, ca = cluster.bin_dir / "helm", cluster.pki.ca.cert_pem
    rendered = chart_webhooks.render(helm, RELEASE, "https://127.0.0.1", ca)
    objects: list[dict[str, Any]] = json.loads(json.dumps(rendered))
    for webhook in (w for obj in objects for w in obj.get("webhooks", [])):
        for condition in webhook.get("matchConditions", []):
            if condition["name"] == "not-dragate-itself":
                return str(condition["expression"]).split("'")[1]
    raise RuntimeError("the chart's webhooks name no not-dragate-itself condition")


def service_account_kubeconfig(cluster: Any, path: Path) -> Path:
    """A kubeconfig for the chart's service account (bound to cluster-admin here), so that
    dragate's own requests, such as creating a managed template, are skipped by the chart's
    webhooks as they are in a cluster, instead of calling back into dragate."""
    _, _, ns, name = chart_user(cluster).split(":")
    cluster.kubectl("create", "namespace", ns, check=False)
    cluster.kubectl("create", "serviceaccount", name, "-n", ns)
    cluster.kubectl(
        "create", "clusterrolebinding", f"{name}-bench", "--clusterrole=cluster-admin",
        f"--serviceaccount={ns}:{name}",
    )  # fmt: skip
    token = cluster.kubectl("create", "token", name, "-n", ns, "--duration=4h").stdout.strip()
    config = json.loads(Path(cluster.kubeconfig).read_text())
    config["users"] = [{"name": "admin", "user": {"token": token}}]
    path.write_text(json.dumps(config))
    path.chmod(0o600)
    return path


def dragate_patch(policy_dir: Path) -> list[dict[str, Any]]:
    """The JSON patch dragate's rewrite makes of the bench's legacy Pod as the API server
    sends it for review (`noop-patch`): defaulted, so its requests equal its limits."""
    from webhook.policy.loading import load_policies
    from webhook.rewrite import rewrite_pod

    mappings = load_policies([str(policy_dir)]).mappings
    pod = legacy_pod("bench")
    for container in pod["spec"]["containers"]:
        resources = container["resources"]
        resources["requests"] = {**resources["limits"], **resources.get("requests", {})}
    ns = namespace("noop-patch", "pod", "seq")
    rewrite = rewrite_pod(pod, mappings, namespace=ns)
    if not rewrite.result.changed or rewrite.result.denied:
        raise RuntimeError(f"the bench's legacy Pod is not rewritten: {rewrite.result.denied}")
    return list(rewrite.patch)


NOOP_COMMAND = [
    sys.executable, str(Path(__file__).resolve().with_name("noop_server.py")),
    "--host", "{host}", "--port", "{port}", "--cert-dir", "{cert_dir}",
]  # fmt: skip


def run(
    bin_dir: Path, sequential_count: int, concurrent_count: int, rounds: int = ROUNDS
) -> dict[str, Any]:
    """Every variant in each of `rounds` interleaved rounds (each a share of the creates),
    so a slow minute of the shared machine lands on every variant alike."""
    from e2e.cluster import running_cluster

    measured = {(v, k): Measured() for v in VARIANTS for k in KINDS}
    with running_cluster(bin_dir, controller_manager=False) as cluster:
        servers = _prepare(cluster, cluster.workdir)
        try:
            for turn in range(rounds):
                for name in VARIANTS:
                    with variant(cluster, name, servers):
                        for kind in KINDS:
                            into, prefix = measured[(name, kind)], f"r{turn}-"
                            ns = namespace(name, kind, "seq")
                            count = sequential_count // rounds
                            sequential(cluster, kind, ns, count, into=into, prefix=prefix)
                            ns = namespace(name, kind, "conc")
                            count = concurrent_count // rounds
                            concurrent(cluster, kind, ns, count, into=into, prefix=prefix)
                print(f"apiserver: round {turn + 1} of {rounds} done", file=sys.stderr, flush=True)
            reviews = review_times(servers["dragate"].process.log_path)
        finally:
            for served in servers.values():
                served.stop()
    rows = [m.row(name, kind) for (name, kind), m in measured.items()]
    return {
        "rows": rows,
        "added": added(rows),
        "reviews": reviews,
        "connections": CONNECTIONS,
        "rounds": rounds,
        "sequential_count": sequential_count,
        "concurrent_count": concurrent_count,
    }


def review_times(log: Path) -> list[dict[str, Any]]:
    """dragate's own time per review (its log's `duration_ms`), by variant, kind, endpoint:
    what of the added latency is the review itself, and what is the webhook call around it."""
    found: dict[tuple[str, str, str], list[float]] = {}
    for line in log.read_text(errors="replace").splitlines():
        if not line.startswith("{"):
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        measured = namespaces().get(str(entry.get("namespace", "")))
        if entry.get("msg") != "review" or measured is None:
            continue
        key = (*measured, str(entry.get("endpoint")))
        found.setdefault(key, []).append(float(entry["duration_ms"]) * 1000)
    return [
        {"variant": v, "kind": k, "endpoint": e, **summarize(samples)}
        for (v, k, e), samples in sorted(found.items())
    ]


def added(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per kind and variant: p50/p99 added over `none` at one connection, creates/s ratio;
    for dragate's variants also the p50 added over the no-op webhook behind the same
    configurations (`over_noop_p50_ms`: dragate's own share; the rest is the round trip)."""
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
        noop = by.get((NOOP_OF.get(row["variant"], ""), row["kind"]))
        if noop is not None:
            entry["over_noop_p50_ms"] = _ms_between(seq, noop["sequential"], "p50_us")
        patched = by.get((PATCHED_OF.get(row["variant"], ""), row["kind"]))
        if patched is not None:
            entry["over_patch_p50_ms"] = _ms_between(seq, patched["sequential"], "p50_us")
        out.append(entry)
    return out


def _ms_between(mine: dict[str, Any], base: dict[str, Any], key: str) -> float:
    return round((float(mine[key]) - float(base[key])) / 1000, 2)


def curve(sequential_count: int, concurrent_count: int) -> dict[str, Any]:
    """For run.py: the whole comparison on a fresh control plane (the toolchain must be built)."""
    from kube_ledger_bench import toolchain

    bin_dir = toolchain()
    if bin_dir is None:
        raise RuntimeError("the e2e toolchain is not built: tests/e2e/toolchain/build.sh")
    return run(bin_dir, sequential_count, concurrent_count)


def main() -> None:
    from kube_ledger_bench import toolchain

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sequential", type=int, default=200)
    parser.add_argument("--concurrent", type=int, default=400)
    args = parser.parse_args()
    bin_dir = toolchain()
    if bin_dir is None:
        raise SystemExit("the e2e toolchain is not built: tests/e2e/toolchain/build.sh")
    print(json.dumps(run(bin_dir, args.sequential, args.concurrent), indent=2))


if __name__ == "__main__":
    main()
