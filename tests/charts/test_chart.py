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
import re
import shutil
from pathlib import Path
from typing import Any, cast

import celpy
import pytest
import yaml
from admission.server_support import start
from charts.chart_support import (
    CHART,
    CONTROLLER,
    FULLNAME,
    NAMESPACE,
    NON_DEFAULT,
    RELEASE,
    REPO,
    URL_MODE,
    Doc,
    Helm,
    Rendered,
    container,
    flags,
    webhooks,
)
from cryptography import x509
from e2e.toolchain_bins import SUPPORTED_MINORS

from webhook.admission import metrics
from webhook.cli import serve
from webhook.rewrite import REWRITTEN_LABEL

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
        *["ClusterRole", "ClusterRoleBinding", "Deployment", "NetworkPolicy", "Service",
          "ServiceAccount"] * 2,
        "ConfigMap", "MutatingWebhookConfiguration", "PodDisruptionBudget", "Role",
        "RoleBinding", "Secret", "ValidatingWebhookConfiguration",
    ])  # fmt: skip
    for doc in default.docs:
        if doc["kind"] not in CLUSTER_SCOPED:
            assert doc["metadata"]["namespace"] == NAMESPACE, doc["kind"]
        assert doc["metadata"]["labels"]["app.kubernetes.io/instance"] == RELEASE


def test_deployment_is_highly_available(default: Rendered) -> None:
    deployment = default.webhook()
    spec = deployment["spec"]
    pod = spec["template"]["spec"]
    assert spec["replicas"] == 2
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
    pod = default.webhook()["spec"]["template"]["spec"]
    dragate = container(default.webhook())
    pre_stop = dragate["lifecycle"]["preStop"]["sleep"]["seconds"]
    graceful = int(flags(dragate["args"])["graceful-timeout"])
    assert pre_stop > 0
    assert pod["terminationGracePeriodSeconds"] > pre_stop + graceful


def test_container_runs_dragate_serve_in_cluster(default: Rendered) -> None:
    dragate = container(default.webhook())
    assert dragate["image"] == "ghcr.io/dragate/dragate:" + chart_app_version()
    assert dragate["command"] == ["dragate"]
    assert dragate["args"][0] == "serve"
    args = flags(dragate["args"])
    assert args["role"] == "webhook"
    assert args["in-cluster"] == ""
    assert args["own-namespace"] == "$(POD_NAMESPACE)"
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
    dragate = container(default.webhook())
    live, ready = dragate["livenessProbe"]["httpGet"], dragate["readinessProbe"]["httpGet"]
    assert live == {"path": "/healthz", "port": "https", "scheme": "HTTPS"}
    assert ready == {"path": "/readyz", "port": "https", "scheme": "HTTPS"}


def test_pod_is_hardened(default: Rendered) -> None:
    pod = default.webhook()["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 65532
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    sc = container(default.webhook())["securityContext"]
    assert sc["runAsNonRoot"] is True
    assert sc["runAsUser"] == 65532
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["seccompProfile"] == {"type": "RuntimeDefault"}


def test_volumes_are_directory_mounts_and_memory_scratch(default: Rendered) -> None:
    pod = default.webhook()["spec"]["template"]["spec"]
    for c in pod["containers"] + pod.get("initContainers", []):
        for mount in c["volumeMounts"]:
            assert "subPath" not in mount and "subPathExpr" not in mount, mount
    mounts = {m["mountPath"]: m for m in container(default.webhook())["volumeMounts"]}
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
    service = default.one("Service", FULLNAME)
    assert service["spec"]["ports"] == [
        {"name": "https", "port": 443, "targetPort": "https", "protocol": "TCP"}
    ]
    selector = default.webhook()["spec"]["selector"]["matchLabels"]
    assert service["spec"]["selector"] == {**selector, "app.kubernetes.io/component": "webhook"}


@pytest.mark.parametrize(("grants", "flag"), [(True, False), (False, True)],
                         ids=["quota-grants-default", "quota-grants-off"])  # fmt: skip
def test_quota_grants_value_reaches_serve(helm: Helm, grants: bool, flag: bool) -> None:
    rendered = helm.template({"serve": {"quotaGrants": grants}})
    args = flags(container(rendered.webhook())["args"])
    assert ("no-quota-grants" in args) is flag
    assert "quota-grants" not in args  # on is serve's own default


def test_max_body_bytes_is_the_documented_three_mib(default: Rendered) -> None:
    from webhook.admission.config import DEFAULT_MAX_BODY_BYTES

    args = flags(container(default.webhook())["args"])
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
         "apiVersions": ["v1"], "resources": ["leaderworkersets"], "scope": "Namespaced"},
        {"operations": ["CREATE", "UPDATE"], "apiGroups": ["scheduling.k8s.io"],
         "apiVersions": ["v1beta1"], "resources": ["podgroups"], "scope": "Namespaced"}],
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
    assert set(conditions(hook)) == {"gpu-workload", "podgroup-scaled",
                                     "not-control-plane-update", "not-dragate-itself"}  # fmt: skip

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


