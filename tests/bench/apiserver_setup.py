"""The apiserver benchmark's setup: a client of the API server, every variant's admission
registered at once (the chart's own webhook configurations, the ValidatingAdmissionPolicy,
dragate's rewriting MutatingAdmissionPolicy, each scoped to the variant's namespaces),
and the servers behind them: `dragate serve` under the chart's service account, the no-op,
and the no-op that answers with dragate's patch."""

from __future__ import annotations

import http.client
import json
import ssl
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from apiserver_load import AuditLoad, write_tenants
from apiserver_objects import (
    REPO,
    admission_policy,
    claim,
    dragate_patch,
    legacy_pod,
    namespace,
    namespaces,
    path,
    rewriting_policy,
)
from apiserver_objects import policies as bench_policies
from apiserver_roles import READY_SECONDS, launch_controller

WEBHOOKS = {  # variant: (server, mutating webhook registered)
    "noop-validate": ("noop", False),
    "validate": ("dragate", False),
    "noop-mutate": ("noop", True),
    "noop-patch": ("noop-patch", True),
    "mutate": ("dragate", True),
    "mutate-map": ("dragate", True),  # the Pod's rewrite is dragate's MutatingAdmissionPolicy's
}
LABEL = "dragate-bench/variant"
RELEASE = "dragate-bench"
PROBED_WEBHOOK = "claims.validate.dragate.io"  # the chart's webhook a claim probe reaches
CHART_CRDS = REPO / "charts" / "dragate" / "crds"
"""The CRDs a chart install brings: TenantUsage, the policy kinds, PolicyReports."""
ESTABLISHED = ("crd/tenantusages.dragate.io", "crd/policyreports.wgpolicyk8s.io")


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


def _register_policy(cluster: Any) -> None:
    cluster.kubectl(
        "apply",
        "-f",
        "-",
        input=json.dumps({"apiVersion": "v1", "kind": "List", "items": admission_policy()}),
    )
    _wait(
        lambda: _denied_by(cluster, namespace("vap", "claim", "seq"), "bench-gpu-claims"), "the VAP"
    )


def _rewritten_by_policy(cluster: Any) -> bool:
    """Whether a legacy Pod (dry run) in `mutate-map`'s namespace comes back rewritten (by
    the policy: the variant's webhooks are registered after it)."""
    client = connect(cluster)
    try:
        status, body = client.create(
            path("pod", namespace("mutate-map", "pod", "seq")), legacy_pod("probe"), dry_run=True
        )
    finally:
        client.close()
    return status == 201 and "dragate.io/rewritten" in (body["metadata"].get("labels") or {})


def _register_rewriting_policy(cluster: Any) -> None:
    """`mutate-map`: dragate's rewriting policy and the templates it names, before the
    variant's webhooks (the probe would meet the mutating webhook's rewrite otherwise)."""
    objects = rewriting_policy(_policy_dir(cluster.workdir), chart_user(cluster))
    cluster.kubectl(
        "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
    )
    _wait(lambda: _rewritten_by_policy(cluster), "dragate's MutatingAdmissionPolicy")


def _register_webhooks(cluster: Any, name: str, servers: dict[str, Any]) -> None:
    """The chart's configurations for variant `name`, renamed after it (one set per variant
    at once) and scoped to its namespaces; returns once the API server calls them."""
    from e2e import chart_webhooks

    server_name, mutating = WEBHOOKS[name]
    served = servers[server_name].server
    objects = chart_webhooks.render(
        cluster.bin_dir / "helm", RELEASE, served.base_url, served.ca_bundle_pem, mutating=mutating
    )
    for obj in objects:
        obj["metadata"]["name"] = f"{obj['metadata']['name']}-{name}"  # type: ignore[index]
    chart_webhooks.apply(cluster, chart_webhooks.scoped(objects, {LABEL: name}))
    probe_ns = namespace(name, "claim", "seq")
    if server_name == "dragate":
        _wait(lambda: _denied_by(cluster, probe_ns, "dragate"), f"dragate ({name})")
    else:
        _wait(lambda: _called(cluster, probe_ns), f"the no-op webhook ({name})")


def register(cluster: Any, servers: dict[str, Any]) -> None:
    """Every variant's admission at once, each scoped to its own namespaces (the label
    LABEL), so the bench can switch variants between two creates with no registration in
    between: a create in a `none` namespace meets only selectors that do not match it."""
    _register_policy(cluster)
    _register_rewriting_policy(cluster)
    for name in WEBHOOKS:
        _register_webhooks(cluster, name, servers)


def prepare(cluster: Any, workdir: Path, load: AuditLoad) -> dict[str, Any]:
    """The chart's CRDs, DeviceClasses, namespaces, and running servers (not registered yet):
    dragate's webhook and controller roles (reading the bench's policies and the audit
    load's Tenants), the no-op and the no-op that patches."""
    from e2e.dragate_server import DATA, DragateServer

    cluster.kubectl("apply", "-f", str(CHART_CRDS))
    for crd in ESTABLISHED:
        cluster.kubectl("wait", "--for=condition=Established", crd, "--timeout=60s")
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
    policies = bench_policies(_policy_dir(workdir))
    write_tenants(policies, load)
    patch = workdir / "dragate-patch.json"
    patch.write_text(json.dumps(dragate_patch(_policy_dir(workdir))))
    launched: dict[str, Any] = {}
    try:
        launched["dragate"] = _launch_webhook(dragate_command(kubeconfig, policies), workdir)
        launched["controller"] = launch_controller(kubeconfig, policies, workdir)
        launched["noop"] = DragateServer.launch(NOOP_COMMAND, workdir, name="noop-bench")
        patching = [*NOOP_COMMAND, "--patch", str(patch)]
        launched["noop-patch"] = DragateServer.launch(patching, workdir, name="noop-patch-bench")
    except BaseException:
        for server in launched.values():
            server.stop()
        raise
    return launched


def _launch_webhook(command: list[str], workdir: Path) -> Any:
    """dragate's webhook role, given the time a large cluster's lists take to become ready."""
    from e2e.dragate_server import DragateServer
    from e2e.webhooks import start_webhook_server

    server = start_webhook_server(
        command, workdir, name="dragate-bench", ready_path="/readyz", timeout=READY_SECONDS
    )
    running = DragateServer(server, workdir, logs=[server.process])
    running.wait_all_workers_ready()
    return running


def _policy_dir(workdir: Path) -> Path:
    return workdir / "policies"


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


def dragate_command(kubeconfig: Path, policies: Path) -> list[str]:
    """`dragate serve --role webhook` in cluster mode with the chart's defaults (one gevent
    worker, quota grants, policies from files alone), started as the console script starts
    it (`python -m webhook`: gevent's monkey patching first); placeholders are filled by the
    e2e `start_webhook_server`. The controller role runs beside it (`apiserver_roles`)."""
    return [
        sys.executable, "-m", "webhook", "serve", "--role", "webhook",
        "--kubeconfig", str(kubeconfig), "--policies", str(policies), "--no-policy-objects",
        "--host", "{host}", "--port", "{port}", "--cert-dir", "{cert_dir}",
        "--graceful-timeout", "5", "--log-level", "info",
    ]  # fmt: skip


NOOP_COMMAND = [
    sys.executable, str(Path(__file__).resolve().with_name("noop_server.py")),
    "--host", "{host}", "--port", "{port}", "--cert-dir", "{cert_dir}",
    "--graceful-timeout", "5",
]  # fmt: skip
