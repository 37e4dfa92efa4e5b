"""The two roles the chart deploys, as Gatekeeper and Kyverno do: the webhook (answers reviews,
HTTPS, scaled by replicas, a PDB) and the controller (holds the Lease, walks the cluster, plain
HTTP probes and metrics), each with its own ServiceAccount and least-privilege RBAC.

The RBAC tables are exactly the API calls each role makes (webhook/kube/*.py,
webhook/ledger/kube.py, webhook/ledger/wantwatch.py); the same tables are asserted against the
real apiserver's authorizer in tests/e2e/test_helm_install.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from charts.chart_support import (
    CHART,
    CONTROLLER,
    FULLNAME,
    NAMESPACE,
    Doc,
    Helm,
    Rendered,
    container,
    flags,
    rules_of,
)

from webhook.kube.leader import LEASE_NAME
from webhook.kube.policyreports import REPORT_NAME
from webhook.rewrite.admissionpolicy import NAME as REWRITE_POLICY

DRA = ["resourceclaims", "resourceclaimtemplates", "deviceclasses", "resourceslices"]
POLICY_KINDS = ["tenants", "deviceclasspolicies", "legacyresourcemappings", "settings"]


def rule(group: str, resources: list[str], verbs: list[str], names: list[str] | None = None) -> Doc:
    found: Doc = {"apiGroups": [group], "resources": resources, "verbs": verbs}
    if names:
        found["resourceNames"] = names
    return found


WEBHOOK_RULES = [
    rule("", ["namespaces"], ["list", "watch"]),
    rule("resource.k8s.io", DRA, ["list", "watch"]),
    rule("resource.k8s.io", ["resourceclaimtemplates"], ["create"]),
    rule("dragate.io", ["tenantusages"], ["get", "list", "watch", "create", "update"]),
    rule("batch", ["jobs"], ["get"]),
    rule("jobset.x-k8s.io", ["jobsets"], ["get"]),
    rule("leaderworkerset.x-k8s.io", ["leaderworkersets"], ["get"]),
    rule("scheduling.k8s.io", ["podgroups", "workloads"], ["get"]),
]
CONTROLLER_RULES = [
    rule("", ["namespaces"], ["get", "list", "watch"]),
    rule("", ["pods"], ["list"]),
    rule("batch", ["jobs"], ["list"]),
    rule("jobset.x-k8s.io", ["jobsets"], ["list"]),
    rule("leaderworkerset.x-k8s.io", ["leaderworkersets"], ["list"]),
    rule("scheduling.k8s.io", ["podgroups"], ["list"]),
    rule("resource.k8s.io", DRA, ["list", "watch"]),
    rule("resource.k8s.io", ["resourceclaimtemplates"], ["create"]),
    rule("dragate.io", ["tenantusages"], ["get", "list", "create", "update"]),
    rule("wgpolicyk8s.io", ["policyreports", "clusterpolicyreports"], ["list"]),
    rule("wgpolicyk8s.io", ["policyreports", "clusterpolicyreports"],
         ["create", "patch", "delete"], [REPORT_NAME]),
]  # fmt: skip
OBJECTS_READ = rule("dragate.io", POLICY_KINDS, ["list", "watch"])
STATUS_WRITE = rule("dragate.io", [f"{k}/status" for k in POLICY_KINDS], ["patch"])
REWRITE_KEPT = rule("admissionregistration.k8s.io",
                    ["mutatingadmissionpolicies", "mutatingadmissionpolicybindings"],
                    ["get", "create", "patch", "delete"], [REWRITE_POLICY])  # fmt: skip

RBAC_CASES = [
    pytest.param({}, FULLNAME, WEBHOOK_RULES, id="webhook-files"),
    pytest.param({}, CONTROLLER, CONTROLLER_RULES, id="controller-files"),
    pytest.param({"policies": {"source": "both"}}, FULLNAME, [*WEBHOOK_RULES, OBJECTS_READ],
                 id="webhook-objects"),
    pytest.param({"policies": {"source": "cluster"}}, CONTROLLER,
                 [*CONTROLLER_RULES, OBJECTS_READ, STATUS_WRITE], id="controller-objects"),
    pytest.param({"rewritePolicy": {"keep": True}}, FULLNAME, WEBHOOK_RULES,
                 id="webhook-keep-rewrite"),
    pytest.param({"rewritePolicy": {"keep": True}}, CONTROLLER, [*CONTROLLER_RULES, REWRITE_KEPT],
                 id="controller-keep-rewrite"),
]  # fmt: skip


@pytest.mark.parametrize(("values", "role", "expected"), RBAC_CASES)
def test_each_role_s_cluster_role_is_exactly_its_calls(
    helm: Helm, values: dict[str, Any], role: str, expected: list[Doc]
) -> None:
    cluster_role = helm.template(values).one("ClusterRole", role)
    assert rules_of(cluster_role) == rules_of({"rules": expected})
    for granted in cluster_role["rules"]:
        assert "*" not in granted["verbs"] + granted["resources"] + granted["apiGroups"]


# What a compromised webhook pod must not do: the controller's work, and never more.
WEBHOOK_FORBIDDEN = [
    pytest.param("", "pods", "list", id="list-pods"),
    pytest.param("", "namespaces", "get", id="get-namespace"),
    pytest.param("batch", "jobs", "list", id="list-jobs"),
    pytest.param("scheduling.k8s.io", "podgroups", "list", id="list-podgroups"),
    pytest.param("wgpolicyk8s.io", "policyreports", "patch", id="write-reports"),
    pytest.param("wgpolicyk8s.io", "clusterpolicyreports", "list", id="list-reports"),
    pytest.param("dragate.io", "tenants/status", "patch", id="policy-status"),
    pytest.param("coordination.k8s.io", "leases", "update", id="lease"),
    pytest.param("admissionregistration.k8s.io", "mutatingadmissionpolicies", "patch",
                 id="rewrite-policy"),
]  # fmt: skip


def granted(role: Doc, group: str, resource: str, verb: str) -> bool:
    return any(
        group in r["apiGroups"] and resource in r["resources"] and verb in r["verbs"]
        for r in role["rules"]
    )


@pytest.mark.parametrize(("group", "resource", "verb"), WEBHOOK_FORBIDDEN)
def test_the_webhook_never_gets_the_controller_s_work(
    helm: Helm, group: str, resource: str, verb: str
) -> None:
    everything = helm.template({"policies": {"source": "both"}, "rewritePolicy": {"keep": True}})
    assert not granted(everything.one("ClusterRole", FULLNAME), group, resource, verb)
    controller = everything.one("ClusterRole", CONTROLLER)
    leases = everything.one("Role", CONTROLLER)
    assert granted(controller, group, resource, verb) or granted(leases, group, resource, verb)
    assert everything.names("Role") == [CONTROLLER]


def test_only_the_controller_holds_the_lease(default: Rendered) -> None:
    leases = default.one("Role", CONTROLLER)
    assert leases["metadata"]["namespace"] == NAMESPACE
    assert leases["rules"] == [
        rule("coordination.k8s.io", ["leases"], ["get", "update"], [LEASE_NAME]),
        rule("coordination.k8s.io", ["leases"], ["create"]),
    ]
    binding = default.one("RoleBinding", CONTROLLER)
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                  "name": CONTROLLER}  # fmt: skip
    assert binding["subjects"] == [account(CONTROLLER)]


def account(name: str) -> Doc:
    return {"kind": "ServiceAccount", "name": name, "namespace": NAMESPACE}


@pytest.mark.parametrize("role", [FULLNAME, CONTROLLER], ids=["webhook", "controller"])
def test_each_role_runs_as_its_own_service_account(default: Rendered, role: str) -> None:
    assert default.names("ServiceAccount") == [FULLNAME, CONTROLLER]
    pod = default.one("Deployment", role)["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == role
    binding = default.one("ClusterRoleBinding", role)
    assert binding["roleRef"]["name"] == role
    assert binding["subjects"] == [account(role)]


def test_service_account_names_come_from_values(helm: Helm) -> None:
    rendered = helm.template({"serviceAccount": {"name": "hooks", "controllerName": "loops"}})
    assert rendered.names("ServiceAccount") == ["hooks", "loops"]
    assert rendered.webhook()["spec"]["template"]["spec"]["serviceAccountName"] == "hooks"
    assert rendered.controller()["spec"]["template"]["spec"]["serviceAccountName"] == "loops"
    assert rendered.one("RoleBinding", CONTROLLER)["subjects"][0]["name"] == "loops"


@pytest.mark.parametrize(("role", "expected"), [
    (FULLNAME, {"role": "webhook", "port": "8443", "cert-dir": "/etc/dragate/tls",
                "max-connections": "10240", "on-timeout": "deny"}),
    (CONTROLLER, {"role": "controller", "probe-port": "8081"}),
], ids=["webhook", "controller"])  # fmt: skip
def test_each_deployment_runs_its_role_with_the_cluster_flags(
    default: Rendered, role: str, expected: dict[str, str]
) -> None:
    dragate = container(default.one("Deployment", role))
    assert dragate["args"][:2] == ["serve", f"--role={expected['role']}"]
    args = flags(dragate["args"])
    shared = {"in-cluster": "", "host": "0.0.0.0", "own-namespace": "$(POD_NAMESPACE)",
              "own-service-account": "$(POD_SERVICE_ACCOUNT)", "log-level": "info",
              "no-policy-objects": "", "policies": "/etc/dragate/policies/..data"}  # fmt: skip
    assert args.items() >= {**shared, **expected}.items()
    assert bool(set(args) & WEBHOOK_ONLY) is (role == FULLNAME)


WEBHOOK_ONLY = {"port", "cert-dir", "max-connections", "graceful-timeout", "max-body-bytes",
                "on-timeout", "client-ca", "client-name", "no-quota-grants"}  # fmt: skip


@pytest.mark.parametrize(("values", "flag", "role"), [
    ({"rewritePolicy": {"keep": True}}, "keep-rewrite-policy", CONTROLLER),
    ({"serve": {"quotaGrants": False}}, "no-quota-grants", FULLNAME),
], ids=["keep-rewrite-policy", "quota-grants-off"])  # fmt: skip
def test_role_specific_flags_reach_only_their_role(
    helm: Helm, values: dict[str, Any], flag: str, role: str
) -> None:
    rendered = helm.template(values)
    for name in (FULLNAME, CONTROLLER):
        assert (flag in flags(container(rendered.one("Deployment", name))["args"])) is (
            name == role
        ), name


@pytest.mark.parametrize(("values", "port"), [
    ({}, 8081),
    ({"controller": {"probePort": 9090}}, 9090),
], ids=["default-port", "probe-port-value"])  # fmt: skip
def test_controller_probes_and_metrics_are_plain_http_on_the_probe_port(
    helm: Helm, values: dict[str, Any], port: int
) -> None:
    rendered = helm.template(values)
    dragate = container(rendered.controller())
    assert dragate["ports"] == [{"name": "http", "containerPort": port, "protocol": "TCP"}]
    assert flags(dragate["args"])["probe-port"] == str(port)
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        assert dragate[probe]["httpGet"] == {"path": path, "port": "http", "scheme": "HTTP"}
    service = rendered.one("Service", CONTROLLER)
    assert service["spec"]["ports"] == [
        {"name": "metrics", "port": port, "targetPort": "http", "protocol": "TCP"}
    ]
    assert service["spec"]["selector"] == rendered.controller()["spec"]["selector"]["matchLabels"]
    mounts = {m["mountPath"] for m in dragate["volumeMounts"]}
    assert "/etc/dragate/tls" not in mounts and "/etc/dragate/policies" in mounts


def pod_labels(deployment: Doc) -> dict[str, str]:
    labels: dict[str, str] = deployment["spec"]["template"]["metadata"]["labels"]
    return labels


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def test_no_selector_of_one_role_selects_the_other_s_pods(default: Rendered) -> None:
    """The webhook's Service, PDB, NetworkPolicy and Deployment reach webhook pods only: a
    controller pod behind the webhook Service would fail reviews, one under the PDB would
    count as a serving replica."""
    webhook, controller = pod_labels(default.webhook()), pod_labels(default.controller())
    for selector, mine, other in [
        (default.webhook()["spec"]["selector"]["matchLabels"], webhook, controller),
        (default.controller()["spec"]["selector"]["matchLabels"], controller, webhook),
        (default.one("Service", FULLNAME)["spec"]["selector"], webhook, controller),
        (default.one("Service", CONTROLLER)["spec"]["selector"], controller, webhook),
        (default.one("PodDisruptionBudget")["spec"]["selector"]["matchLabels"], webhook,
         controller),
        (default.one("NetworkPolicy", FULLNAME)["spec"]["podSelector"]["matchLabels"], webhook,
         controller),
        (default.one("NetworkPolicy", CONTROLLER)["spec"]["podSelector"]["matchLabels"],
         controller, webhook),
    ]:  # fmt: skip
        assert selects(selector, mine) and not selects(selector, other), selector
    assert webhook["app.kubernetes.io/component"] == "webhook"
    assert controller["app.kubernetes.io/component"] == "controller"


@pytest.mark.parametrize(("values", "webhooks", "controllers"), [
    ({}, 2, 1),
    ({"webhook": {"replicas": 4}, "controller": {"replicas": 2}}, 4, 2),
], ids=["defaults", "values"])  # fmt: skip
def test_replicas_per_role(helm: Helm, values: dict[str, Any], webhooks: int,
                           controllers: int) -> None:  # fmt: skip
    rendered = helm.template(values)
    assert rendered.webhook()["spec"]["replicas"] == webhooks
    assert rendered.controller()["spec"]["replicas"] == controllers
    assert rendered.one("PodDisruptionBudget")["spec"]["minAvailable"] == 1


def test_controller_rolls_one_pod_at_a_time_without_surge(default: Rendered) -> None:
    assert default.controller()["spec"]["strategy"] == {
        "type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}
    }  # fmt: skip


@pytest.mark.parametrize(("role", "cpu"), [(FULLNAME, "250m"), (CONTROLLER, "100m")],
                         ids=["webhook", "controller"])  # fmt: skip
def test_each_role_has_its_own_resources(default: Rendered, role: str, cpu: str) -> None:
    resources = container(default.one("Deployment", role))["resources"]
    assert resources["requests"]["cpu"] == cpu
    assert "cpu" not in resources["limits"] and resources["limits"]["memory"]


def test_controller_pods_are_hardened_like_the_webhook_s(default: Rendered) -> None:
    for key in ("securityContext", "priorityClassName"):
        assert (default.controller()["spec"]["template"]["spec"][key]
                == default.webhook()["spec"]["template"]["spec"][key])  # fmt: skip
    assert (container(default.controller())["securityContext"]
            == container(default.webhook())["securityContext"])  # fmt: skip


@pytest.mark.parametrize("values", [
    {"deployment": {"enabled": False}, "webhook": {"url": "https://h:1", "caBundle": "QUJD"}},
    {"serve": {"inCluster": False}, "webhook": {"replicas": 1}},
], ids=["url-mode", "offline"])  # fmt: skip
def test_no_controller_deployment_where_no_pod_reaches_the_cluster(
    helm: Helm, values: dict[str, Any]
) -> None:
    rendered = helm.template({**values, "serviceMonitor": {"enabled": True},
                              "networkPolicy": {"enabled": True}})  # fmt: skip
    assert CONTROLLER not in rendered.names("Deployment") + rendered.names("Service")
    assert CONTROLLER not in rendered.names("ServiceMonitor") + rendered.names("NetworkPolicy")


def test_the_controller_s_metrics_are_scraped_and_its_alerts_name_it(helm: Helm) -> None:
    rendered = helm.template({"serviceMonitor": {"enabled": True, "labels": {"release": "p"}},
                              "prometheusRule": {"enabled": True}})  # fmt: skip
    monitor = rendered.one("ServiceMonitor", CONTROLLER)
    assert monitor["metadata"]["labels"]["release"] == "p"
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selects(selector, rendered.one("Service", CONTROLLER)["metadata"]["labels"])
    assert not selects(selector, rendered.one("Service", FULLNAME)["metadata"]["labels"])
    [endpoint] = monitor["spec"]["endpoints"]
    assert (endpoint["port"], endpoint["path"], endpoint["scheme"]) == (
        "metrics",
        "/metrics",
        "http",
    )
    rules = {r["alert"]: r["expr"] for g in rendered.one("PrometheusRule")["spec"]["groups"]
             for r in g["rules"]}  # fmt: skip
    job = f'job="{CONTROLLER}"'
    assert rules["DragateNoLeader"].count(job) == 3, rules["DragateNoLeader"]
    assert "absent(dragate_leader{" in rules["DragateNoLeader"]


def readme_section(role: str) -> str:
    readme = (CHART / "README.md").read_text()
    section = readme[readme.index("## RBAC") :]
    section = section[: section.index("\n## ", 1)]
    heading = f"### {role}"
    part = section[section.index(heading) :]
    end = part.find("\n### ", 1)
    return part if end < 0 else part[:end]


@pytest.mark.parametrize(("role", "heading"), [(FULLNAME, "Webhook"), (CONTROLLER, "Controller")],
                         ids=["webhook", "controller"])  # fmt: skip
def test_every_granted_verb_is_justified_in_the_readme(helm: Helm, role: str, heading: str) -> None:
    rendered = helm.template({"policies": {"source": "both"}, "rewritePolicy": {"keep": True}})
    section = readme_section(heading)
    rules = rendered.one("ClusterRole", role)["rules"]
    if role == CONTROLLER:
        rules = rules + rendered.one("Role", CONTROLLER)["rules"]
    for granted_rule in rules:
        for resource in granted_rule["resources"]:
            for verb in granted_rule["verbs"]:
                assert f"| `{resource}` | `{verb}` |" in section, (heading, resource, verb)
