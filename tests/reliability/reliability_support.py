"""Running real `dragate serve` processes (gunicorn, TLS, the real pipeline) and talking to them.

Unlike tests/admission/server_support.py (a pipeline double), these servers run the real
engine with real policy files and, where given, a shared SQLite ledger, so faults can be
checked against what matters: answers, and the quota actually held.
"""

from __future__ import annotations

import http.client
import json
import os
import resource
import signal
import socket
import sqlite3
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from net_support import free_port

from webhook import certificates

TENANTS = """\
apiVersion: dragate.io/v1alpha1
kind: Tenant
metadata: {{name: {name}}}
spec:
  namespaces: [{name}]
  quota:
  - deviceClassName: gpu.nvidia.com
    maxDevices: {quota}
"""
SETTINGS = """\
apiVersion: dragate.io/v1alpha1
kind: Settings
metadata: {{name: settings}}
spec:
  whenStateUnavailable: Deny
  denyUnknownNamespaces: {deny_unknown}
"""


def write_policies(
    directory: Path,
    tenants: dict[str, int],
    *,
    deny_unknown: bool = False,
    extra: str = "",
) -> Path:
    """One Tenant per entry (namespace = tenant name, `quota` GPUs), Settings, `extra` docs."""
    directory.mkdir(parents=True, exist_ok=True)
    docs = [TENANTS.format(name=n, quota=q) for n, q in tenants.items()]
    docs.append(SETTINGS.format(deny_unknown=str(deny_unknown).lower()))
    if extra:
        docs.append(extra)
    text = "---\n".join(docs)
    tmp = directory / ".policies.yaml.tmp"
    tmp.write_text(text)
    os.replace(tmp, directory / "policies.yaml")  # atomic, as a ConfigMap swap is
    return directory


@dataclass
class Serve:
    """One `dragate serve` process (the gunicorn master) and how to reach it."""

    process: subprocess.Popen[bytes]
    port: int
    cert_dir: Path
    log: Path
    command: list[str]
    env: dict[str, str]

    def restart(self) -> None:
        """Start the same command again on the same port (after `stop`)."""
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                self.command, stdout=out, stderr=subprocess.STDOUT, env=self.env
            )
        wait_healthy(self, self.cert_dir / "ca.crt")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                return self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
        return self.process.wait()

    def workers(self) -> list[int]:
        """The gunicorn worker pids (children of the master)."""
        pid = self.process.pid
        try:
            text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
        except OSError:
            return []
        return [int(p) for p in text.split()]

    def logs(self) -> str:
        return self.log.read_text(errors="replace")