@pytest.mark.parametrize(
    ("policy", "sent"),
    [({"gang": {"minCount": 4}}, True), ({"basic": {}}, False)],
    ids=["gang-policy", "basic-policy"],
)
def test_match_conditions_send_podgroups_with_a_gang_policy(
    default: Rendered, policy: Doc, sent: bool
) -> None:
    hook = webhooks(default)["gangs.validate.dragate.io"]
    obj = {"kind": "PodGroup", "spec": {"schedulingPolicy": policy}}
    request = {"kind": {"kind": "PodGroup"}, "operation": "CREATE",
               "userInfo": {"username": "alice", "groups": []}}  # fmt: skip
    matched = [evaluate(e, object=obj, oldObject=obj, request=request)
               for e in conditions(hook).values()]  # fmt: skip
    assert all(matched) is sent


def gang_group(min_count: int | None) -> Doc:
    policy = {"basic": {}} if min_count is None else {"gang": {"minCount": min_count}}
    return {"kind": "PodGroup", "spec": {"schedulingPolicy": policy}}


@pytest.mark.parametrize(
    ("old", "new", "user", "sent"),
    [
        (4, 6, "alice", True),
        (6, 2, "alice", True),
        (4, 4, "alice", False),
        (None, None, "alice", False),
        (4, 6, "system:serviceaccount:kube-system:job-controller", True),
        (4, 6, "system:kube-controller-manager", False),
    ],
    ids=["grown", "shrunk", "min-count-unchanged", "basic-policy", "job-controller-scales",
         "control-plane-bookkeeping"],
)  # fmt: skip
def test_match_conditions_send_a_podgroup_s_update_only_when_it_scales(
    default: Rendered, old: int | None, new: int | None, user: str, sent: bool
) -> None:
    """minCount is mutable (workload scaling); a PodGroup's other UPDATEs (labels, owner
    references) move no quota and are never sent."""
    hook = webhooks(default)["gangs.validate.dragate.io"]
    request = {"kind": {"kind": "PodGroup"}, "operation": "UPDATE",
               "userInfo": {"username": user, "groups": []}}  # fmt: skip
    matched = [evaluate(e, object=gang_group(new), oldObject=gang_group(old), request=request)
               for e in conditions(hook).values()]  # fmt: skip
    assert all(matched) is sent


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
    volumes = rendered.webhook()["spec"]["template"]["spec"]["volumes"]
    assert {"name": "policies", "configMap": {"name": "policies-from-git"}} in volumes


