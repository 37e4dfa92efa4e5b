"""The Helm chart in charts/dragate, rendered by the real helm binary of the e2e toolchain.

`helm lint` (also --strict), then `helm template` for the defaults and for each non-default
mode (cert-manager, url mode, NetworkPolicy, ServiceMonitor, git-sync, inline policies), parsed
and checked property by property. The matchConditions are evaluated with cel-python against
sample objects, so a wrong CEL expression fails here, not in a cluster. Installing the chart
into a real kube-apiserver is tests/e2e/test_helm_install.py.

helm missing: the tests FAIL with a message (build it with tests/e2e/toolchain/build.sh),
unless DRAGATE_SKIP_E2E=1, which skips them like the other toolchain tests.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import celpy
import pytest
import yaml
from admission.server_support import start
from cryptography import x509
from e2e.toolchain_bins import (
    SUPPORTED_MINORS,
    ToolchainMissing,
    require_binaries,
    toolchain_bin_dir,
)

from webhook.admission import metrics
from webhook.cli import serve
from webhook.kube.policyreports import REPORT_NAME
from webhook.rewrite import REWRITTEN_LABEL
from webhook.rewrite.admissionpolicy import NAME

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "dragate"
NAMESPACE = "dragate-system"
RELEASE = "dragate"
FULLNAME = "dragate"  # the release name contains the chart name

Doc = dict[str, Any]


# --- helm ----------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Helm]:
    if os.environ.get("DRAGATE_SKIP_E2E") == "1":
        pytest.skip("DRAGATE_SKIP_E2E=1: chart tests need the toolchain's helm")
    try:
        bin_dir = require_binaries(toolchain_bin_dir(), ("helm",))
    except ToolchainMissing as error:
        pytest.fail(str(error), pytrace=False)
    yield Helm(bin_dir / "helm", tmp_path_factory.mktemp("helm"))


class Helm:
    def __init__(self, binary: Path, home: Path) -> None:
        self.binary = binary
        self.home = home

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        env = {
            **os.environ,
            "HELM_CACHE_HOME": str(self.home / "cache"),
            "HELM_CONFIG_HOME": str(self.home / "config"),
            "HELM_DATA_HOME": str(self.home / "data"),
        }
        result = subprocess.run(
            [str(self.binary), *args], capture_output=True, text=True, env=env, timeout=120,
            check=False,
        )  # fmt: skip
        if check and result.returncode != 0:
            raise AssertionError(f"helm {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
        return result

    def values_args(self, values: dict[str, Any] | None) -> list[str]:
        if not values:
            return []
        path = self.home / f"values-{abs(hash(json.dumps(values, sort_keys=True)))}.json"
        path.write_text(json.dumps(values))
        return ["-f", str(path)]

    def template(self, values: dict[str, Any] | None = None, *extra: str) -> Rendered:
        result = self.run(
            "template", RELEASE, str(CHART), "--namespace", NAMESPACE,
            *self.values_args(values), *extra,
        )  # fmt: skip
        return Rendered([d for d in yaml.safe_load_all(result.stdout) if d])

    def template_error(self, values: dict[str, Any]) -> str:
        result = self.run(
            "template", RELEASE, str(CHART), "--namespace", NAMESPACE,
            *self.values_args(values), check=False,
        )  # fmt: skip
        assert result.returncode != 0, f"expected helm template to fail for {values}"
        return result.stderr


class Rendered:
    def __init__(self, docs: list[Doc]) -> None:
        self.docs = docs

    def kinds(self) -> list[str]:
        return sorted(d["kind"] for d in self.docs)

    def all(self, kind: str) -> list[Doc]:
        return [d for d in self.docs if d["kind"] == kind]

    def one(self, kind: str, name: str | None = None) -> Doc:
        found = [d for d in self.all(kind) if name is None or d["metadata"]["name"] == name]
        assert len(found) == 1, f"expected one {kind} {name or ''}, got {len(found)}"
        return found[0]

    def has(self, kind: str) -> bool:
        return bool(self.all(kind))


@pytest.fixture(scope="session")
def default(helm: Helm) -> Rendered:
    return helm.template()


URL_MODE = {
    "deployment": {"enabled": False},
    "webhook": {
        "url": "https://192.0.2.10:9443",
        "caBundle": base64.b64encode(b"-----BEGIN CERTIFICATE-----\n").decode(),
    },
}
NON_DEFAULT = {
    "certs": {"mode": "certManager"},
    "networkPolicy": {"enabled": True, "controlPlaneCIDRs": ["10.0.0.0/16", "172.16.0.0/12"]},
    "serviceMonitor": {"enabled": True, "labels": {"release": "prom"}},
    "prometheusRule": {"enabled": True},
    "deployment": {"replicas": 5, "preStopSleepSeconds": 5},
    "serve": {"maxConnections": 3000, "gracefulTimeoutSeconds": 20},
    "webhook": {"validating": {"failurePolicy": "Ignore", "timeoutSeconds": 5}},
}


def container(deployment: Doc, name: str = "dragate") -> Doc:
    found: Doc = next(c for c in deployment["spec"]["template"]["spec"]["containers"]
                      if c["name"] == name)  # fmt: skip
    return found


def flags(args: list[str]) -> dict[str, str]:
    """`--name=value` arguments as a dict (bare flags map to "")."""
    out = {}
    for arg in args:
        if arg.startswith("--"):
            name, _, value = arg[2:].partition("=")
            out[name] = value
    return out


def webhooks(rendered: Rendered) -> dict[str, Doc]:
    found = {}
    for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        for config in rendered.all(kind):
            for hook in config["webhooks"]:
                found[hook["name"]] = hook
    return found


# --- lint ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("strict", [False, True], ids=["lint", "lint-strict"])
def test_lint_default_values(helm: Helm, strict: bool) -> None:
    result = helm.run("lint", str(CHART), *(["--strict"] if strict else []))
    assert "0 chart(s) failed" in result.stdout


@pytest.mark.parametrize("values", [NON_DEFAULT, URL_MODE], ids=["non-default", "url-mode"])
def test_lint_strict_non_default_values(helm: Helm, values: dict[str, Any]) -> None:
    helm.run("lint", str(CHART), "--strict", *helm.values_args(values))


# --- kubeVersion ---------------------------------------------------------------------------------

OLDEST = min(SUPPORTED_MINORS, key=lambda minor: tuple(map(int, minor.split("."))))
BELOW_OLDEST = f"1.{int(OLDEST.split('.')[1]) - 1}.9"
KUBE_VERSIONS = [
    (BELOW_OLDEST, False),
    *((f"{minor}.0", True) for minor in SUPPORTED_MINORS),
]


@pytest.mark.parametrize(("kube_version", "installs"), KUBE_VERSIONS,
                         ids=[version for version, _ in KUBE_VERSIONS])  # fmt: skip
def test_kube_version_covers_the_minors_the_e2e_tests_run_on(
    helm: Helm, kube_version: str, installs: bool
) -> None:
    result = helm.run("template", RELEASE, str(CHART), "--namespace", NAMESPACE,
                      "--kube-version", kube_version, check=False)  # fmt: skip
    assert (result.returncode == 0) == installs, result.stderr
    if not installs:
        assert "kubeVersion" in result.stderr and ">=" in result.stderr, result.stderr


# --- default render ------------------------------------------------------------------------------


CLUSTER_SCOPED = ("ClusterRole", "ClusterRoleBinding", "ValidatingWebhookConfiguration",
                  "MutatingWebhookConfiguration")  # fmt: skip


def test_default_render_has_every_object(default: Rendered) -> None:
    assert default.kinds() == sorted([
        "ClusterRole", "ClusterRoleBinding", "ConfigMap", "Deployment",
        "MutatingWebhookConfiguration", "NetworkPolicy", "PodDisruptionBudget", "Role",
        "RoleBinding", "Secret", "Service", "ServiceAccount", "ValidatingWebhookConfiguration",
    ])  # fmt: skip
    for doc in default.docs:
        if doc["kind"] not in CLUSTER_SCOPED:
            assert doc["metadata"]["namespace"] == NAMESPACE, doc["kind"]
        assert doc["metadata"]["labels"]["app.kubernetes.io/instance"] == RELEASE


def test_deployment_is_highly_available(default: Rendered) -> None:
    deployment = default.one("Deployment")
    spec = deployment["spec"]
    pod = spec["template"]["spec"]
    assert spec["replicas"] == 3
    assert spec["strategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}
    assert pod["priorityClassName"] == "system-cluster-critical"
    anti = pod["affinity"]["podAntiAffinity"]
    preferred = anti["preferredDuringSchedulingIgnoredDuringExecution"]
    assert preferred[0]["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    selector = spec["selector"]["matchLabels"]
    assert preferred[0]["podAffinityTerm"]["labelSelector"]["matchLabels"] == selector
    spread = pod["topologySpreadConstraints"][0]
    assert spread["topologyKey"] == "topology.kubernetes.io/zone"
    assert spread["labelSelector"]["matchLabels"] == selector
    pdb = default.one("PodDisruptionBudget")
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"] == selector


def test_shutdown_outlasts_prestop_and_graceful_timeout(default: Rendered) -> None:
    pod = default.one("Deployment")["spec"]["template"]["spec"]
    dragate = container(default.one("Deployment"))
    pre_stop = dragate["lifecycle"]["preStop"]["sleep"]["seconds"]
    graceful = int(flags(dragate["args"])["graceful-timeout"])
    assert pre_stop > 0
    assert pod["terminationGracePeriodSeconds"] > pre_stop + graceful


def test_container_runs_dragate_serve_in_cluster(default: Rendered) -> None:
    dragate = container(default.one("Deployment"))
    assert dragate["image"] == "ghcr.io/dragate/dragate:" + chart_app_version()
    assert dragate["command"] == ["dragate"]
    assert dragate["args"][0] == "serve"
    args = flags(dragate["args"])
    assert args["in-cluster"] == ""
    assert args["port"] == "8443"
    assert args["host"] == "0.0.0.0"
    assert args["cert-dir"] == "/etc/dragate/tls"
    assert args["policies"].startswith("/etc/dragate/policies")
    assert args["max-connections"] == "10240"
    assert args["own-service-account"] == "$(POD_SERVICE_ACCOUNT)"
    env = {e["name"]: e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
           for e in dragate["env"]}  # fmt: skip
    assert env["POD_NAMESPACE"] == "metadata.namespace"
    assert env["POD_SERVICE_ACCOUNT"] == "spec.serviceAccountName"
    assert dragate["ports"] == [{"name": "https", "containerPort": 8443, "protocol": "TCP"}]
    assert dragate["resources"]["requests"]["cpu"]
    assert dragate["resources"]["limits"]["memory"]


def test_probes_use_https_health_endpoints(default: Rendered) -> None:
    dragate = container(default.one("Deployment"))
    live, ready = dragate["livenessProbe"]["httpGet"], dragate["readinessProbe"]["httpGet"]
    assert live == {"path": "/healthz", "port": "https", "scheme": "HTTPS"}
    assert ready == {"path": "/readyz", "port": "https", "scheme": "HTTPS"}


def test_pod_is_hardened(default: Rendered) -> None:
    pod = default.one("Deployment")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 65532
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    sc = container(default.one("Deployment"))["securityContext"]
    assert sc["runAsNonRoot"] is True
    assert sc["runAsUser"] == 65532
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["seccompProfile"] == {"type": "RuntimeDefault"}


def test_volumes_are_directory_mounts_and_memory_scratch(default: Rendered) -> None:
    pod = default.one("Deployment")["spec"]["template"]["spec"]
    for c in pod["containers"] + pod.get("initContainers", []):
        for mount in c["volumeMounts"]:
            assert "subPath" not in mount and "subPathExpr" not in mount, mount
    mounts = {m["mountPath"]: m for m in container(default.one("Deployment"))["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    for path in ("/tmp", "/dev/shm"):
        assert volumes[mounts[path]["name"]]["emptyDir"]["medium"] == "Memory"
    tls = volumes[mounts["/etc/dragate/tls"]["name"]]["secret"]
    assert tls["secretName"] == f"{FULLNAME}-tls"
    assert {i["key"] for i in tls["items"]} == {"tls.crt", "tls.key", "ca.crt"}  # never ca.key
    policies = volumes[mounts["/etc/dragate/policies"]["name"]]["configMap"]
    assert policies["name"] == f"{FULLNAME}-policies"
    assert all(m["readOnly"] for p, m in mounts.items() if p.startswith("/etc/dragate"))


def test_service_maps_443_to_the_https_port(default: Rendered) -> None:
    service = default.one("Service")
    assert service["spec"]["ports"] == [
        {"name": "https", "port": 443, "targetPort": "https", "protocol": "TCP"}
    ]
    selector = default.one("Deployment")["spec"]["selector"]["matchLabels"]
    assert service["spec"]["selector"] == selector


def rules_of(role: Doc) -> list[tuple[tuple[str, ...], ...]]:
    return sorted(
        tuple(tuple(sorted(rule.get(key, []))) for key in
              ("apiGroups", "resources", "resourceNames", "verbs"))
        for rule in role["rules"]
    )  # fmt: skip


def test_cluster_role_is_least_privilege(default: Rendered) -> None:
    """Exactly the API calls webhook/ is seen to make (KubeApi.request and the informers):
    GET one namespace; list+watch the five cached kinds; POST managed templates; GET, list,
    watch (the wanted ones), POST and PUT TenantUsages; list Pods (the audit and gangs' Pods),
    Jobs, JobSets and LeaderWorkerSets (the truth of gangs' holders); list the
    policy reports, applying and deleting only those named REPORT_NAME. No Secrets, ConfigMaps,
    webhook edits, and no policy objects while the policies come from files. Its one Lease only, in
    its own namespace (a Role)."""
    expected = [
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["list"]},
        {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"], "verbs": ["list"]},
        {"apiGroups": ["leaderworkerset.x-k8s.io"], "resources": ["leaderworkersets"],
         "verbs": ["list"]},
        {"apiGroups": ["resource.k8s.io"],
         "resources": ["resourceclaims", "resourceclaimtemplates", "deviceclasses",
                       "resourceslices"],
         "verbs": ["list", "watch"]},
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaimtemplates"],
         "verbs": ["create"]},
        {"apiGroups": ["dragate.io"], "resources": ["tenantusages"],
         "verbs": ["get", "list", "watch", "create", "update"]},
        {"apiGroups": ["wgpolicyk8s.io"], "resources": ["policyreports", "clusterpolicyreports"],
         "verbs": ["list"]},
        {"apiGroups": ["wgpolicyk8s.io"], "resources": ["policyreports", "clusterpolicyreports"],
         "resourceNames": [REPORT_NAME], "verbs": ["create", "patch", "delete"]},
    ]  # fmt: skip
    role = default.one("ClusterRole")
    assert rules_of(role) == rules_of({"rules": expected})
    for rule in role["rules"]:
        assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"]
    binding = default.one("ClusterRoleBinding")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": FULLNAME, "namespace": NAMESPACE}
    ]
    leases = default.one("Role")
    assert leases["metadata"]["namespace"] == NAMESPACE
    assert leases["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
         "resourceNames": ["dragate-leader"], "verbs": ["get", "update"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
    ]  # fmt: skip
    leases_binding = default.one("RoleBinding")
    assert leases_binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                         "name": leases["metadata"]["name"]}  # fmt: skip
    assert leases_binding["subjects"] == binding["subjects"]


POLICY_OBJECT_RULES = [
    {"apiGroups": ["dragate.io"],
     "resources": ["tenants", "deviceclasspolicies", "legacyresourcemappings", "settings"],
     "verbs": ["list", "watch"]},
    {"apiGroups": ["dragate.io"],
     "resources": ["tenants/status", "deviceclasspolicies/status",
                   "legacyresourcemappings/status", "settings/status"],
     "verbs": ["patch"]},
]  # fmt: skip


@pytest.mark.parametrize("source", ["cluster", "both"])
def test_policy_objects_as_a_source_grant_watch_and_status_only(
    helm: Helm, default: Rendered, source: str
) -> None:
    """list+watch on the four kinds and patches of their status subresource, never their
    spec; `serve` reads the objects (and the files too with `both`), and the policy kinds get
    a validating webhook that fails open."""
    rendered = helm.template({"policies": {"source": source}})
    added = [r for r in rendered.one("ClusterRole")["rules"]
             if r not in default.one("ClusterRole")["rules"]]  # fmt: skip
    assert added == POLICY_OBJECT_RULES
    for rule in added:
        assert "create" not in rule["verbs"] and "delete" not in rule["verbs"]
    args = container(rendered.one("Deployment"))["args"]
    assert "--no-policy-objects" in container(default.one("Deployment"))["args"]
    assert "--no-policy-objects" not in args
    assert any(a.startswith("--policies=") for a in args) is (source == "both")
    assert rendered.one("ConfigMap") == default.one("ConfigMap")
    hooks = {h["name"]: h for h in rendered.one("ValidatingWebhookConfiguration")["webhooks"]}
    policy_hook = hooks["policies.validate.dragate.io"]
    assert policy_hook["failurePolicy"] == "Ignore"
    assert policy_hook["rules"][0]["apiGroups"] == ["dragate.io"]
    default_hooks = default.one("ValidatingWebhookConfiguration")["webhooks"]
    assert "policies.validate.dragate.io" not in {h["name"] for h in default_hooks}
    files = helm.template({"policies": {"source": "files"}})
    assert files.one("ClusterRole") == default.one("ClusterRole")


def test_every_granted_verb_is_justified_in_the_readme(helm: Helm) -> None:
    readme = (CHART / "README.md").read_text()
    section = readme[readme.index("## RBAC") :]
    section = section[: section.index("\n## ", 1)]
    rendered = helm.template({"policies": {"source": "both"}})
    for rule in rendered.one("ClusterRole")["rules"] + rendered.one("Role")["rules"]:
        for resource in rule["resources"]:
            for verb in rule["verbs"]:
                assert f"| `{resource}` | `{verb}` |" in section, (resource, verb)


def test_keeping_the_rewrite_policy_adds_the_flag_and_one_named_rule(
    helm: Helm, default: Rendered
) -> None:
    """Off by default; on, serve keeps the policy, and RBAC grants exactly the calls the
    keeper makes (webhook/kube/policykeeper.py: GET, server-side apply, DELETE), by name."""
    assert "keep-rewrite-policy" not in flags(container(default.one("Deployment"))["args"])
    kept = helm.template({"rewritePolicy": {"keep": True}})
    assert "keep-rewrite-policy" in flags(container(kept.one("Deployment"))["args"])
    added = [
        r for r in kept.one("ClusterRole")["rules"] if r not in default.one("ClusterRole")["rules"]
    ]
    assert added == [
        {
            "apiGroups": ["admissionregistration.k8s.io"],
            "resources": ["mutatingadmissionpolicies", "mutatingadmissionpolicybindings"],
            "resourceNames": [NAME],
            "verbs": ["get", "create", "patch", "delete"],
        }
    ]
    readme = (CHART / "README.md").read_text()
    section = readme[readme.index("## RBAC") :]
    for resource in added[0]["resources"]:
        for verb in added[0]["verbs"]:
            assert f"| `{resource}` | `{verb}` |" in section, (resource, verb)


@pytest.mark.parametrize(("grants", "flag"), [(True, False), (False, True)],
                         ids=["quota-grants-default", "quota-grants-off"])  # fmt: skip
def test_quota_grants_value_reaches_serve(helm: Helm, grants: bool, flag: bool) -> None:
    rendered = helm.template({"serve": {"quotaGrants": grants}})
    args = flags(container(rendered.one("Deployment"))["args"])
    assert ("no-quota-grants" in args) is flag
    assert "quota-grants" not in args  # on is serve's own default


def test_max_body_bytes_is_the_documented_three_mib(default: Rendered) -> None:
    from webhook.admission.config import DEFAULT_MAX_BODY_BYTES

    args = flags(container(default.one("Deployment"))["args"])
    assert int(args["max-body-bytes"]) == DEFAULT_MAX_BODY_BYTES == 3 * 1024 * 1024


# --- webhook configurations ----------------------------------------------------------------------

EXPECTED_RULES = {
    "pods.validate.dragate.io": [
        {"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
         "resources": ["pods"], "scope": "Namespaced"}],
    "rewritten-pods.validate.dragate.io": [
        {"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
         "resources": ["pods"], "scope": "Namespaced"}],
    "claims.validate.dragate.io": [
        {"operations": ["CREATE", "UPDATE"], "apiGroups": ["resource.k8s.io"],
         "apiVersions": ["v1"],
         "resources": ["resourceclaims", "resourceclaimtemplates"], "scope": "Namespaced"}],
    "gangs.validate.dragate.io": [
        {"operations": ["CREATE", "UPDATE"], "apiGroups": ["batch"], "apiVersions": ["v1"],
         "resources": ["jobs"], "scope": "Namespaced"},
        {"operations": ["CREATE", "UPDATE"], "apiGroups": ["jobset.x-k8s.io"],
         "apiVersions": ["v1alpha2"], "resources": ["jobsets"], "scope": "Namespaced"},
        {"operations": ["CREATE", "UPDATE"], "apiGroups": ["leaderworkerset.x-k8s.io"],
         "apiVersions": ["v1"], "resources": ["leaderworkersets"], "scope": "Namespaced"}],
    "namespaces.validate.dragate.io": [
        {"operations": ["CREATE", "UPDATE"], "apiGroups": [""], "apiVersions": ["v1"],
         "resources": ["namespaces"], "scope": "Cluster"}],
    "pods.mutate.dragate.io": [
        {"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
         "resources": ["pods"], "scope": "Namespaced"}],
}  # fmt: skip


def test_webhook_configurations(default: Rendered) -> None:
    validating = default.one("ValidatingWebhookConfiguration", FULLNAME)
    mutating = default.one("MutatingWebhookConfiguration", FULLNAME)
    hooks = webhooks(default)
    assert set(hooks) == set(EXPECTED_RULES)
    assert [h["name"] for h in mutating["webhooks"]] == ["pods.mutate.dragate.io"]
    assert len(validating["webhooks"]) == 5
    for name, hook in hooks.items():
        mutate = name.endswith(".mutate.dragate.io")
        assert hook["rules"] == EXPECTED_RULES[name], name
        assert hook["admissionReviewVersions"] == ["v1"]
        assert hook["matchPolicy"] == "Equivalent"
        assert hook["sideEffects"] == "NoneOnDryRun"
        assert hook["timeoutSeconds"] == (2 if mutate else 3)
        assert hook["failurePolicy"] == ("Ignore" if mutate else "Fail")
        assert hook.get("reinvocationPolicy") == ("IfNeeded" if mutate else None)
        assert hook["clientConfig"]["service"] == {
            "name": FULLNAME, "namespace": NAMESPACE, "port": 443,
            "path": "/mutate" if mutate else "/validate",
        }  # fmt: skip
        # No subresource is ever sent (pods/status, pods/resize, pods/ephemeralcontainers).
        for rule in hook["rules"]:
            assert not any("/" in r or r == "*" for r in rule["resources"]), rule
        assert hook["namespaceSelector"] == {"matchExpressions": [{
            "key": "kubernetes.io/metadata.name", "operator": "NotIn",
            "values": [NAMESPACE, "kube-system"],
        }]}  # fmt: skip


def test_pods_meet_one_validating_entry_by_the_rewrite_s_label(default: Rendered) -> None:
    """The rewrite labels a Pod (REWRITTEN_LABEL); the two Pod entries split on that key, so
    every Pod meets exactly one, and a rewritten Pod's entry has no matchConditions (no CEL in
    the API server). The mutating webhook keeps seeing labelled Pods: a later webhook may add
    a legacy container that the reinvocation round rewrites."""
    hooks = webhooks(default)
    plain, rewritten = (
        hooks["pods.validate.dragate.io"],
        hooks["rewritten-pods.validate.dragate.io"],
    )
    on_label = [{"key": REWRITTEN_LABEL, "operator": operator} for operator in ("DoesNotExist",
                                                                             "Exists")]  # fmt: skip
    assert [plain["objectSelector"], rewritten["objectSelector"]] == [
        {"matchExpressions": [expression]} for expression in on_label
    ]
    assert "matchConditions" not in rewritten
    assert {k: v for k, v in rewritten.items() if k not in ("name", "objectSelector")} == {
        k: v for k, v in plain.items() if k not in ("name", "objectSelector", "matchConditions")
    }
    assert "objectSelector" not in hooks["pods.mutate.dragate.io"]
    # A rewritten Pod would meet every condition of the other entry: it has claims, and it is
    # a CREATE by a user (dragate creates no Pods).
    rewritten_pod = pod(BARE, claims=True)
    assert all_match(plain, rewritten_pod)


def test_ca_bundle_is_the_secret_ca_and_signs_the_serving_cert(default: Rendered) -> None:
    secret = default.one("Secret", f"{FULLNAME}-tls")
    assert secret["type"] == "kubernetes.io/tls"
    data = {k: base64.b64decode(v) for k, v in secret["data"].items()}
    assert set(data) == {"ca.crt", "ca.key", "tls.crt", "tls.key", "ca-bundle.crt"}
    bundles = {base64.b64decode(h["clientConfig"]["caBundle"]) for h in webhooks(default).values()}
    assert bundles == {data["ca-bundle.crt"]}
    ca = x509.load_pem_x509_certificate(data["ca.crt"])
    leaf = x509.load_pem_x509_certificate(data["tls.crt"])
    leaf.verify_directly_issued_by(ca)
    names = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert f"{FULLNAME}.{NAMESPACE}.svc" in names.get_values_for_type(x509.DNSName)


# --- matchConditions: compiled and evaluated with cel-python -------------------------------------


def evaluate(expression: str, **activation: Any) -> bool:
    env = celpy.Environment()
    program = env.program(env.compile(expression))
    return bool(program.evaluate({k: celpy.json_to_cel(v) for k, v in activation.items()}))


def conditions(hook: Doc) -> dict[str, str]:
    return {c["name"]: c["expression"] for c in hook.get("matchConditions", ())}


def all_match(hook: Doc, obj: Any, old: Any = None, *, operation: str = "CREATE",
              user: str = "alice", groups: list[str] | None = None) -> bool:  # fmt: skip
    request = {"operation": operation, "userInfo": {"username": user, "groups": groups or []}}
    return all(evaluate(e, object=obj, oldObject=old, request=request)
               for e in conditions(hook).values())  # fmt: skip


def pod(*containers: Doc, claims: bool = False, init: list[Doc] | None = None) -> Doc:
    spec: Doc = {"containers": list(containers)}
    if claims:
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
    if init:
        spec["initContainers"] = init
    return {"apiVersion": "v1", "kind": "Pod", "spec": spec}


PLAIN = {"name": "app", "image": "busybox", "resources": {"limits": {"cpu": "1"}}}
BARE = {"name": "app", "image": "busybox"}
LEGACY = {"name": "train", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": "2"}}}
MIG = {"name": "nb", "image": "cuda", "resources": {"requests": {"nvidia.com/mig-1g.10gb": "1"}}}


def test_match_conditions_compile_and_select_gpu_pods(default: Rendered) -> None:
    hooks = webhooks(default)
    validate, mutate = hooks["pods.validate.dragate.io"], hooks["pods.mutate.dragate.io"]
    names = {"gpu-pod", "not-control-plane-update", "not-dragate-itself"}
    assert set(conditions(validate)) == names
    for hook in (validate, mutate):
        assert all_match(hook, pod(LEGACY))
        assert all_match(hook, pod(PLAIN, MIG))
        assert all_match(hook, pod(BARE, init=[LEGACY]))
        assert not all_match(hook, pod(PLAIN))
        assert not all_match(hook, pod(BARE))
    # DRA pods are validated (quota) but never mutated (nothing to rewrite): after a rewrite
    # the Pod no longer matches, so a reinvocation round skips the call.
    assert all_match(validate, pod(BARE, claims=True))
    assert not all_match(mutate, pod(BARE, claims=True))


def workload(kind: str, pod_spec: Doc) -> Doc:
    """A gang kind's workload whose every pod template but one is CPU-only."""
    template, cpu = {"spec": pod_spec}, {"spec": pod(PLAIN)["spec"]}
    spec = {
        "Job": {"parallelism": 4, "template": template},
        "JobSet": {"replicatedJobs": [{"template": {"spec": {"template": cpu}}},
                                      {"template": {"spec": {"template": template}}}]},
        "LeaderWorkerSet": {"leaderWorkerTemplate": {"leaderTemplate": cpu,
                                                     "workerTemplate": template}},
    }[kind]  # fmt: skip
    return {"kind": kind, "spec": spec}


@pytest.mark.parametrize("kind", ["Job", "JobSet", "LeaderWorkerSet"])
def test_match_conditions_send_gangs_that_can_hold_devices(default: Rendered, kind: str) -> None:
    hook = webhooks(default)["gangs.validate.dragate.io"]
    assert set(conditions(hook)) == {"gpu-workload", "not-control-plane-update",
                                     "not-dragate-itself"}  # fmt: skip

    def sent(pod_spec: Doc, **options: Any) -> bool:
        obj = workload(kind, pod_spec)
        request = {
            "kind": {"kind": kind},
            "operation": options.get("operation", "CREATE"),
            "userInfo": {"username": options.get("user", "alice"), "groups": []},
        }
        return all(evaluate(e, object=obj, oldObject=obj, request=request)
                   for e in conditions(hook).values())  # fmt: skip

    assert sent(pod(LEGACY)["spec"]) and sent(pod(BARE, claims=True)["spec"])
    assert sent(pod(BARE, init=[MIG])["spec"])
    assert not sent(pod(PLAIN)["spec"])
    assert sent(pod(LEGACY)["spec"], operation="UPDATE")  # unsuspended or scaled
    assert not sent(pod(LEGACY)["spec"], operation="UPDATE", user="system:kube-controller-manager")


def test_match_conditions_skip_control_plane_updates_only(default: Rendered) -> None:
    claims = webhooks(default)["claims.validate.dragate.io"]
    claim = {"kind": "ResourceClaim", "spec": {}}
    controller = "system:serviceaccount:kube-system:resource-claim-controller"
    # The resourceclaim controller's CREATEs consume the Pod's reservation: always sent.
    assert all_match(claims, claim, user=controller)
    assert not all_match(claims, claim, claim, operation="UPDATE", user=controller)
    assert not all_match(claims, claim, claim, operation="UPDATE", user="system:node:n1",
                         groups=["system:nodes", "system:authenticated"])  # fmt: skip
    assert all_match(claims, claim, claim, operation="UPDATE", user="alice")
    own = f"system:serviceaccount:{NAMESPACE}:{FULLNAME}"
    assert not all_match(claims, claim, user=own)


def test_match_conditions_send_namespaces_only_for_admin_access(default: Rendered) -> None:
    hook = webhooks(default)["namespaces.validate.dragate.io"]
    label = "resource.kubernetes.io/admin-access"

    def ns(labels: dict[str, str] | None) -> Doc:
        meta: Doc = {"name": "team-a"}
        if labels is not None:
            meta["labels"] = labels
        return {"kind": "Namespace", "metadata": meta}

    assert all_match(hook, ns({label: "true"}))
    assert not all_match(hook, ns({"team": "a"}))
    assert not all_match(hook, ns(None))
    # Removing the label is involved too (oldObject has it).
    assert all_match(hook, ns({}), ns({label: "true"}), operation="UPDATE")
    assert not all_match(hook, ns({"x": "1"}), ns({"x": "2"}), operation="UPDATE")


def test_gpu_resource_prefixes_come_from_values(helm: Helm) -> None:
    rendered = helm.template({"webhook": {"gpuResourcePrefixes": ["nvidia.com/", "amd.com/"]}})
    hook = webhooks(rendered)["pods.mutate.dragate.io"]
    amd = {"name": "a", "resources": {"limits": {"amd.com/gpu": "1"}}}
    assert all_match(hook, pod(amd))
    assert all_match(hook, pod(LEGACY))


# --- policies ------------------------------------------------------------------------------------


def test_chart_policy_files_are_a_copy_of_the_repository_policies() -> None:
    repo = {p.name: p.read_bytes() for p in (REPO / "policies").glob("*.yaml")}
    chart = {p.name: p.read_bytes() for p in (CHART / "files" / "policies").glob("*.yaml")}
    assert repo, "no policies/*.yaml in the repository"
    assert chart == repo, "charts/dragate/files/policies differs from policies/: copy them over"


def test_policy_configmap_holds_the_chart_files(default: Rendered) -> None:
    data = default.one("ConfigMap", f"{FULLNAME}-policies")["data"]
    files = {p.name: p.read_text() for p in (CHART / "files" / "policies").glob("*.yaml")}
    assert data == files


def test_inline_policies_replace_the_files(helm: Helm) -> None:
    text = "apiVersion: dragate.io/v1alpha1\nkind: Settings\nmetadata: {name: cluster}\nspec: {}\n"
    rendered = helm.template({"policies": {"inline": {"settings.yaml": text}}})
    assert rendered.one("ConfigMap")["data"] == {"settings.yaml": text}


def test_existing_configmap_for_gitops(helm: Helm) -> None:
    rendered = helm.template({"policies": {"existingConfigMap": "policies-from-git"}})
    assert not rendered.has("ConfigMap")
    volumes = rendered.one("Deployment")["spec"]["template"]["spec"]["volumes"]
    assert {"name": "policies", "configMap": {"name": "policies-from-git"}} in volumes


def test_git_sync_sidecar(helm: Helm) -> None:
    rendered = helm.template({"policies": {"gitSync": {
        "enabled": True, "repo": "https://git.example.com/platform/gpu-policies.git",
        "ref": "v3", "subPath": "clusters/prod"}}})  # fmt: skip
    assert not rendered.has("ConfigMap")
    pod = rendered.one("Deployment")["spec"]["template"]["spec"]
    assert [c["name"] for c in pod["initContainers"]] == ["git-sync-init"]
    assert "--one-time" in pod["initContainers"][0]["args"]
    sidecar = container(rendered.one("Deployment"), "git-sync")
    assert "--ref=v3" in sidecar["args"] and "--one-time" not in sidecar["args"]
    assert sidecar["securityContext"]["readOnlyRootFilesystem"] is True
    args = flags(container(rendered.one("Deployment"))["args"])
    assert args["policies"] == "/etc/dragate/git/current/clusters/prod"


# --- non-default modes ---------------------------------------------------------------------------


def test_non_default_values(helm: Helm) -> None:
    rendered = helm.template(NON_DEFAULT)
    deployment = rendered.one("Deployment")
    pod = deployment["spec"]["template"]["spec"]
    args = flags(container(deployment)["args"])
    assert deployment["spec"]["replicas"] == 5
    assert (args["max-connections"], args["graceful-timeout"]) == ("3000", "20")
    assert pod["terminationGracePeriodSeconds"] > 5 + 20
    hooks = webhooks(rendered)
    assert hooks["claims.validate.dragate.io"]["failurePolicy"] == "Ignore"
    assert hooks["claims.validate.dragate.io"]["timeoutSeconds"] == 5


def test_cert_manager_mode(helm: Helm) -> None:
    rendered = helm.template(NON_DEFAULT)
    assert not rendered.has("Secret")
    issuers = {i["metadata"]["name"]: i["spec"] for i in rendered.all("Issuer")}
    assert issuers == {f"{FULLNAME}-selfsigned": {"selfSigned": {}},
                       f"{FULLNAME}-ca": {"ca": {"secretName": f"{FULLNAME}-ca"}}}  # fmt: skip
    certs = {c["metadata"]["name"]: c["spec"] for c in rendered.all("Certificate")}
    assert certs[f"{FULLNAME}-ca"]["isCA"] is True
    serving = certs[f"{FULLNAME}-serving"]
    assert serving["secretName"] == f"{FULLNAME}-tls"
    assert serving["issuerRef"]["name"] == f"{FULLNAME}-ca"
    assert f"{FULLNAME}.{NAMESPACE}.svc" in serving["dnsNames"]
    for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        config = rendered.one(kind)
        assert config["metadata"]["annotations"] == {
            "cert-manager.io/inject-ca-from": f"{NAMESPACE}/{FULLNAME}-serving"
        }
        for hook in config["webhooks"]:
            assert "caBundle" not in hook["clientConfig"]  # cainjector owns it
    pod = rendered.one("Deployment")["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["tls"]["secret"]["secretName"] == f"{FULLNAME}-tls"


KUBE_SYSTEM = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name":
                                                      "kube-system"}}}  # fmt: skip


