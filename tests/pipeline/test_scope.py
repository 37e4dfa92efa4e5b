"""What is reviewed at all: `handles`, the one decision every path (webhook and CLI) makes."""

from __future__ import annotations

from typing import Any

import pytest
from builders import claim, exact, namespace, pod, request, template

from webhook.kube.snapshot import SnapshotState
from webhook.ledger.memory import MemoryLedger
from webhook.pipeline import Context, Identity, handles, review
from webhook.types import AdmissionRequest, FactsUnavailable, Operation, PolicySet, Settings

SETTINGS = Settings(
    exempt_namespaces=frozenset({"kube-system"}),
    exempt_service_accounts=frozenset({"system:serviceaccount:ops:sweeper"}),
)
OWN = Identity("dragate-system", "dragate")
CLAIM = claim(request(exact(count=99)))
DEPLOYMENT = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}}
VOLCANO_JOB = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {}}
CONFIG_MAP = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
TENANT = {"apiVersion": "dragate.io/v1alpha1", "kind": "Tenant", "metadata": {"name": "t"}}
TENANT_USAGE = {"apiVersion": "dragate.io/v1alpha1", "kind": "TenantUsage", "metadata": {}}


def admission(
    obj: dict[str, Any] | None, operation: Operation = Operation.CREATE, **fields: Any
) -> AdmissionRequest:
    source = obj or CLAIM
    group, _, version = str(source["apiVersion"]).rpartition("/")
    base: dict[str, Any] = {
        "uid": "u", "kind": source["kind"], "group": group, "version": version,
        "resource": str(source["kind"]).lower() + "s", "operation": operation,
        "namespace": "team-a", "object": obj, "user_info": {"username": "alice"},
    }  # fmt: skip
    return AdmissionRequest(**{**base, **fields})


def user(name: str) -> dict[str, Any]:
    return {"user_info": {"username": name}}


CASES = [
    # (id, request, mutate, why it is not reviewed: "" when it is)
    ("claim-create", admission(CLAIM), False, ""),
    ("template-create", admission(template(request(exact()))), False, ""),
    ("pod-create", admission(pod()), False, ""),
    ("dry-run-create", admission(CLAIM, dry_run=True), False, ""),
    ("namespace-create", admission(namespace("n")), False, ""),
    ("namespace-update", admission(namespace("n"), Operation.UPDATE), False, ""),
    (
        "namespace-without-object",
        admission(namespace("n"), Operation.UPDATE, object=None),
        False,
        "",
    ),
    ("deployment-create", admission(DEPLOYMENT), False, ""),
    ("deployment-update", admission(DEPLOYMENT, Operation.UPDATE), False, ""),
    ("claim-update", admission(CLAIM, Operation.UPDATE), False, "UPDATE of a ResourceClaim"),
    ("pod-update", admission(pod(), Operation.UPDATE), False, "UPDATE of a Pod"),
    ("volcano-job", admission(VOLCANO_JOB), False, "CREATE of a Job"),
    ("config-map", admission(CONFIG_MAP), False, "CREATE of a ConfigMap"),
    ("no-object", admission(None), False, "no object to review"),
    ("delete", admission(None, Operation.DELETE, old_object=CLAIM), False, "DELETE"),
    ("namespace-delete", admission(namespace("n"), Operation.DELETE), False, "DELETE"),
    ("connect", admission(pod(), Operation.CONNECT), False, "CONNECT"),
    ("status", admission(pod(), Operation.UPDATE, sub_resource="status"), False, "status"),
    ("status-create", admission(CLAIM, sub_resource="status"), False, "status writes"),
    (
        "ephemeral",
        admission(pod(), Operation.UPDATE, sub_resource="ephemeralcontainers"),
        False,
        "ephemeral containers",
    ),
    ("resize", admission(pod(), Operation.UPDATE, sub_resource="resize"), False, "resize"),
    ("binding", admission(pod(), sub_resource="binding"), False, "subresource 'binding'"),
    ("own-namespace", admission(CLAIM, namespace="dragate-system"), False, "own namespace"),
    (
        "own-service-account",
        admission(CLAIM, **user("system:serviceaccount:dragate-system:dragate")),
        False,
        "own service account",
    ),
    (
        "same-name-elsewhere",
        admission(CLAIM, **user("system:serviceaccount:ml:dragate")),
        False,
        "",
    ),
    ("settings-namespace", admission(CLAIM, namespace="kube-system"), False, "is exempt"),
    (
        "settings-service-account",
        admission(CLAIM, **user("system:serviceaccount:ops:sweeper")),
        False,
        "is exempt",
    ),
    ("policy-object-create", admission(TENANT, namespace=""), False, ""),
    ("policy-object-update", admission(TENANT, Operation.UPDATE, namespace=""), False, ""),
    ("policy-object-delete", admission(None, Operation.DELETE, kind="Tenant"), False, "DELETE"),
    (
        "policy-object-status",
        admission(TENANT, Operation.UPDATE, sub_resource="status"),
        False,
        "status writes",
    ),
    ("tenant-usage", admission(TENANT_USAGE), False, "CREATE of a TenantUsage"),
    ("mutate-policy-object", admission(TENANT), True, "only Pod creations"),
    ("mutate-pod-create", admission(pod()), True, ""),
    ("mutate-pod-update", admission(pod(), Operation.UPDATE), True, "only Pod creations"),
    ("mutate-claim", admission(CLAIM), True, "only Pod creations"),
    ("mutate-deployment", admission(DEPLOYMENT), True, "only Pod creations"),
    ("mutate-no-object", admission(pod(), object=None), True, "only Pod creations"),
    ("mutate-status", admission(pod(), sub_resource="status"), True, "status writes"),
    ("mutate-delete", admission(None, Operation.DELETE, kind="Pod"), True, "DELETE"),
    ("mutate-own-namespace", admission(pod(), namespace="dragate-system"), True, "own namespace"),
    ("mutate-settings-namespace", admission(pod(), namespace="kube-system"), True, "is exempt"),
]


