"""A real, throw-away Kubernetes control plane: etcd, kube-apiserver, kube-controller-manager.

No kubelet and no scheduler: Pods are stored, admitted and reconciled by controllers, but
never run. Started the way controller-runtime's envtest starts it, plus RBAC, the DRA beta
API versions and a controller-manager for Deployments, ReplicaSets and ResourceClaims. The
API versions and feature gates turned on follow the minor of the kube-apiserver binary
(1.35, 1.36 or 1.37).
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import ssl
import subprocess
import tempfile
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import certs
from .processes import LOOPBACK, ManagedProcess, free_port

SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24"
RESOURCE_BETA_APIS = ("resource.k8s.io/v1beta1", "resource.k8s.io/v1beta2")
"""DRA's beta versions, served next to v1 but off by default on every supported minor; the
tests send claims in all three."""
MUTATING_POLICY_API = "admissionregistration.k8s.io/v1beta1"
"""The MutatingAdmissionPolicy version dragate writes: beta and off by default on every
supported minor. Its feature gate is beta and off in 1.35, GA and on from 1.36."""
MUTATING_POLICY_GATE_BEFORE = 36
WORKLOAD_API = "scheduling.k8s.io/v1beta1"
"""Workload and PodGroup, behind the GenericWorkload gate (beta and off in 1.37)."""
WORKLOAD_FROM = 37
CONTROLLERS = (
    "deployment-controller",
    "replicaset-controller",
    "job-controller",  # gangs: the Job controller creates their Pods
    "resourceclaim-controller",
    "resourcequota-controller",
    "namespace-controller",
    "garbage-collector-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "root-ca-certificate-publisher-controller",
    "validatingadmissionpolicy-status-controller",  # type-checks VAPs: status.typeChecking
)
STARTUP_TIMEOUT = 90.0
COMMAND_TIMEOUT = 120.0


class CommandError(subprocess.CalledProcessError):
    """A failed kubectl/helm call whose message includes its output."""

    def __str__(self) -> str:
        return f"{super().__str__()}\nstdout:\n{self.stdout}\nstderr:\n{self.stderr}"


@dataclass(frozen=True)
class Pki:
    """Certificate files for one cluster, all under `directory`."""

    directory: Path
    ca: certs.CertKey
    ca_path: Path
    serving_cert: Path
    serving_key: Path
    admin: certs.CertKey
    sa_private_key: Path
    sa_public_key: Path


def make_pki(directory: Path) -> Pki:
    directory.mkdir(parents=True)
    ca = certs.make_ca()
    ca_path, _ = ca.write(directory, "ca")
    serving = certs.make_serving_cert(
        ca, ("localhost", LOOPBACK, "kubernetes", "kubernetes.default.svc", "10.0.0.1")
    )
    serving_cert, serving_key = serving.write(directory, "apiserver")
    admin = certs.make_client_cert(ca, "dragate-e2e-admin", ("system:masters",))
    admin.write(directory, "admin")
    sa_key = certs.make_service_account_key()
    sa_private_key = directory / "sa.key"
    sa_private_key.write_bytes(certs.private_key_pem(sa_key))
    sa_public_key = directory / "sa.pub"
    sa_public_key.write_bytes(certs.public_key_pem(sa_key))
    return Pki(
        directory, ca, ca_path, serving_cert, serving_key, admin, sa_private_key, sa_public_key
    )


def _http_ok(url: str, context: ssl.SSLContext | None = None) -> bool:
    with urllib.request.urlopen(url, timeout=5, context=context) as response:
        return bool(response.status == 200)


def _admin_tls_context(pki: Pki) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(pki.ca_path))
    context.load_cert_chain(pki.directory / "admin.crt", pki.directory / "admin.key")
    return context


def _insecure_tls_context() -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def start_etcd(bin_dir: Path, workdir: Path) -> tuple[ManagedProcess, str]:
    client_url = f"http://{LOOPBACK}:{free_port()}"
    peer_url = f"http://{LOOPBACK}:{free_port()}"
    etcd = ManagedProcess(
        "etcd",
        [
            str(bin_dir / "etcd"),
            "--name=e2e",
            f"--data-dir={workdir / 'etcd-data'}",
            f"--listen-client-urls={client_url}",
            f"--advertise-client-urls={client_url}",
            f"--listen-peer-urls={peer_url}",
            f"--initial-advertise-peer-urls={peer_url}",
            f"--initial-cluster=e2e={peer_url}",
            "--unsafe-no-fsync",
        ],
        workdir,
    )
    etcd.wait_ready(lambda: _http_ok(f"{client_url}/health"), timeout=STARTUP_TIMEOUT)
    return etcd, client_url


def server_minor(bin_dir: Path) -> int:
    """The Kubernetes minor of the kube-apiserver in `bin_dir` (`Kubernetes v1.37.2` -> 37)."""
    argv = [str(bin_dir / "kube-apiserver"), "--version"]
    output = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=30).stdout
    found = re.search(r"v1\.(\d+)\.", output)
    if found is None:
        raise RuntimeError(f"no version in `{' '.join(argv)}`: {output!r}")
    return int(found.group(1))


def runtime_config(minor: int, mutating_policies: bool) -> list[str]:
    apis = list(RESOURCE_BETA_APIS)
    if mutating_policies:
        apis.append(MUTATING_POLICY_API)
    if minor >= WORKLOAD_FROM:
        apis.append(WORKLOAD_API)
    return [f"--runtime-config={','.join(f'{api}=true' for api in apis)}"]


def feature_gates(minor: int, mutating_policies: bool) -> list[str]:
    """GenericWorkload goes to every component, so the scheduler and the controllers see the
    Workload API the server serves, and DRAWorkloadResourceClaims (beta and off in 1.37) so a
    PodGroup's shared claims are kept, made and allocated; MutatingAdmissionPolicy concerns
    the API server alone."""
    gates = []
    if mutating_policies and minor < MUTATING_POLICY_GATE_BEFORE:
        gates.append("MutatingAdmissionPolicy=true")
    if minor >= WORKLOAD_FROM:
        gates += ["GenericWorkload=true", "DRAWorkloadResourceClaims=true"]
    return [f"--feature-gates={','.join(gates)}"] if gates else []


def start_apiserver(
    bin_dir: Path, workdir: Path, pki: Pki, etcd_url: str, *, mutating_policies: bool = False
) -> tuple[ManagedProcess, str]:
    minor = server_minor(bin_dir)
    port = free_port()
    server_url = f"https://{LOOPBACK}:{port}"
    apiserver = ManagedProcess(
        "kube-apiserver",
        [
            str(bin_dir / "kube-apiserver"),
            f"--etcd-servers={etcd_url}",
            f"--secure-port={port}",
            f"--bind-address={LOOPBACK}",
            f"--advertise-address={LOOPBACK}",
            "--endpoint-reconciler-type=none",  # 1.37 refuses a loopback address for it
            f"--tls-cert-file={pki.serving_cert}",
            f"--tls-private-key-file={pki.serving_key}",
            f"--client-ca-file={pki.ca_path}",
            "--authorization-mode=RBAC",
            f"--service-account-issuer={server_url}/",
            f"--service-account-key-file={pki.sa_public_key}",
            f"--service-account-signing-key-file={pki.sa_private_key}",
            f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
            "--allow-privileged=true",
            "--disable-admission-plugins=ServiceAccount",
            # 1.37 refuses a loopback address for the `kubernetes` Service's endpoints; no
            # Pod runs here to dial that Service.
            "--endpoint-reconciler-type=none",
            *runtime_config(minor, mutating_policies),
            *feature_gates(minor, mutating_policies),
        ],
        workdir,
    )
    context = _admin_tls_context(pki)
    apiserver.wait_ready(lambda: _http_ok(f"{server_url}/readyz", context), STARTUP_TIMEOUT)
    return apiserver, server_url


def write_kubeconfig(path: Path, server_url: str, pki: Pki) -> Path:
    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "e2e",
                "cluster": {
                    "server": server_url,
                    "certificate-authority-data": b64(pki.ca.cert_pem),
                },
            }
        ],
        "users": [
            {
                "name": "admin",
                "user": {
                    "client-certificate-data": b64(pki.admin.cert_pem),
                    "client-key-data": b64(pki.admin.key_pem),
                },
            }
        ],
        "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": "admin"}}],
        "current-context": "e2e",
    }
    path.write_text(json.dumps(config, indent=2))  # JSON is YAML
    path.chmod(0o600)
    return path


def start_controller_manager(
    bin_dir: Path, workdir: Path, pki: Pki, kubeconfig: Path
) -> ManagedProcess:
    port = free_port()
    manager = ManagedProcess(
        "kube-controller-manager",
        [
            str(bin_dir / "kube-controller-manager"),
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            f"--secure-port={port}",
            f"--bind-address={LOOPBACK}",
            f"--cert-dir={workdir / 'controller-manager-certs'}",
            f"--controllers={','.join(CONTROLLERS)}",
            f"--service-account-private-key-file={pki.sa_private_key}",
            f"--root-ca-file={pki.ca_path}",
            "--use-service-account-credentials=false",
            "--leader-elect=false",
            *feature_gates(server_minor(bin_dir), mutating_policies=False),
        ],
        workdir,
    )
    healthz = f"https://{LOOPBACK}:{port}/healthz"
    manager.wait_ready(lambda: _http_ok(healthz, _insecure_tls_context()), STARTUP_TIMEOUT)
    return manager


def start_scheduler(bin_dir: Path, workdir: Path, kubeconfig: Path) -> ManagedProcess:
    """kube-scheduler with its defaults (DynamicResourceAllocation is GA and locked on)."""
    port = free_port()
    scheduler = ManagedProcess(
        "kube-scheduler",
        [
            str(bin_dir / "kube-scheduler"),
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            f"--secure-port={port}",
            f"--bind-address={LOOPBACK}",
            f"--cert-dir={workdir / 'scheduler-certs'}",
            "--leader-elect=false",
            *feature_gates(server_minor(bin_dir), mutating_policies=False),
        ],
        workdir,
    )
    healthz = f"https://{LOOPBACK}:{port}/healthz"
    scheduler.wait_ready(lambda: _http_ok(healthz, _insecure_tls_context()), STARTUP_TIMEOUT)
    return scheduler


class Cluster:
    """A running control plane and the clients to talk to it."""

    def __init__(
        self, bin_dir: Path, workdir: Path, server_url: str, pki: Pki, kubeconfig: Path
    ) -> None:
        self.bin_dir = bin_dir
        self.workdir = workdir
        self.server_url = server_url
        self.ca_pem = pki.ca.cert_pem
        self.ca_path = pki.ca_path
        self.kubeconfig = kubeconfig
        self.pki = pki
        self.processes: list[ManagedProcess] = []

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Run the real kubectl against this cluster; output is captured as text."""
        argv = [
            str(self.bin_dir / "kubectl"),
            f"--kubeconfig={self.kubeconfig}",
            f"--cache-dir={self.workdir / 'kubectl-cache'}",
            *args,
        ]
        return self._run(argv, input, check, env={})

    def apply(
        self, manifest: str, namespace: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """`kubectl apply -f -` with `manifest` (YAML or JSON) on stdin."""
        scope = ["-n", namespace] if namespace else []
        return self.kubectl("apply", *scope, "-f", "-", input=manifest)

    def helm(
        self, *args: str, input: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Run helm from the toolchain against this cluster, with its state in the workdir."""
        home = self.workdir / "helm"
        env = {
            "KUBECONFIG": str(self.kubeconfig),
            "HELM_CACHE_HOME": str(home / "cache"),
            "HELM_CONFIG_HOME": str(home / "config"),
            "HELM_DATA_HOME": str(home / "data"),
        }
        return self._run([str(self.bin_dir / "helm"), *args], input, check, env)

    def get_json(self, *args: str) -> Any:
        """`kubectl get ARGS -o json`, parsed."""
        return json.loads(self.kubectl("get", *args, "-o", "json").stdout)

    @staticmethod
    def _run(
        argv: Sequence[str], input: str | None, check: bool, env: dict[str, str]
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            argv,
            input=input,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT,
            env={**os.environ, **env},
            check=False,
        )
        if check and result.returncode != 0:
            raise CommandError(result.returncode, argv, result.stdout, result.stderr)
        return result

    def diagnostics(self) -> str:
        """Log tails of every component, for failure messages."""
        return "\n\n".join(f"--- {p.name} ---\n{p.log_tail()}" for p in self.processes)


@contextmanager
def running_cluster(
    bin_dir: Path,
    keep_workdir: bool = False,
    *,
    controller_manager: bool = True,
    scheduler: bool = False,
    mutating_policies: bool = False,
) -> Iterator[Cluster]:
    """Start etcd, kube-apiserver (serving MutatingAdmissionPolicies when asked),
    (unless told not to) kube-controller-manager and (when asked) kube-scheduler; stop them
    and clean up after.

    Components stop in reverse order of start (terminate, then kill), even when the body
    or a later startup step fails.
    """
    workdir = Path(tempfile.mkdtemp(prefix="dragate-e2e-"))
    try:
        with ExitStack() as stack:
            pki = make_pki(workdir / "pki")
            etcd, etcd_url = start_etcd(bin_dir, workdir)
            stack.callback(etcd.stop)
            apiserver, server_url = start_apiserver(
                bin_dir, workdir, pki, etcd_url, mutating_policies=mutating_policies
            )
            stack.callback(apiserver.stop)
            kubeconfig = write_kubeconfig(workdir / "kubeconfig", server_url, pki)
            cluster = Cluster(bin_dir, workdir, server_url, pki, kubeconfig)
            cluster.processes += [etcd, apiserver]
            if controller_manager:
                manager = start_controller_manager(bin_dir, workdir, pki, kubeconfig)
                stack.callback(manager.stop)
                cluster.processes.append(manager)
            if scheduler:
                process = start_scheduler(bin_dir, workdir, kubeconfig)
                stack.callback(process.stop)
                cluster.processes.append(process)
            yield cluster
    finally:
        if keep_workdir:
            print(f"kept e2e workdir {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