PROMETHEUS = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name":
                                                      "monitoring"}}}  # fmt: skip


@pytest.mark.parametrize(("values", "peers"), [
    ({}, None),
    ({"controlPlaneCIDRs": ["10.0.0.0/16"]}, [{"ipBlock": {"cidr": "10.0.0.0/16"}}]),
    ({"allowKubeSystem": True}, [KUBE_SYSTEM]),
    ({"controlPlaneCIDRs": ["10.0.0.0/16", "172.16.0.0/12"], "allowKubeSystem": True},
     [{"ipBlock": {"cidr": "10.0.0.0/16"}}, {"ipBlock": {"cidr": "172.16.0.0/12"}}, KUBE_SYSTEM]),
    ({"controlPlaneCIDRs": ["10.0.0.0/16"], "extraFrom": [PROMETHEUS]},
     [{"ipBlock": {"cidr": "10.0.0.0/16"}}, PROMETHEUS]),
    ({"controlPlaneCIDRs": ["10.0.0.0/16"], "allowFromAnywhere": True}, None),
], ids=["default-open", "cidrs", "kube-system", "cidrs-and-kube-system", "cidrs-and-extra",
        "anywhere"])  # fmt: skip
def test_network_policy_admits_the_control_plane_once_it_is_named(
    helm: Helm, values: dict[str, Any], peers: list[Doc] | None
) -> None:
    """Open by default: an apiserver on the host network (kubeadm, k3s) matches no pod or
    namespace selector, and the validating webhook fails closed, so a default that admitted
    only kube-system would block every GPU Pod there. Naming the control plane narrows it."""
    policy = helm.template({"networkPolicy": values}).one("NetworkPolicy")
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    [rule] = policy["spec"]["ingress"]
    assert rule["ports"] == [{"port": "https", "protocol": "TCP"}]
    assert rule.get("from") == peers


