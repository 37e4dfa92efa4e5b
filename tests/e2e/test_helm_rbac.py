"""What each role's ServiceAccount may do, asked of the real apiserver's authorizer.

The chart is installed once for the module in default mode, with every opt-in grant on
(`policies.source=both`, `rewritePolicy.keep=true`), and RBAC is asked with
`kubectl auth can-i VERB RESOURCE --as=system:serviceaccount:NS:SA` (one row per call, and
what a compromised pod must not do) and `kubectl auth can-i --list` (everything each account
holds beyond what every service account holds, compared whole). No kubelet runs the pods:
nothing here waits for them or needs `dragate serve --role`.

The webhook configurations point at a Service with no endpoints, so the install sets both
failure policies to Ignore: while this module runs, the rest of the cluster is not refused.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from webhook.kube.leader import LEASE_NAME
from webhook.kube.policyreports import REPORT_NAME
from webhook.rewrite.admissionpolicy import NAME as POLICY

from .cluster import Cluster

pytestmark = pytest.mark.e2e

CHART = Path(__file__).resolve().parents[2] / "charts" / "dragate"

RELEASE = f"dragate-rbac-{uuid.uuid4().hex[:6]}"  # contains the chart name: the full name
NAMESPACE = RELEASE
WEBHOOK = RELEASE
CONTROLLER = f"{RELEASE}-controller"
NOBODY = "no-such-account"  # what any service account holds without a binding


@pytest.fixture(scope="module")
def installed(cluster: Cluster) -> Iterator[Cluster]:
    cluster.helm("install", RELEASE, str(CHART), "--namespace", NAMESPACE, "--create-namespace",
                 "--wait=false", "--set", "policies.source=both",
                 "--set", "rewritePolicy.keep=true",
                 "--set", "webhook.validating.failurePolicy=Ignore",
                 "--set", "webhook.mutating.failurePolicy=Ignore")  # fmt: skip
    yield cluster
    cluster.helm("uninstall", RELEASE, "--namespace", NAMESPACE, "--wait=false", check=False)
    cluster.kubectl("delete", "namespace", NAMESPACE, "--wait=false", "--ignore-not-found")


def can_i(cluster: Cluster, account: str, verb: str, resource: str) -> bool:
    """`kubectl auth can-i VERB RESOURCE[/NAME] [--subresource=S]` as the account. A kind the
    API server does not serve (JobSet, LeaderWorkerSet without their CRDs) is one kubectl
    cannot resolve: the same question then goes in a SubjectAccessReview, as kubectl sends it."""
    what = resource.removesuffix(" status")
    extra = ["--subresource=status"] if what != resource else []
    user = f"system:serviceaccount:{NAMESPACE}:{account}"
    asked = cluster.kubectl("auth", "can-i", verb, what, *extra, "-n", NAMESPACE, f"--as={user}",
                            check=False)  # fmt: skip
    if "doesn't have a resource type" in asked.stderr:
        return access_review(cluster, user, verb, what)
    return asked.stdout.strip() == "yes"


def access_review(cluster: Cluster, user: str, verb: str, resource: str) -> bool:
    kind, _, group = resource.partition(".")
    review = {
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": user, "groups": ["system:serviceaccounts", "system:authenticated",
                                          f"system:serviceaccounts:{NAMESPACE}"],
                 "resourceAttributes": {"namespace": NAMESPACE, "verb": verb,
                                        "group": group, "resource": kind}},
    }  # fmt: skip
    answer = cluster.kubectl("create", "-o", "json", "-f", "-", input=json.dumps(review))
    return bool(json.loads(answer.stdout)["status"].get("allowed"))


def row(account: str, verb: str, resource: str, allowed: bool) -> object:
    name = "webhook" if account == WEBHOOK else "controller"
    what = resource.partition(".")[0] + ("-status" if resource.endswith(" status") else "")
    return pytest.param(account, verb, resource, allowed,
                        id=f"{name}-{verb}-{what}-{'yes' if allowed else 'no'}")  # fmt: skip


DRA = "resource.k8s.io"
# (account, verb, resource[/name][ status], allowed): every call each role makes, and the other
# role's work.
ACCESS = [
    # The webhook: its caches, managed templates on the request path, the ledger client.
    row(WEBHOOK, "list", "namespaces", True),
    row(WEBHOOK, "watch", "namespaces", True),
    row(WEBHOOK, "list", f"resourceclaims.{DRA}", True),
    row(WEBHOOK, "watch", f"resourceslices.{DRA}", True),
    row(WEBHOOK, "watch", f"deviceclasses.{DRA}", True),
    row(WEBHOOK, "create", f"resourceclaimtemplates.{DRA}", True),
    row(WEBHOOK, "get", "tenantusages.dragate.io", True),
    row(WEBHOOK, "watch", "tenantusages.dragate.io", True),
    row(WEBHOOK, "create", "tenantusages.dragate.io", True),
    row(WEBHOOK, "update", "tenantusages.dragate.io", True),
    row(WEBHOOK, "watch", "tenants.dragate.io", True),
    row(WEBHOOK, "get", "jobs.batch", True),
    row(WEBHOOK, "get", "podgroups.scheduling.k8s.io", True),
    row(WEBHOOK, "get", "workloads.scheduling.k8s.io", True),
    # ... and never the controller's work.
    row(WEBHOOK, "list", "pods", False),
    row(WEBHOOK, "get", "namespaces", False),
    row(WEBHOOK, "list", "jobs.batch", False),
    row(WEBHOOK, "list", "jobsets.jobset.x-k8s.io", False),
    row(WEBHOOK, "list", "podgroups.scheduling.k8s.io", False),
    row(WEBHOOK, "list", "policyreports.wgpolicyk8s.io", False),
    row(WEBHOOK, "patch", f"policyreports.wgpolicyk8s.io/{REPORT_NAME}", False),
    row(WEBHOOK, "create", f"clusterpolicyreports.wgpolicyk8s.io/{REPORT_NAME}", False),
    row(WEBHOOK, "patch", "tenants.dragate.io status", False),
    row(WEBHOOK, "update", f"leases.coordination.k8s.io/{LEASE_NAME}", False),
    row(WEBHOOK, "create", "leases.coordination.k8s.io", False),
    row(WEBHOOK, "patch", f"mutatingadmissionpolicies.admissionregistration.k8s.io/{POLICY}",
        False),
    # The controller: the Lease, the cluster-wide reads, status, reports, the rewrite policy.
    row(CONTROLLER, "get", "namespaces", True),
    row(CONTROLLER, "list", "pods", True),
    row(CONTROLLER, "list", "jobs.batch", True),
    row(CONTROLLER, "list", "leaderworkersets.leaderworkerset.x-k8s.io", True),
    row(CONTROLLER, "list", "podgroups.scheduling.k8s.io", True),
    row(CONTROLLER, "watch", f"resourceclaims.{DRA}", True),
    row(CONTROLLER, "create", f"resourceclaimtemplates.{DRA}", True),
    row(CONTROLLER, "list", "tenantusages.dragate.io", True),
    row(CONTROLLER, "update", "tenantusages.dragate.io", True),
    row(CONTROLLER, "patch", "tenants.dragate.io status", True),
    row(CONTROLLER, "patch", "settings.dragate.io status", True),
    row(CONTROLLER, "list", "policyreports.wgpolicyk8s.io", True),
    row(CONTROLLER, "create", f"policyreports.wgpolicyk8s.io/{REPORT_NAME}", True),
    row(CONTROLLER, "delete", f"clusterpolicyreports.wgpolicyk8s.io/{REPORT_NAME}", True),
    row(CONTROLLER, "get", f"leases.coordination.k8s.io/{LEASE_NAME}", True),
    row(CONTROLLER, "update", f"leases.coordination.k8s.io/{LEASE_NAME}", True),
    row(CONTROLLER, "create", "leases.coordination.k8s.io", True),
    row(CONTROLLER, "patch", f"mutatingadmissionpolicies.admissionregistration.k8s.io/{POLICY}",
        True),
    # ... and never more.
    row(CONTROLLER, "watch", "pods", False),
    row(CONTROLLER, "get", "pods", False),
    row(CONTROLLER, "watch", "jobs.batch", False),
    row(CONTROLLER, "get", "podgroups.scheduling.k8s.io", False),
    row(CONTROLLER, "get", "secrets", False),
    row(CONTROLLER, "get", "configmaps", False),
    row(CONTROLLER, "patch", "tenantusages.dragate.io", False),
    row(CONTROLLER, "watch", "tenantusages.dragate.io", False),
    row(CONTROLLER, "delete", "tenantusages.dragate.io", False),
    row(CONTROLLER, "update", "tenants.dragate.io", False),
    row(CONTROLLER, "patch", "policyreports.wgpolicyk8s.io/other", False),
    row(CONTROLLER, "update", "leases.coordination.k8s.io/another", False),
    row(CONTROLLER, "create", "mutatingadmissionpolicies.admissionregistration.k8s.io", False),
    row(CONTROLLER, "patch",
        "validatingwebhookconfigurations.admissionregistration.k8s.io", False),
]  # fmt: skip


@pytest.mark.parametrize(("account", "verb", "resource", "allowed"), ACCESS)
def test_each_service_account_may_make_its_role_s_calls_only(
    installed: Cluster, account: str, verb: str, resource: str, allowed: bool
) -> None:
    assert can_i(installed, account, verb, resource) is allowed


Grant = tuple[str, str, str]  # (resource, resource names, verb)
LIST_ROW = re.compile(r"^(\S+)\s+\[(.*?)\]\s+\[(.*?)\]\s+\[(.*?)\]\s*$")


def granted(cluster: Cluster, account: str) -> set[Grant]:
    """`kubectl auth can-i --list` as (resource, names, verb) triples, one per verb."""
    who = f"--as=system:serviceaccount:{NAMESPACE}:{account}"
    listed = cluster.kubectl("auth", "can-i", "--list", "-n", NAMESPACE, who).stdout
    found = set()
    for line in listed.splitlines()[1:]:
        match = LIST_ROW.match(line)
        if match:
            resource, _, names, verbs = match.groups()
            found |= {(resource, names, verb) for verb in verbs.split()}
    return found


def grants(resources: list[str], verbs: str, names: str = "") -> set[Grant]:
    return {(r, names, v) for r in resources for v in verbs.split()}


DRA_KINDS = ("resourceclaims", "resourceclaimtemplates", "deviceclasses", "resourceslices")
CACHED = ["namespaces", *(f"{k}.{DRA}" for k in DRA_KINDS)]
POLICY_KINDS = [
    f"{k}.dragate.io"
    for k in ("tenants", "deviceclasspolicies", "legacyresourcemappings", "settings")
]
SHARED = (
    grants(CACHED, "list watch")
    | grants([f"resourceclaimtemplates.{DRA}"], "create")
    | grants(["tenantusages.dragate.io"], "get list watch create update")
    | grants(POLICY_KINDS, "list watch")
)
REPORTS = ["policyreports.wgpolicyk8s.io", "clusterpolicyreports.wgpolicyk8s.io"]
REWRITE = ["mutatingadmissionpolicies.admissionregistration.k8s.io",
           "mutatingadmissionpolicybindings.admissionregistration.k8s.io"]  # fmt: skip
GANG_READS = grants(
    ["jobs.batch", "jobsets.jobset.x-k8s.io", "leaderworkersets.leaderworkerset.x-k8s.io",
     "podgroups.scheduling.k8s.io", "workloads.scheduling.k8s.io"], "get",
)  # fmt: skip
EXACTLY = {
    WEBHOOK: SHARED | GANG_READS,
    CONTROLLER: SHARED - grants(["tenantusages.dragate.io"], "watch")
    | grants(["namespaces", "pods", "jobs.batch", "jobsets.jobset.x-k8s.io",
              "leaderworkersets.leaderworkerset.x-k8s.io", "podgroups.scheduling.k8s.io"], "list")
    | grants(["namespaces"], "get")
    | grants([f"{k}/status" for k in POLICY_KINDS], "patch")
    | grants(REPORTS, "list")
    | grants(REPORTS, "create patch delete", REPORT_NAME)
    | grants(["leases.coordination.k8s.io"], "get update", LEASE_NAME)
    | grants(["leases.coordination.k8s.io"], "create")
    | grants(REWRITE, "get create patch delete", POLICY),
}  # fmt: skip


@pytest.mark.parametrize("account", [WEBHOOK, CONTROLLER], ids=["webhook", "controller"])
def test_can_i_list_is_exactly_the_role_s_grants(installed: Cluster, account: str) -> None:
    """Beyond what every service account holds (self reviews, discovery), the account
    holds its role's grants and nothing else: a rule added to the wrong role fails here."""
    extra = granted(installed, account) - granted(installed, NOBODY)
    expected = EXACTLY[account]
    assert extra == expected, json.dumps(
        {"unexpected": sorted(extra - expected), "missing": sorted(expected - extra)}, indent=1
    )
