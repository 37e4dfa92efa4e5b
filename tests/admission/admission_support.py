"""Test support for the admission tests: a pipeline double and AdmissionReview builders.

The double sits at dragate's own adapter boundary, `review(request, context, *, mutate)`.
Used by the Flask test-client tests and, through `serve_with_double.py`, by the real-server
tests, so HTTP, TLS, deadlines and reload are tested without depending on engine details.
Behaviour is chosen by labels on the admitted object:
  deny=yes    -> denied by a quota reason with numbers
  crash=yes   -> raises (an internal bug: HTTP 500)
  sleep=<s>   -> waits that long first (as on the API server), stopping at the deadline as
                 the pipeline does
  thread=yes  -> a warning names the thread that answered
A namespace that no tenant of the current policy set lists is denied by policy "tenancy", so
policy reloads are visible from outside.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from webhook.types import (
    AdmissionRequest,
    Deadline,
    Decision,
    PolicySet,
    Reason,
    Tenant,
    Verdict,
)

PATCH = ({"op": "add", "path": "/metadata/labels/dragate.io~1seen", "value": "yes"},)


def review(
    request: AdmissionRequest,
    context: Any,
    *,
    mutate: bool = False,
    deadline: Deadline | None = None,
) -> Verdict:
    labels = ((request.object or {}).get("metadata") or {}).get("labels") or {}
    if "sleep" in labels:
        deadline = deadline or Deadline.never()
        time.sleep(deadline.bound(float(labels["sleep"])))
        deadline.check("the double's next step")
    if labels.get("crash"):
        raise RuntimeError("boom")
    tenants = [t for t in context.policies().tenants if request.namespace in t.namespaces]
    if not tenants:
        reason = Reason(policy="tenancy", message=f"namespace {request.namespace} has no tenant")
        return Verdict(Decision(allowed=False, reasons=(reason,)))
    tenant = tenants[0].name
    if labels.get("deny"):
        return Verdict(Decision(allowed=False, reasons=(quota_reason(tenant),), tenant=tenant))
    warnings: tuple[str, ...] = ("dry run: nothing reserved",) if request.dry_run else ()
    if labels.get("thread"):
        warnings += (f"answered by {threading.current_thread().name}",)
    audit = {"dragate.io/tenant": tenant}
    if mutate:
        notes = (*warnings, "labelled dragate.io/seen")
        return Verdict(Decision(tenant=tenant, warnings=notes, audit=audit), patch=PATCH)
    return Verdict(Decision(tenant=tenant, warnings=warnings, audit=audit))


def quota_reason(tenant: str) -> Reason:
    return Reason(
        policy="quota",
        message="too many GPUs",
        tenant=tenant,
        device_class="gpu.nvidia.com",
        used=6,
        limit=8,
        requested=4,
        holders=("team-a/train-1",),
    )


# --------------------------------------------------------------------------- helpers

POLICIES = PolicySet(tenants=(Tenant("team-a", frozenset({"team-a"})),), digest="d1")


def pod(namespace: str = "team-a", **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": namespace, "labels": dict(labels)},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }


def review_body(obj: dict[str, Any] | None = None, **request: Any) -> dict[str, Any]:
    """An AdmissionReview as the apiserver sends it; keyword arguments override request fields."""
    obj = pod() if obj is None else obj
    base: dict[str, Any] = {
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
        "operation": "CREATE",
        "namespace": obj.get("metadata", {}).get("namespace", ""),
        "name": obj.get("metadata", {}).get("name", ""),
        "object": obj,
        "oldObject": None,
        "dryRun": False,
        "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
    }
    base.update(request)
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": base}


def encode(body: Any) -> bytes:
    return json.dumps(body).encode()


class StaticLoader:
    """A policy loader for PolicyHolder that returns whatever `result` is (or raises it)."""

    def __init__(self, result: PolicySet | Exception = POLICIES) -> None:
        self.result = result

    def __call__(self, paths: Any) -> PolicySet:
        if isinstance(self.result, Exception):
            raise self.result
        return self.result