def test_client_ca_turns_on_mtls(helm: Helm) -> None:
    rendered = helm.template({"serve": {"clientCA": {"configMap": "apiserver-client-ca"}}})
    pod = rendered.one("Deployment")["spec"]["template"]["spec"]
    dragate = container(rendered.one("Deployment"))
    assert flags(dragate["args"])["client-ca"] == "/etc/dragate/client-ca/ca.crt"
    assert {"name": "client-ca", "mountPath": "/etc/dragate/client-ca", "readOnly": True} in (
        dragate["volumeMounts"])  # fmt: skip
    assert {"name": "client-ca", "configMap": {"name": "apiserver-client-ca"}} in pod["volumes"]
    assert "client-ca" not in flags(container(helm.template().one("Deployment"))["args"])


def test_service_monitor_scrapes_https_metrics(helm: Helm) -> None:
    rendered = helm.template(NON_DEFAULT)
    monitor = rendered.one("ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "prom"
    [endpoint] = monitor["spec"]["endpoints"]
    where = (endpoint["port"], endpoint["path"], endpoint["scheme"])
    assert where == ("https", "/metrics", "https")
    assert endpoint["tlsConfig"]["ca"]["secret"] == {"name": f"{FULLNAME}-tls", "key": "ca.crt"}
    rule = rendered.one("PrometheusRule")
    exprs = [r["expr"] for g in rule["spec"]["groups"] for r in g["rules"]]
    assert any("dragate_certificate_expiry_timestamp_seconds" in e for e in exprs)
    assert any("apiserver_admission_webhook_fail_open_count" in e for e in exprs)


def test_offline_serving_with_one_replica_renders(helm: Helm) -> None:
    rendered = helm.template({"serve": {"inCluster": False}, "deployment": {"replicas": 1}})
    deployment = rendered.one("Deployment")
    assert deployment["spec"]["replicas"] == 1
    assert "in-cluster" not in flags(container(deployment)["args"])


def test_url_mode(helm: Helm) -> None:
    rendered = helm.template(URL_MODE)
    for kind in ("Deployment", "Service", "PodDisruptionBudget", "Secret"):
        assert not rendered.has(kind), kind
    assert rendered.has("ConfigMap") and rendered.has("ClusterRole")
    for name, hook in webhooks(rendered).items():
        path = "/mutate" if name.endswith(".mutate.dragate.io") else "/validate"
        assert hook["clientConfig"] == {
            "url": "https://192.0.2.10:9443" + path, "caBundle": URL_MODE["webhook"]["caBundle"],
        }  # fmt: skip


@pytest.mark.parametrize(("values", "own"), [
    ({}, f"system:serviceaccount:{NAMESPACE}:{FULLNAME}"),
    (URL_MODE, f"system:serviceaccount:{NAMESPACE}:{FULLNAME}"),
    ({**URL_MODE, "webhook": {**URL_MODE["webhook"], "ownUsername": "dragate-dev"}}, "dragate-dev"),
], ids=["service-account", "url-mode-default", "url-mode-own-user"])  # fmt: skip
def test_dragate_s_own_requests_skip_every_webhook(helm: Helm, values: dict[str, Any],
                                                   own: str) -> None:  # fmt: skip
    """The templates dragate creates while rewriting a Pod never come back to it: in url mode
    its kubeconfig user is named by `webhook.ownUsername`, else the chart's service account."""
    hooks = webhooks(helm.template(values))
    named = {n for n, hook in hooks.items() if "not-dragate-itself" in conditions(hook)}
    assert {"pods.validate.dragate.io", "claims.validate.dragate.io"} <= named
    for name in named:
        expression = conditions(hooks[name])["not-dragate-itself"]
        for user, sent in ((own, False), ("alice", True), (f"{own}-other", True)):
            assert evaluate(expression, request={"userInfo": {"username": user}}) is sent, name


# --- values that must be refused -----------------------------------------------------------------


@pytest.mark.parametrize(("values", "message"), [
    ({"replica": 3}, "additional properties 'replica' not allowed"),
    ({"deployment": {"replicaCount": 3}}, "additional properties 'replicaCount' not allowed"),
    ({"webhook": {"validating": {"failurePolicy": "fail"}}}, "failurePolicy"),
    ({"webhook": {"mutating": {"timeoutSeconds": 31}}}, "timeoutSeconds"),
    ({"certs": {"mode": "cert-manager"}}, "mode"),
    ({"webhook": {"gpuResourcePrefixes": ["nvidia.com/' || true || '"]}}, "gpuResourcePrefixes"),
    ({"webhook": {"ownUsername": "x' || true || '"}}, "ownUsername"),
    ({"policies": {"source": "git"}}, "source"),
], ids=["top-level-typo", "nested-typo", "failure-policy-case", "timeout-range", "cert-mode",
        "cel-injection", "own-user-cel-injection", "policy-source"])  # fmt: skip
def test_schema_rejects_bad_values(helm: Helm, values: dict[str, Any], message: str) -> None:
    assert message in helm.template_error(values)


@pytest.mark.parametrize(("values", "message"), [
    ({"webhook": {"url": "https://10.0.0.1:8443", "caBundle": "QUJD"}}, "deployment.enabled=false"),
    ({"deployment": {"enabled": False}, "webhook": {"url": "https://h:1"}}, "caBundle"),
    ({"deployment": {"enabled": False}}, "needs webhook.url"),
    ({"deployment": {"terminationGracePeriodSeconds": 30}}, "must be larger than"),
    ({"certs": {"mode": "secret"}}, "webhook.caBundle"),
    ({"networkPolicy": {"extraFrom": [PROMETHEUS]}}, "networkPolicy.extraFrom adds peers"),
    ({"serve": {"inCluster": False}},
     "serve.inCluster=false with deployment.replicas=3: each replica would keep its own quota"),
    ({"serve": {"inCluster": False}, "deployment": {"replicas": 2}}, "deployment.replicas=2"),
    ({"serve": {"inCluster": False}, "deployment": {"replicas": 1},
      "rewritePolicy": {"keep": True}}, "rewritePolicy.keep=true needs serve.inCluster=true"),
    ({"serve": {"inCluster": False}, "deployment": {"replicas": 1},
      "policies": {"source": "cluster"}}, "policies.source=cluster needs serve.inCluster=true"),
], ids=["url-with-deployment", "url-without-ca", "nothing-serves", "grace-too-short",
        "secret-without-ca", "extra-peers-without-control-plane", "offline-replicas",
        "offline-two-replicas", "keep-offline",
        "objects-offline"])  # fmt: skip
def test_inconsistent_modes_fail_with_a_message(helm: Helm, values: dict[str, Any],
                                                message: str) -> None:  # fmt: skip
    assert message in helm.template_error(values)


# --- CRD -----------------------------------------------------------------------------------------


def test_tenant_usage_crd() -> None:
    crd = yaml.safe_load((CHART / "crds" / "tenantusages.yaml").read_text())
    assert crd["metadata"]["name"] == "tenantusages.dragate.io"
    assert crd["spec"]["scope"] == "Cluster"
    [version] = crd["spec"]["versions"]
    assert version["name"] == "v1alpha1" and version["storage"] and version["served"]
    holder = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["holders"][
        "additionalProperties"]  # fmt: skip
    assert holder["properties"]["devices"]["additionalProperties"]["type"] == "integer"
    assert holder["properties"]["expiresAt"]["type"] == "number"


def test_chart_crds_are_a_copy_of_the_package_s() -> None:
    canonical = {p.name: p.read_bytes() for p in (REPO / "webhook/defaults/crds").glob("*.yaml")}
    chart = {p.name: p.read_bytes() for p in (CHART / "crds").glob("*.yaml")}
    assert chart == canonical, (
        "charts/dragate/crds differs from webhook/defaults/crds: run "
        "`dragate crds --write webhook/defaults/crds --write charts/dragate/crds`"
    )


def test_the_chart_installs_every_crd(helm: Helm) -> None:
    from webhook.policy.policycrds import crd_texts

    rendered = helm.template(None, "--include-crds")
    installed = sorted(d["metadata"]["name"] for d in rendered.all("CustomResourceDefinition"))
    shipped = sorted(yaml.safe_load(text)["metadata"]["name"] for text in crd_texts().values())
    assert installed == shipped
    assert {
        "tenants.dragate.io",
        "deviceclasspolicies.dragate.io",
        "settings.dragate.io",
        "legacyresourcemappings.dragate.io",
        "tenantusages.dragate.io",
        "policyreports.wgpolicyk8s.io",
        "clusterpolicyreports.wgpolicyk8s.io",
    } == set(installed)


def chart_app_version() -> str:
    match = re.search(r'^appVersion:\s*"?([^"\n]+)"?', (CHART / "Chart.yaml").read_text(), re.M)
    assert match
    return match.group(1)


def test_every_serve_flag_the_chart_passes_exists(default: Rendered) -> None:
    """The chart and `dragate serve` are built by different hands: keep them in step."""
    from webhook.cli.serve import command

    known = {opt for param in command.params for opt in [*param.opts, *param.secondary_opts]}
    passed = {arg.partition("=")[0] for arg in container(default.one("Deployment"))["args"][1:]}
    assert passed <= known, f"flags unknown to `dragate serve`: {sorted(passed - known)}"


# --- NOTES.txt -----------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def notes_chart(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the chart whose NOTES.txt also renders as a template (`helm template` leaves
    NOTES out): one document, `text` holding what `helm install` prints."""
    copy = tmp_path_factory.mktemp("notes") / "dragate"
    shutil.copytree(CHART, copy)
    notes = (CHART / "templates" / "NOTES.txt").read_text()
    (copy / "templates" / "notes-for-tests.yaml").write_text(
        '{{- define "notesForTests" }}' + notes + "{{- end }}\nkind: Notes\n"
        'text: {{ include "notesForTests" . | toJson }}\n'
    )
    return copy


def notes(helm: Helm, chart: Path, values: dict[str, Any] | None = None) -> str:
    result = helm.run(
        "template", RELEASE, str(chart), "--namespace", NAMESPACE,
        "--show-only", "templates/notes-for-tests.yaml", *helm.values_args(values),
    )  # fmt: skip
    text: str = yaml.safe_load(result.stdout)["text"]
    return text


def test_notes_in_url_mode_say_what_runs_where(helm: Helm, notes_chart: Path) -> None:
    """Nothing of dragate runs in the cluster: no certificate from Helm, no ConfigMap read;
    the dragate at the URL is started on the URL's port, with its policies and a kubeconfig."""
    text = notes(helm, notes_chart, URL_MODE)
    assert "nothing\n   of dragate runs in the cluster" in text
    assert "dragate serve --host 0.0.0.0 --port 9443 --dns-name 192.0.2.10" in text
    assert "--policies DIR --kubeconfig FILE" in text
    assert "webhook.ownUsername is empty" in text
    assert "Certificates: made by Helm" not in text
    assert "ConfigMap dragate-policies; changes are hot-reloaded" not in text
    assert "The ConfigMap dragate-policies holds the chart's copy; nothing reads it." in text
    assert "rollout status" not in text and "port-forward" not in text
    assert "cainjector" not in notes(
        helm, notes_chart, {**URL_MODE, "certs": {"mode": "certManager"}}
    )
    own = {**URL_MODE, "webhook": {**URL_MODE["webhook"], "ownUsername": "dragate-dev"}}
    assert "webhook.ownUsername is empty" not in notes(helm, notes_chart, own)


