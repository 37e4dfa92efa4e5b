"""The Ready condition of each policy object: enforced, or left out and why.

`kubectl get` and GitOps tools (Argo CD and Flux read `status.conditions`) show whether the
object in the cluster is the policy in force. The condition is written from the set being
served, only for the generation that set judged (an object edited a moment ago waits for the
reload), only when it differs from what the object already says, and never on the admission
path. Every writer computes the same condition from the same objects, so several of them
agree after at most one redundant write each.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from webhook.kube.api import ApiError, KubeApi, Unreachable
from webhook.kube.background import BackgroundLoop
from webhook.kube.informer import Resource
from webhook.kube.policywatch import POLICY_KINDS, PolicyObjects
from webhook.types import FactsUnavailable, Object, ObjectVerdict, PolicySet

MERGE_PATCH = "application/merge-patch+json"
READY = "Ready"
MAX_MESSAGE = 32768
"""metav1.Condition's limit on `message`."""
log = logging.getLogger("dragate.kube.policystatus")
PATHS: Mapping[str, Resource] = {r.kind: r for r in POLICY_KINDS}


def ready_condition(verdict: ObjectVerdict, now: str) -> dict[str, Any]:
    """A metav1.Condition saying whether `verdict`'s generation is enforced."""
    return {
        "type": READY,
        "status": "True" if verdict.enforced else "False",
        "reason": "Enforced" if verdict.enforced else "Invalid",
        "message": "enforced" if verdict.enforced else verdict.message[:MAX_MESSAGE],
        "observedGeneration": verdict.generation,
        "lastTransitionTime": now,
    }


def status_patch(obj: Object, verdict: ObjectVerdict, now: str) -> dict[str, Any] | None:
    """The merge patch of `obj`'s status, or None when it already says the same."""
    want = ready_condition(verdict, now)
    have = _ready_of(obj)
    if have is not None and all(have.get(k) == want[k] for k in _COMPARED):
        return None
    if have is not None and have.get("status") == want["status"]:
        want["lastTransitionTime"] = have.get("lastTransitionTime", now)
    return {"status": {"observedGeneration": verdict.generation, "conditions": [want]}}


_COMPARED = ("status", "reason", "message", "observedGeneration")


def _ready_of(obj: Object) -> Mapping[str, Any] | None:
    status = obj.get("status")
    conditions = status.get("conditions") if isinstance(status, dict) else None
    found = [c for c in conditions or [] if isinstance(c, dict) and c.get("type") == READY]
    return found[0] if found else None


class PolicyStatusWriter(BackgroundLoop):
    """Keeps every policy object's Ready condition true to the set being served."""

    thread_name = "policy-status"

    def __init__(
        self,
        api: KubeApi,
        objects: PolicyObjects,
        served: Callable[[], PolicySet | None],
        *,
        interval: float = 2.0,
    ) -> None:
        super().__init__()
        self.api = api
        self.objects = objects
        self.served = served
        self.interval = interval

    def write_once(self) -> int:
        """Write every condition that differs; the number written."""
        policies = self.served()
        try:
            objects = self.objects.objects() if policies is not None else ()
        except FactsUnavailable:
            return 0
        verdicts = {(v.kind, v.name, v.generation): v for v in policies.objects} if policies else {}
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        written = 0
        for obj in objects:
            verdict = verdicts.get(_key(obj))
            patch = status_patch(obj, verdict, now) if verdict is not None else None
            if patch is not None and self._patch(obj, patch):
                written += 1
        return written

    def _patch(self, obj: Object, patch: dict[str, Any]) -> bool:
        resource = PATHS[str(obj.get("kind"))]
        name = str(obj["metadata"]["name"])
        try:
            self.api.request("PATCH", f"{resource.path}/{name}/status", body=patch,
                             content_type=MERGE_PATCH)  # fmt: skip
        except (ApiError, Unreachable) as err:  # deleted meanwhile, or the API is away
            log.warning("policy status not written", extra={"object": name, "error": str(err)})
            return False
        return True

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.write_once()
            except Exception:  # a status writer that dies would leave conditions stale forever
                log.exception("policy status pass failed")
            self._sleep(self.interval)


def _key(obj: Object) -> tuple[str, str, int]:
    metadata = obj.get("metadata") or {}
    generation = metadata.get("generation", 0)
    return (
        str(obj.get("kind")),
        str(metadata.get("name")),
        generation if isinstance(generation, int) else 0,
    )