@pytest.mark.parametrize(
    ("req", "mutate", "why"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_handles(req: AdmissionRequest, mutate: bool, why: str) -> None:
    handling = handles(req, SETTINGS, OWN, mutate=mutate)
    assert handling.reviewed is (why == "")
    assert why in handling.exempt


@pytest.mark.parametrize(
    ("own", "name", "reviewed"),
    [
        (
            Identity("dragate-system", "dragate"),
            "system:serviceaccount:dragate-system:dragate",
            False,
        ),
        (Identity("", "dragate"), "system:serviceaccount:default:dragate", False),
        (Identity("x", "system:serviceaccount:y:z"), "system:serviceaccount:y:z", False),
        (Identity("dragate-system", ""), "system:serviceaccount:dragate-system:", True),
        (Identity(), "", True),
    ],
    ids=["short-name", "default-namespace", "full-name", "no-account", "nothing"],
)
def test_own_service_account(own: Identity, name: str, reviewed: bool) -> None:
    req = admission(CLAIM, namespace="team-a", **user(name))
    assert handles(req, Settings(), own, mutate=False).reviewed is reviewed


class NoState(SnapshotState):
    """Fails any read: an exempt request must be answered before facts are gathered."""

    def namespace(self, name: str) -> dict[str, Any] | None:
        raise FactsUnavailable("read")


@pytest.mark.parametrize("mutate", [False, True], ids=["validate", "mutate"])
def test_an_exempt_request_reads_no_facts(mutate: bool) -> None:
    ctx = Context(
        policies=lambda: PolicySet(settings=SETTINGS),
        state=NoState(()),
        ledger=MemoryLedger(),
        own=OWN,
    )
    verdict = review(admission(pod(), namespace="dragate-system"), ctx, mutate=mutate)
    assert verdict.allowed and "own namespace" in verdict.exempt
    reviewed = review(admission(pod()), ctx, mutate=mutate)
    assert not reviewed.exempt


def unloaded() -> PolicySet:
    raise FactsUnavailable("policies not loaded yet: Tenant objects not listed yet")


UNLOADED = [
    # (id, request, mutate, allowed, what the answer says)
    ("claim", admission(CLAIM), False, False, "policies not loaded yet"),
    ("own-namespace", admission(CLAIM, namespace="dragate-system"), False, True, ""),
    ("pod-rewrite", admission(pod()), True, True, "not rewritten"),
    ("config-map", admission(CONFIG_MAP), False, True, ""),
]


@pytest.mark.parametrize(
    ("req", "mutate", "allowed", "said"), [c[1:] for c in UNLOADED], ids=[c[0] for c in UNLOADED]
)
def test_before_policies_are_loaded_validation_fails_closed(
    req: AdmissionRequest, mutate: bool, allowed: bool, said: str
) -> None:
    ctx = Context(policies=unloaded, state=NoState(()), ledger=MemoryLedger(), own=OWN)
    verdict = review(req, ctx, mutate=mutate)
    assert verdict.allowed is allowed
    text = " ".join([*verdict.decision.warnings, *(r.message for r in verdict.decision.reasons)])
    assert said in text