def test_notes_serve_line_passes_only_flags_serve_accepts(helm: Helm, notes_chart: Path) -> None:
    """The url-mode `dragate serve` line names the release's namespace as dragate's own (the
    Lease that lets it confirm and release quota holders is there), and every flag it passes
    is one `dragate serve` accepts, with a value where the flag takes one."""
    text = notes(helm, notes_chart, URL_MODE)
    (line,) = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("dragate serve ")]
    words = line.split()[2:]
    options = {o: not p.is_flag for p in serve.command.params for o in p.opts}  # type: ignore[attr-defined]
    at = 0
    while at < len(words):
        assert words[at] in options, f"dragate serve has no {words[at]}: {line}"
        at += 2 if options[words[at]] else 1
    assert f"--own-namespace {NAMESPACE}" in line
    readme = (CHART / "README.md").read_text()
    assert "--own-namespace dragate-dev" in readme


def test_notes_in_cluster_mode(helm: Helm, notes_chart: Path) -> None:
    text = notes(helm, notes_chart)
    assert f"rollout status deployment/{FULLNAME}" in text
    assert "Policies: ConfigMap dragate-policies; changes are hot-reloaded" in text
    assert "Certificates: made by Helm" in text
    assert "Network: the webhook port is open to every pod" in text
    narrowed = notes(helm, notes_chart, {"networkPolicy": {"controlPlaneCIDRs": ["10.0.0.0/8"]}})
    assert "Network:" not in narrowed
    both = notes(helm, notes_chart, {"policies": {"source": "both"}})
    assert "objects together with the files above" in both
    objects = notes(helm, notes_chart, {"policies": {"source": "cluster"}})
    assert "dragate enforces the Tenant" in objects and "together with" not in objects
    assert "Policy objects" not in text


