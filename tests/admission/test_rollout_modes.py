"""Rollout modes on the wire: /validate through the Flask app over the real pipeline.

An over-quota claim of a Tenant in Warn is admitted with kubectl warnings carrying the
numbers; in Audit with an audit annotation; both are counted in
`dragate_policy_violations_total`; in Deny it is refused as always.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from admission.admission_support import StaticLoader
from builders import claim, exact, request
from prometheus_client import REGISTRY

from webhook import pipeline
from webhook.admission.app import create_app
from webhook.admission.config import AdmissionOptions
from webhook.admission.reload import PolicyHolder
from webhook.kube.snapshot import SnapshotState
from webhook.ledger.memory import MemoryLedger
from webhook.pipeline import Context
from webhook.policy.loading import parse_policies

GPU = "gpu.nvidia.com"


def client(mode: str, tmp_path: Any) -> Any:
    policies = parse_policies(
        f"""
apiVersion: dragate.io/v1alpha1
kind: Tenant
metadata: {{name: rollout-{mode.lower()}}}
spec:
  namespaces: [team-a]
  enforcement: {mode}
  quota:
  - {{deviceClassName: {GPU}, maxDevices: 4}}
""",
        "inline.yaml",
    )
    holder = PolicyHolder([str(tmp_path)], StaticLoader(policies))
    ledger = MemoryLedger({f"rollout-{mode.lower()}": {"claim:team-a/old": {GPU: 3}}})
    context = Context(policies=holder.get, state=SnapshotState(), ledger=ledger)
    return create_app(context, holder, AdmissionOptions(), pipeline.review).test_client()


def validate(app: Any) -> dict[str, Any]:
    obj = claim(request(exact(count=2)), name="new")
    body = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u-1",
            "kind": {"group": "resource.k8s.io", "version": "v1", "kind": "ResourceClaim"},
            "resource": {"group": "resource.k8s.io", "version": "v1", "resource": "resourceclaims"},
            "operation": "CREATE",
            "namespace": "team-a",
            "name": "new",
            "object": obj,
        },
    }
    response = app.post("/validate", json=body)
    reply: dict[str, Any] = response.get_json()["response"]
    response.close()  # the review is counted once its reply is sent
    return reply


def violations_counted(mode: str) -> float:
    labels = {
        "policy": f"rollout-{mode.lower()}",
        "kind": "Tenant",
        "tenant": f"rollout-{mode.lower()}",
    }
    value = REGISTRY.get_sample_value(
        "dragate_policy_violations_total", {**labels, "mode": mode.lower()}
    )
    return value or 0.0


NUMBERS = "used 3 + requested 2 > limit 4"


@dataclass(frozen=True)
class Expected:
    allowed: bool
    warned: bool = False
    annotated: bool = False
    counted: float = 0.0


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("Deny", Expected(allowed=False)),
        ("Warn", Expected(allowed=True, warned=True, counted=1.0)),
        ("Audit", Expected(allowed=True, annotated=True, counted=1.0)),
    ],
    ids=["deny", "warn", "audit"],
)
def test_over_quota_claim_on_the_wire(tmp_path: Any, mode: str, expected: Expected) -> None:
    before = violations_counted(mode)
    reply = validate(client(mode, tmp_path))
    assert reply["allowed"] is expected.allowed
    if not expected.allowed:
        assert NUMBERS in reply["status"]["message"]
    warnings = reply.get("warnings", [])
    warned = any(w.startswith("dragate: [Warn] ") and NUMBERS in w for w in warnings)
    assert warned is expected.warned
    assert any("held by claim:team-a/old (3)" in w for w in warnings) is expected.warned
    annotation = reply["auditAnnotations"].get(f"tenant-rollout-{mode.lower()}", "")
    assert (NUMBERS in annotation and "claim:team-a/old (3)" in annotation) is expected.annotated
    assert reply["auditAnnotations"]["decision"] == ("allowed" if expected.allowed else "denied")
    assert violations_counted(mode) - before == expected.counted