def test_git_sync_sidecar(helm: Helm) -> None:
    rendered = helm.template({"policies": {"gitSync": {
        "enabled": True, "repo": "https://git.example.com/platform/gpu-policies.git",
        "ref": "v3", "subPath": "clusters/prod"}}})  # fmt: skip
    assert not rendered.has("ConfigMap")
    pod = rendered.webhook()["spec"]["template"]["spec"]
    assert [c["name"] for c in pod["initContainers"]] == ["git-sync-init"]
    assert "--one-time" in pod["initContainers"][0]["args"]
    sidecar = container(rendered.webhook(), "git-sync")
    assert "--ref=v3" in sidecar["args"] and "--one-time" not in sidecar["args"]
    assert sidecar["securityContext"]["readOnlyRootFilesystem"] is True
    args = flags(container(rendered.webhook())["args"])
    assert args["policies"] == "/etc/dragate/git/current/clusters/prod"


# --- non-default modes ---------------------------------------------------------------------------


def test_non_default_values(helm: Helm) -> None:
    rendered = helm.template(NON_DEFAULT)
    deployment = rendered.webhook()
    pod = deployment["spec"]["template"]["spec"]
    args = flags(container(deployment)["args"])
    assert deployment["spec"]["replicas"] == 5
    assert rendered.controller()["spec"]["replicas"] == 2
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
    pod = rendered.webhook()["spec"]["template"]["spec"]
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
    policy = helm.template({"networkPolicy": values}).one("NetworkPolicy", FULLNAME)
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    [rule] = policy["spec"]["ingress"]
    assert rule["ports"] == [{"port": "https", "protocol": "TCP"}]
    assert rule.get("from") == peers


def test_client_ca_turns_on_mtls(helm: Helm) -> None:
    rendered = helm.template({"serve": {"clientCA": {"configMap": "apiserver-client-ca"}}})
    pod = rendered.webhook()["spec"]["template"]["spec"]
    dragate = container(rendered.webhook())
    assert flags(dragate["args"])["client-ca"] == "/etc/dragate/client-ca/ca.crt"
    assert {"name": "client-ca", "mountPath": "/etc/dragate/client-ca", "readOnly": True} in (
        dragate["volumeMounts"])  # fmt: skip
    assert {"name": "client-ca", "configMap": {"name": "apiserver-client-ca"}} in pod["volumes"]
    assert "client-ca" not in flags(container(helm.template().webhook())["args"])


def test_service_monitor_scrapes_https_metrics(helm: Helm) -> None:
    rendered = helm.template(NON_DEFAULT)
    monitor = rendered.one("ServiceMonitor", FULLNAME)
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
    """Offline, the one pod runs both roles in one process (serve's default role)."""
    rendered = helm.template({"serve": {"inCluster": False}, "webhook": {"replicas": 1}})
    deployment = rendered.webhook()
    assert deployment["spec"]["replicas"] == 1
    assert rendered.names("Deployment") == [FULLNAME]
    args = flags(container(deployment)["args"])
    assert "in-cluster" not in args and "role" not in args


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


WEBHOOK_USER = f"system:serviceaccount:{NAMESPACE}:{FULLNAME}"
CONTROLLER_USER = f"system:serviceaccount:{NAMESPACE}:{CONTROLLER}"


@pytest.mark.parametrize(("values", "own"), [
    ({}, WEBHOOK_USER),
    (URL_MODE, WEBHOOK_USER),
    ({**URL_MODE, "webhook": {**URL_MODE["webhook"], "ownUsername": "dragate-dev"}}, "dragate-dev"),
], ids=["service-account", "url-mode-default", "url-mode-own-user"])  # fmt: skip
def test_dragate_s_own_requests_skip_every_webhook(helm: Helm, values: dict[str, Any],
                                                   own: str) -> None:  # fmt: skip
    """The templates dragate creates never come back to it: those the webhook creates while
    rewriting a Pod (in url mode its kubeconfig user, `webhook.ownUsername`, else the
    webhook's service account) and those the controller's template keeper re-creates."""
    hooks = webhooks(helm.template(values))
    named = {n for n, hook in hooks.items() if "not-dragate-itself" in conditions(hook)}
    assert {"pods.validate.dragate.io", "claims.validate.dragate.io"} <= named
    users = [(own, False), (CONTROLLER_USER, False), ("alice", True), (f"{own}-other", True)]
    for name in named:
        expression = conditions(hooks[name])["not-dragate-itself"]
        for user, sent in users:
            assert evaluate(expression, request={"userInfo": {"username": user}}) is sent, name