def test_client_names_become_client_name_flags(helm: Helm) -> None:
    values = {"clientCA": {"configMap": "cluster-ca", "names": ["apiserver", "kube-apiserver"]}}
    args = container(helm.template({"serve": values}).one("Deployment"))["args"]
    assert [a for a in args if a.startswith("--client-name=")] == [
        "--client-name=apiserver",
        "--client-name=kube-apiserver",
    ]
    assert not any(a.startswith("--client-name") for a in container(
        helm.template().one("Deployment"))["args"])  # fmt: skip


# --- monitoring -----------------------------------------------------------------------------

MONITORING = {"prometheusRule": {"enabled": True}, "grafanaDashboard": {"enabled": True}}
ALERTS = {
    "DragateCertificateExpiringSoon", "DragateWebhookFailingOpen", "DragateWebhookRejecting",
    "DragatePolicySetStale", "DragatePolicyObjectsNotEnforced", "DragateNoLeader",
    "DragateTenantQuotaNearlyFull",
}  # fmt: skip
APISERVER_METRICS = {
    "apiserver_admission_webhook_fail_open_count",
    "apiserver_admission_webhook_rejection_count",
}
"""The kube-apiserver's own metrics the rules read (scraped from the apiserver)."""
PROMQL_WORDS = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"')
SUFFIXES = ("_bucket", "_count", "_sum", "_created")