def raise_open_files_limit(wanted: int) -> int:
    """Raise this process's soft RLIMIT_NOFILE toward `wanted` (at most the hard limit); a
    server started afterwards inherits it. Returns the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def start(
    tmp: Path,
    name: str,
    *,
    policies: Path,
    cert_dir: Path,
    ledger: Path | None = None,
    args: tuple[str, ...] = (),
    port: int | None = None,
    client_cert: tuple[str, str] | None = None,
) -> Serve:
    """`dragate serve` with the real pipeline; returns once /healthz answers over TLS."""
    if not (cert_dir / "tls.crt").exists():
        certificates.create(cert_dir, ["localhost", "127.0.0.1"])
    port = port or free_port()
    command = [
        sys.executable, "-c", "from webhook.cli import entry; entry()", "serve",
        "--port", str(port), "--cert-dir", str(cert_dir), "--policies", str(policies),
        "--reload-interval", "0.2", "--graceful-timeout", "10",
        *(("--ledger", str(ledger)) if ledger else ()),
        *args,
    ]  # fmt: skip
    env = {**os.environ, "XDG_STATE_HOME": str(tmp / f"state-{name}")}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    log = tmp / f"serve-{name}.log"
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
    server = Serve(process, port, cert_dir, log, command, env)
    wait_healthy(server, cert_dir / "ca.crt", client_cert=client_cert)
    return server


@contextmanager
def serving(
    tmp: Path,
    name: str,
    *,
    deny_unknown: bool = False,
    open_files: int = 0,
    args: tuple[str, ...] = (),
    client_cert: tuple[str, str] | None = None,
) -> Iterator[Serve]:
    """`dragate serve` over policies of its own (tenant team-a, 2 GPUs) and certificates in
    `tmp`, which must stop cleanly (exit 0) when the block ends; it is stopped whatever
    the block raises. `open_files`: the file limit the server needs, raised in this process
    first (the server inherits it)."""
    if open_files:
        limit = raise_open_files_limit(open_files)
        if limit < open_files:
            raise AssertionError(f"`ulimit -n` hard limit {limit} is below the {open_files} needed")
    policies = write_policies(tmp / "policies", {"team-a": 2}, deny_unknown=deny_unknown)
    running = start(
        tmp, name, policies=policies, cert_dir=tmp / "certs", args=args, client_cert=client_cert
    )
    try:
        yield running
    except BaseException:
        running.stop()
        raise
    assert running.stop() == 0, running.logs()


def wait_healthy(
    server: Serve, trust: Path, seconds: float = 30, client_cert: tuple[str, str] | None = None
) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise AssertionError(f"serve exited {server.process.returncode}:\n{server.logs()}")
        try:
            status, _ = request(server.port, trust, "GET", "/healthz", client_cert=client_cert)
            if status == 200:
                return
        except (OSError, ssl.SSLError, http.client.HTTPException):
            pass
        time.sleep(0.1)
    server.stop()
    raise AssertionError(f"serve did not become healthy:\n{server.logs()}")


def tls_context(trust: Path, client_cert: tuple[str, str] | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(trust))
    if client_cert:
        context.load_cert_chain(*client_cert)
    return context


def _unverified() -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # no CA store: cheap, made once
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    return context


HOSTILE_TLS = _unverified()


def hostile_tls(raw: socket.socket, server_hostname: str | None = "localhost") -> ssl.SSLSocket:
    """`raw` after a completed TLS handshake that trusts any certificate, as a hostile client
    makes one; `server_hostname=None` sends no SNI."""
    return HOSTILE_TLS.wrap_socket(raw, server_hostname=server_hostname)


def request(
    port: int,
    trust: Path,
    method: str,
    path: str,
    body: Any = None,
    *,
    timeout: float = 15,
    client_cert: tuple[str, str] | None = None,
) -> tuple[int, Any]:
    """One request on a new TLS connection: (status, decoded JSON body or raw text)."""
    conn = http.client.HTTPSConnection(
        "127.0.0.1", port, context=tls_context(trust, client_cert), timeout=timeout
    )
    try:
        data = json.dumps(body).encode() if body is not None else None
        conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        raw = response.read()
        try:
            return response.status, json.loads(raw)
        except ValueError:
            return response.status, raw.decode(errors="replace")
    finally:
        conn.close()


def timed_review(server: Serve, uid: str, timeout: float = 10) -> float:
    """Seconds for one dry-run claim review on a new TLS connection (connect, handshake,
    answer), as the API server opens one; asserts it was answered and allowed."""
    body = review(claim(f"c-{uid}", "team-a"), uid, dry_run=True)
    started = time.monotonic()
    status, answer = request(
        server.port, server.cert_dir / "ca.crt", "POST", "/validate", body, timeout=timeout
    )
    elapsed = time.monotonic() - started
    assert status == 200 and answer["response"]["allowed"] is True, answer
    return elapsed


def latency_summary(seconds: list[float]) -> dict[str, float]:
    """count, p50 and max in milliseconds, for the test output."""
    ordered = sorted(seconds) or [0.0]
    middle = ordered[len(ordered) // 2]
    return {"count": len(seconds), "p50_ms": round(middle * 1000, 1),
            "max_ms": round(ordered[-1] * 1000, 1)}  # fmt: skip


class ReviewLoad:
    """`threads` clients sending dry-run claim reviews in a loop, each on a new TLS connection,
    until the block ends: what was answered, how fast, and every failure (a handshake error
    counts as one)."""

    def __init__(self, server: Serve, threads: int, label: str = "load") -> None:
        self.server, self.label = server, label
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.latencies: list[float] = []
        self.failures: list[str] = []
        self.threads = [threading.Thread(target=self._run, args=(n,), daemon=True)
                        for n in range(threads)]  # fmt: skip

    def _run(self, n: int) -> None:
        i = 0
        while not self.stop.is_set():
            i += 1
            try:
                seconds = timed_review(self.server, f"{self.label}-{n}-{i}")
            except (AssertionError, OSError, http.client.HTTPException) as err:
                with self.lock:
                    self.failures.append(repr(err)[:300])
                continue
            with self.lock:
                self.latencies.append(seconds)

    def answered(self) -> int:
        with self.lock:
            return len(self.latencies)

    def __enter__(self) -> ReviewLoad:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=30)


# --------------------------------------------------------------------------- memory


def _status_kib(pid: int, path: str, field: str) -> int:
    for line in Path(f"/proc/{pid}/{path}").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/{path}")


def pod_memory_mib(server: Serve) -> dict[str, float]:
    """PSS and RSS of the master and its worker, summed, in MiB."""
    pids = [server.process.pid, *server.workers()]
    pss = sum(_status_kib(pid, "smaps_rollup", "Pss") for pid in pids)
    rss = sum(_status_kib(pid, "status", "VmRSS") for pid in pids)
    return {"pss_mib": round(pss / 1024, 1), "rss_mib": round(rss / 1024, 1)}


# --------------------------------------------------------------------------- objects


def claim(name: str, namespace: str, count: int = 1, **meta: Any) -> dict[str, Any]:
    request = {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": count}}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace, **meta},
        "spec": {"devices": {"requests": [request]}},
    }


def pod(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    containers = spec.pop("containers", [{"name": "c", "image": "busybox"}])
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"containers": containers, **spec},
    }


def legacy_gpu_pod(name: str, target_bytes: int, namespace: str = "team-a") -> dict[str, Any]:
    """A legacy Pod whose uniquely named GPU containers fill about `target_bytes` of review."""
    one = {"name": "gpu-container-00000", "image": "busybox",
           "resources": {"limits": {"nvidia.com/gpu": 1}}}  # fmt: skip
    count = target_bytes // (len(json.dumps(one)) + 2)
    containers = [{**one, "name": f"gpu-container-{i:05d}"} for i in range(count)]
    return pod(name, namespace, containers=containers)


KINDS = {
    "Pod": ("", "v1", "pods"),
    "ResourceClaim": ("resource.k8s.io", "v1", "resourceclaims"),
    "Deployment": ("apps", "v1", "deployments"),
}


def review(obj: dict[str, Any], uid: str, *, dry_run: bool = False) -> dict[str, Any]:
    group, version, resource = KINDS[obj["kind"]]
    kind = {"group": group, "version": version, "kind": obj["kind"]}
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": kind,
            "resource": {"group": group, "version": version, "resource": resource},
            "requestKind": kind,
            "operation": "CREATE",
            "namespace": obj["metadata"]["namespace"],
            "name": obj["metadata"]["name"],
            "object": obj,
            "oldObject": None,
            "dryRun": dry_run,
            "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
        },
    }


# --------------------------------------------------------------------------- ledger


def ledger_usage(path: Path) -> dict[str, dict[str, int]]:
    """tenant -> holder -> GPUs, read straight from the SQLite file."""
    db = sqlite3.connect(str(path), timeout=10)
    try:
        rows = db.execute("SELECT tenant, holder, devices FROM holders").fetchall()
    finally:
        db.close()
    usage: dict[str, dict[str, int]] = {}
    for tenant, holder, devices in rows:
        usage.setdefault(tenant, {})[holder] = int(json.loads(devices).get("gpu.nvidia.com", 0))
    return usage


def eventually(check: Callable[[], bool], seconds: float = 10, what: str = "condition") -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError(f"{what} not reached within {seconds}s")
