"""The Helm chart installs into a real kube-apiserver.

- url mode (the webhook outside the cluster): every object is created, the CRD is established
  and enforces its schema, and the matchConditions, namespaceSelector and failure policies
  behave as designed. The webhook URL points at a closed port, so "was dragate called?" is
  visible as a fast `failed calling webhook` error (validating fails closed) or as a clean
  admission (not called, or mutating failing open).
- default mode: both roles' Deployments and Services, the PDB, Secret and webhook
  configurations are accepted; the Pods both ReplicaSets create pass Pod Security
  "restricted" (no kubelet runs them, so `dragate serve --role` is never started); the
  Helm-made certificate survives upgrades, renews from the kept CA, and a CA rotation keeps
  the old CA in the bundle.
- rewritePolicy.keep: the rewrite-policy keeper does its work on the controller's RBAC alone.

What each role's ServiceAccount may do, asked of the apiserver's authorizer, is
test_helm_rbac.py.

Each test uninstalls its release: a webhook with failurePolicy Fail and no server behind it
would otherwise refuse GPU objects for every later test of the session cluster. The url-mode
and default-mode installs run on every supported Kubernetes minor (`kube_matrix`).
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import kubernetes
import pytest
from cryptography import x509

from webhook.kube.api import KubeApi
from webhook.kube.caches import KubeState
from webhook.kube.policykeeper import RewritePolicyKeeper
from webhook.policy.loading import load_policies
from webhook.rewrite.admissionpolicy import NAME as POLICY

from . import certs
from .cluster import Cluster, CommandError
from .processes import LOOPBACK, free_port, wait_for

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "dragate"
ADMIN_ACCESS = "resource.kubernetes.io/admin-access"
REWRITTEN_HOOK = "rewritten-pods.validate.dragate.io"

Install = Callable[..., str]


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def get(cluster: Cluster, *args: str) -> Any:
    return json.loads(cluster.kubectl("get", *args, "-o", "json").stdout)


@pytest.fixture
def install(kube_cluster: Cluster) -> Iterator[Install]:
    """`install(release, namespace, *helm_args)`: helm install into the cluster of
    `kube_minor`; uninstalled after the test."""
    releases: list[tuple[str, str]] = []
    cluster = kube_cluster

    def run(release: str, namespace: str, *args: str) -> str:
        releases.append((release, namespace))
        return cluster.helm("install", release, str(CHART), "--namespace", namespace,
                            *args).stdout  # fmt: skip

    yield run
    for release, namespace in reversed(releases):
        cluster.helm("uninstall", release, "--namespace", namespace, "--wait=false", check=False)
        cluster.kubectl("delete", "namespace", namespace, "--wait=false", "--ignore-not-found")


def create_dry_run(cluster: Cluster, manifest: dict[str, Any], namespace: str | None = None) -> str:
    """`kubectl create --dry-run=server`: full admission, webhooks included, nothing stored.
    Returns "" when admitted, else the error text."""
    scope = ["-n", namespace] if namespace else []
    try:
        cluster.kubectl("create", *scope, "--dry-run=server", "-f", "-", input=json.dumps(manifest))
    except CommandError as error:
        return str(error.stderr)
    return ""


def pod(name: str, resources: dict[str, str] | None = None) -> dict[str, Any]:
    c: dict[str, Any] = {"name": "main", "image": "registry.example/app:1"}
    if resources:
        c["resources"] = {"limits": resources}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [c]}}  # fmt: skip


def claim(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": name},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 1}}]}},
    }  # fmt: skip


def namespace(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": labels or {}}}  # fmt: skip


def tenant_usage(name: str, devices: int) -> dict[str, Any]:
    return {
        "apiVersion": "dragate.io/v1alpha1", "kind": "TenantUsage", "metadata": {"name": name},
        "spec": {"tenant": name, "holders": {"claim:team-a/train": {
            "devices": {"gpu.nvidia.com": devices}, "expiresAt": 1767225600.5}}},
    }  # fmt: skip


def called(error: str, webhook: str) -> bool:
    return f'failed calling webhook "{webhook}"' in error


@pytest.mark.kube_matrix
def test_url_mode_install(kube_cluster: Cluster, install: Install) -> None:
    cluster = kube_cluster
    release = unique("dragate-url")  # contains the chart name, so it is also the full name
    own_ns = release
    ca = certs.make_ca("dragate-helm-e2e")
    bundle = base64.b64encode(ca.cert_pem).decode()
    closed = f"https://{LOOPBACK}:{free_port()}"  # nobody listens: calls fail at once
    notes = install(release, own_ns, "--create-namespace",
            "--set", "deployment.enabled=false", "--set", f"webhook.url={closed}",
            "--set", f"webhook.caBundle={bundle}")  # fmt: skip
    assert f"url mode: the apiserver calls {closed}/validate" in notes

    # The CRD is established and enforces its schema.
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s",
                    "crd/tenantusages.dragate.io")  # fmt: skip
    usage = unique("e2e-tenant")
    cluster.apply(json.dumps(tenant_usage(usage, 2)))
    try:
        stored = get(cluster, "tenantusage", usage)
        assert stored["spec"]["holders"]["claim:team-a/train"]["devices"] == {"gpu.nvidia.com": 2}
        assert "greater than or equal to 0" in create_dry_run(
            cluster, tenant_usage(unique("e2e-bad"), -1)
        )
    finally:
        cluster.kubectl("delete", "tenantusage", usage, "--ignore-not-found")

    # Webhook configurations carry the url and the given caBundle.
    validating = get(cluster, "validatingwebhookconfiguration", release)
    mutating = get(cluster, "mutatingwebhookconfiguration", release)
    hooks = {h["name"]: h for h in validating["webhooks"] + mutating["webhooks"]}
    assert set(hooks) == {"pods.validate.dragate.io", "rewritten-pods.validate.dragate.io",
                          "claims.validate.dragate.io", "namespaces.validate.dragate.io",
                          "gangs.validate.dragate.io", "pods.mutate.dragate.io"}  # fmt: skip
    for name, hook in hooks.items():
        path = "/mutate" if ".mutate." in name else "/validate"
        assert hook["clientConfig"] == {"url": closed + path, "caBundle": bundle}
        # Compiled and accepted by the apiserver; rewritten Pods are chosen by label alone.
        assert len(hook.get("matchConditions", [])) >= (
            name != "rewritten-pods.validate.dragate.io"
        )

    # Policies ConfigMap, each role's service account and RBAC (what each may do: the tables
    # of test_helm_rbac.py).
    data = get(cluster, "configmap", "-n", own_ns, f"{release}-policies")["data"]
    assert set(data) == {p.name for p in (CHART / "files" / "policies").glob("*.yaml")}
    for name in (release, f"{release}-controller"):
        get(cluster, "serviceaccount", "-n", own_ns, name)
        get(cluster, "clusterrole", name)
        get(cluster, "clusterrolebinding", name)
    get(cluster, "role", "-n", own_ns, f"{release}-controller")
    for kind in ("deployment", "service", "secret"):
        absent = cluster.kubectl("get", kind, "-n", own_ns, "-l",
                                 f"app.kubernetes.io/instance={release}", "-o", "name")  # fmt: skip
        assert absent.stdout.strip() == "", f"url mode must not create a {kind}"

    # What reaches dragate (fails closed: "failed calling webhook") and what does not.
    apps = unique("apps")
    cluster.apply(json.dumps(namespace(apps)))  # no watched label: not sent
    try:
        assert create_dry_run(cluster, pod("plain", {"cpu": "1"}), apps) == ""
        error = create_dry_run(cluster, pod("legacy", {"nvidia.com/gpu": "1"}), apps)
        # The mutating call failed open (Ignore); the validating one failed closed (Fail).
        assert called(error, "pods.validate.dragate.io"), error
        assert called(create_dry_run(cluster, claim("c"), apps), "claims.validate.dragate.io")
        labelled = namespace(unique("admin"), {ADMIN_ACCESS: "true"})
        assert called(create_dry_run(cluster, labelled), "namespaces.validate.dragate.io")
        assert create_dry_run(cluster, namespace(unique("plain"), {"team": "a"})) == ""
        # Excluded namespaces are never sent: its own (no deadlock) and kube-system.
        for excluded in (own_ns, "kube-system"):
            assert create_dry_run(cluster, pod("legacy", {"nvidia.com/gpu": "1"}), excluded) == ""
            assert create_dry_run(cluster, claim("c"), excluded) == ""
    finally:
        cluster.kubectl("delete", "namespace", apps, "--wait=false")


def test_kept_rewrite_policy_runs_on_the_chart_s_rbac(
    cluster: Cluster, install: Install, tmp_path: Path
) -> None:
    """rewritePolicy.keep=true: the keeper, holding a token of the controller's service account,
    applies the policy, binding and templates; the API server then rewrites a legacy Pod
    itself (it meets the rewritten Pods' validating entry); the keeper deletes them when
    nothing is left to rewrite; the service account may write no other policy."""
    release = unique("dragate-keep")
    closed = f"https://{LOOPBACK}:{free_port()}"
    bundle = base64.b64encode(certs.make_ca("dragate-keep-e2e").cert_pem).decode()
    install(release, release, "--create-namespace", "--set", "deployment.enabled=false",
            "--set", f"webhook.url={closed}", "--set", f"webhook.caBundle={bundle}",
            "--set", "rewritePolicy.keep=true")  # fmt: skip
    controller = f"{release}-controller"
    account = f"system:serviceaccount:{release}:{controller}"
    for verb, what, allowed in [("patch", f"mutatingadmissionpolicies/{POLICY}", True),
                                ("delete", f"mutatingadmissionpolicybindings/{POLICY}", True),
                                ("patch", "mutatingadmissionpolicies/other", False),
                                ("create", "mutatingadmissionpolicies", False)]:  # fmt: skip
        can = cluster.kubectl("auth", "can-i", verb, what, f"--as={account}", check=False)
        assert (can.stdout.strip() == "yes") is allowed, (verb, what, can.stdout)
    tenant_ns, other_ns = unique("keep-tenant"), unique("keep-other")
    for name in (tenant_ns, other_ns):
        cluster.apply(json.dumps(namespace(name)))
    (tmp_path / "legacy.yaml").write_text((REPO / "policies/legacy-mapping.yaml").read_text())
    (tmp_path / "tenants.yaml").write_text(
        "apiVersion: dragate.io/v1alpha1\nkind: Tenant\nmetadata: {name: keep}\n"
        f"spec: {{namespaces: [{tenant_ns}]}}\n"
    )
    policies = load_policies([str(tmp_path)])
    token = cluster.kubectl("create", "token", controller, "-n", release).stdout.strip()
    state = KubeState(KubeApi.from_configuration(_token_configuration(cluster, token))).start()
    try:
        assert state.wait_synced(20), state.health()
        served = {"policies": policies}
        keeper = RewritePolicyKeeper(state, state.api, lambda: served["policies"])
        wait_for(lambda: state.namespace(tenant_ns) is not None, timeout=10, what="namespace")
        assert keeper.reconcile() == "applied", keeper.last_error
        legacy = pod("legacy", {"nvidia.com/gpu": "1"})

        def rewritten() -> bool:  # it meets the rewritten Pods' entry, labelled by the policy
            return called(create_dry_run(cluster, legacy, tenant_ns), REWRITTEN_HOOK)

        wait_for(rewritten, timeout=60, what="the API server rewriting the Pod itself")
        assert called(create_dry_run(cluster, legacy, other_ns), "pods.validate.dragate.io")

        served["policies"] = replace(policies, tenants=())
        assert keeper.reconcile() == "absent", keeper.last_error
        for kind in ("mutatingadmissionpolicybinding", "mutatingadmissionpolicy"):
            assert cluster.kubectl("get", kind, POLICY, check=False).returncode != 0
    finally:
        state.stop(timeout=0)
        for kind in ("mutatingadmissionpolicybinding", "mutatingadmissionpolicy"):
            cluster.kubectl("delete", kind, POLICY, "--ignore-not-found", check=False)
        for name in (tenant_ns, other_ns):
            cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)


def _token_configuration(cluster: Cluster, token: str) -> Any:
    """The client configuration of a pod holding `token`: bearer token, the cluster's CA."""
    configuration = kubernetes.client.Configuration()
    configuration.host = cluster.server_url
    configuration.ssl_ca_cert = str(cluster.ca_path)
    configuration.api_key = {"authorization": f"Bearer {token}"}
    return configuration


def secret_data(cluster: Cluster, ns: str, name: str) -> dict[str, bytes]:
    data = get(cluster, "secret", "-n", ns, name)["data"]
    return {k: base64.b64decode(v) for k, v in data.items()}


def ca_bundles(cluster: Cluster, name: str) -> set[bytes]:
    found = set()
    for kind in ("validatingwebhookconfiguration", "mutatingwebhookconfiguration"):
        for hook in get(cluster, kind, name)["webhooks"]:
            found.add(base64.b64decode(hook["clientConfig"]["caBundle"]))
    return found


def pem_certs(data: bytes) -> list[x509.Certificate]:
    return x509.load_pem_x509_certificates(data)


@pytest.mark.kube_matrix
def test_default_mode_install_and_certificate_lifecycle(
    kube_cluster: Cluster, install: Install
) -> None:
    cluster = kube_cluster
    release = unique("dragate")
    ns = release
    # Pod Security "restricted" enforced: the ReplicaSet's Pods are refused unless hardened.
    cluster.apply(json.dumps(namespace(ns, {"pod-security.kubernetes.io/enforce": "restricted"})))
    notes = install(release, ns, "--wait=false")
    assert f"rollout status deployment/{release}" in notes  # NOTES.txt: how to verify
    assert "--dry-run=server" in notes and "dragate_certificate_expiry_timestamp_seconds" in notes

    assert f"rollout status deployment/{release}-controller" in notes
    replicas = {"webhook": 2, "controller": 1}
    for name, role in ((release, "webhook"), (f"{release}-controller", "controller")):
        assert get(cluster, "deployment", "-n", ns, name)["spec"]["replicas"] == replicas[role]
        get(cluster, "service", "-n", ns, name)
    get(cluster, "poddisruptionbudget", "-n", ns, release)
    hooks = get(cluster, "validatingwebhookconfiguration", release)["webhooks"]
    assert {h["clientConfig"]["service"]["name"] for h in hooks} == {release}

    def pods_created() -> bool:
        """Each role's ReplicaSet made its Pods (no kubelet runs them: nothing here needs
        `dragate serve --role` to work)."""
        return all(
            len(get(cluster, "pods", "-n", ns, "-l", f"app.kubernetes.io/instance={release},"
                    f"app.kubernetes.io/component={role}")["items"]) == count
            for role, count in replicas.items()
        )  # fmt: skip

    try:
        wait_for(pods_created, timeout=60, what="2 webhook and 1 controller Pods created")
    except TimeoutError:
        events = cluster.kubectl("get", "events", "-n", ns, "-o", "wide").stdout
        raise AssertionError(f"Pods were not created (Pod Security?):\n{events}") from None

    # The Helm-made certificate: caBundle = the Secret's bundle; the leaf chains to the CA.
    first = secret_data(cluster, ns, f"{release}-tls")
    assert ca_bundles(cluster, release) == {first["ca-bundle.crt"]}
    [ca] = pem_certs(first["ca.crt"])
    pem_certs(first["tls.crt"])[0].verify_directly_issued_by(ca)

    # A plain upgrade keeps everything (lookup), so the apiserver never loses trust.
    cluster.helm("upgrade", release, str(CHART), "-n", ns, "--reuse-values")
    assert secret_data(cluster, ns, f"{release}-tls") == first
    assert ca_bundles(cluster, release) == {first["ca-bundle.crt"]}

    # Renew: a new serving cert from the same CA; caBundle unchanged.
    cluster.helm("upgrade", release, str(CHART), "-n", ns, "--reuse-values",
                 "--set", "certs.helm.renew=true")  # fmt: skip
    renewed = secret_data(cluster, ns, f"{release}-tls")
    assert renewed["tls.crt"] != first["tls.crt"]
    assert renewed["ca.crt"] == first["ca.crt"]
    pem_certs(renewed["tls.crt"])[0].verify_directly_issued_by(ca)
    assert ca_bundles(cluster, release) == {first["ca-bundle.crt"]}

    # Rotate the CA: the bundle trusts old and new, so pods still serving the old cert work.
    rotate = ["--set", "certs.helm.renew=false", "--set", "certs.helm.rotateCA=true"]
    cluster.helm("upgrade", release, str(CHART), "-n", ns, "--reuse-values", *rotate)
    rotated = secret_data(cluster, ns, f"{release}-tls")
    [new_ca] = pem_certs(rotated["ca.crt"])
    assert new_ca != ca
    assert pem_certs(rotated["ca-bundle.crt"]) == [ca, new_ca]
    pem_certs(rotated["tls.crt"])[0].verify_directly_issued_by(new_ca)
    assert ca_bundles(cluster, release) == {rotated["ca-bundle.crt"]}