def rule_exprs(rendered: Rendered) -> dict[str, str]:
    rule = rendered.one("PrometheusRule")
    return {r["alert"]: r["expr"] for g in rule["spec"]["groups"] for r in g["rules"]}


def dashboard(rendered: Rendered) -> Doc:
    config_map = rendered.one("ConfigMap", f"{FULLNAME}-dashboard")
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    return cast(Doc, json.loads(config_map["data"]["dragate.json"]))


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads: dragate's and the apiserver's."""
    words = set(PROMQL_WORDS.findall(QUOTED.sub("", re.sub(r"\[[^\]]*\]", "", expr))))
    return {w for w in words if w.startswith(("dragate_", "apiserver_"))}


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> set[str]:
    """Every metric name a real offline `dragate serve` exports, plus the cluster-only ones."""
    server = start(tmp_path_factory.mktemp("serve"), double=False)
    try:
        text = server.get("/metrics").text
    finally:
        assert server.stop() == 0, server.logs()
    names = {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}
    samples = {re.split(r"[{ ]", line)[0] for line in text.splitlines() if line[:1] != "#"}
    return names | samples | set(metrics.CLUSTER_ONLY)


def test_monitoring_is_off_by_default(default: Rendered) -> None:
    assert not default.has("PrometheusRule")
    assert not [c for c in default.all("ConfigMap") if c["metadata"]["name"].endswith("-dashboard")]


def test_rule_keeps_every_alert_and_takes_its_thresholds_from_values(helm: Helm) -> None:
    rendered = helm.template(
        {**MONITORING, "prometheusRule": {"enabled": True, "quotaUsageThreshold": 0.75,
                                          "noLeaderMinutes": 7}}
    )  # fmt: skip
    exprs = rule_exprs(rendered)
    assert set(exprs) == ALERTS
    assert exprs["DragateTenantQuotaNearlyFull"].endswith(">= 0.75")
    assert "> 420" in exprs["DragateNoLeader"]
    default_rule = rule_exprs(helm.template(MONITORING))
    assert default_rule["DragateTenantQuotaNearlyFull"].endswith(">= 0.9")


def test_dashboard_is_valid_json_with_the_day_one_panels(helm: Helm) -> None:
    board = dashboard(helm.template({**MONITORING, "grafanaDashboard": {
        "enabled": True, "labels": {"team": "platform"}}}))  # fmt: skip
    exprs = " ".join(t["expr"] for p in board["panels"] for t in p["targets"])
    for metric in (
        "dragate_admission_requests_total",
        "dragate_admission_duration_seconds_bucket",
        "dragate_denials_total",
        "dragate_tenant_used_devices",
        "dragate_tenant_quota_limit_devices",
        "dragate_leader",
        "dragate_reconcile_seconds_without_success",
        "dragate_audit_violations",
    ):
        assert metric in exprs, metric  # fmt: skip
    assert len({p["id"] for p in board["panels"]}) == len(board["panels"])


def test_every_query_names_only_metrics_dragate_exports(helm: Helm, exported: set[str]) -> None:
    rendered = helm.template(MONITORING)
    queries = {f"alert {name}": e for name, e in rule_exprs(rendered).items()}
    for panel in dashboard(rendered)["panels"]:
        for target in panel["targets"]:
            queries[f"panel {panel['title']} {target['refId']}"] = target["expr"]
    for where, expr in queries.items():
        names = metric_names(expr)
        assert names, f"{where}: no metric in {expr}"
        unknown = {n for n in names - APISERVER_METRICS if _base(n) not in exported}
        assert not unknown, f"{where}: {sorted(unknown)} not exported"


def _base(name: str) -> str:
    """A histogram's series name without its suffix (a counter keeps `_total`)."""
    for suffix in SUFFIXES:
        if name.endswith(suffix):
            return name.removesuffix(suffix)
    return name


SOURCE_FLAGS = [
    pytest.param("files", {"--policies", "--no-policy-objects"}, id="files"),
    pytest.param("cluster", set(), id="cluster"),
    pytest.param("both", {"--policies"}, id="both"),
]


@pytest.mark.parametrize(("source", "passed"), SOURCE_FLAGS)
def test_the_readme_says_the_flags_each_policy_source_passes(
    helm: Helm, source: str, passed: set[str]
) -> None:
    """The chart README's "Policies and GitOps" names, per `policies.source`, exactly the
    policy flags the Deployment passes to `serve`."""
    args = container(helm.template({"policies": {"source": source}}).one("Deployment"))["args"]
    policy_flags = {a.split("=")[0] for a in args if a.startswith(("--policies", "--no-policy"))}
    assert policy_flags == passed
    readme = " ".join((CHART / "README.md").read_text().split())
    said = readme[readme.index(f"`{source}` gives") :].split(",")[0].split("(")[0]
    assert {f for f in ("--policies", "--no-policy-objects") if f in said} == passed, said