# --- values that must be refused -----------------------------------------------------------------


@pytest.mark.parametrize(("values", "message"), [
    ({"replica": 3}, "additional properties 'replica' not allowed"),
    ({"deployment": {"replicaCount": 3}}, "additional properties 'replicaCount' not allowed"),
    ({"deployment": {"replicas": 3}}, "additional properties 'replicas' not allowed"),
    ({"controller": {"replicas": 3}}, "'/controller/replicas': maximum: got 3, want 2"),
    ({"controller": {"replicas": 0}}, "'/controller/replicas': minimum: got 0, want 1"),
    ({"webhook": {"validating": {"failurePolicy": "fail"}}}, "failurePolicy"),
    ({"webhook": {"mutating": {"timeoutSeconds": 31}}}, "timeoutSeconds"),
    ({"certs": {"mode": "cert-manager"}}, "mode"),
    ({"webhook": {"gpuResourcePrefixes": ["nvidia.com/' || true || '"]}}, "gpuResourcePrefixes"),
    ({"webhook": {"ownUsername": "x' || true || '"}}, "ownUsername"),
    ({"policies": {"source": "git"}}, "source"),
], ids=["top-level-typo", "nested-typo", "moved-webhook-replicas", "controller-above-two",
        "controller-none", "failure-policy-case", "timeout-range", "cert-mode",
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
     "serve.inCluster=false with webhook.replicas=2: each replica would keep its own quota"),
    ({"serve": {"inCluster": False}, "webhook": {"replicas": 3}}, "webhook.replicas=3"),
    ({"serve": {"inCluster": False}, "webhook": {"replicas": 1},
      "rewritePolicy": {"keep": True}}, "rewritePolicy.keep=true needs serve.inCluster=true"),
    ({"serve": {"inCluster": False}, "webhook": {"replicas": 1},
      "policies": {"source": "cluster"}}, "policies.source=cluster needs serve.inCluster=true"),
], ids=["url-with-deployment", "url-without-ca", "nothing-serves", "grace-too-short",
        "secret-without-ca", "extra-peers-without-control-plane", "offline-replicas",
        "offline-three-replicas", "keep-offline",
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


def serve_flags_passed(rendered: Rendered, name: str) -> set[str]:
    return {a.partition("=")[0] for a in container(rendered.one("Deployment", name))["args"][1:]}


def known_serve_flags() -> set[str]:
    return {o for param in serve.command.params for o in [*param.opts, *param.secondary_opts]}


@pytest.mark.parametrize("name", [FULLNAME, CONTROLLER], ids=["webhook", "controller"])
def test_every_serve_flag_the_chart_passes_exists(default: Rendered, name: str) -> None:
    """The chart and `dragate serve` are built by different hands: keep them in step."""
    passed = serve_flags_passed(default, name)
    unknown = passed - known_serve_flags()
    assert not unknown, f"flags unknown to `dragate serve`: {sorted(unknown)}"


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
    args = container(helm.template({"serve": values}).webhook())["args"]
    assert [a for a in args if a.startswith("--client-name=")] == [
        "--client-name=apiserver",
        "--client-name=kube-apiserver",
    ]
    assert not any(a.startswith("--client-name") for a in container(
        helm.template().webhook())["args"])  # fmt: skip


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
    args = container(helm.template({"policies": {"source": source}}).webhook())["args"]
    policy_flags = {a.split("=")[0] for a in args if a.startswith(("--policies", "--no-policy"))}
    assert policy_flags == passed
    readme = " ".join((CHART / "README.md").read_text().split())
    said = readme[readme.index(f"`{source}` gives") :].split(",")[0].split("(")[0]
    assert {f for f in ("--policies", "--no-policy-objects") if f in said} == passed, said
