"""What admission said about a workload's Pods: the denials and the warnings.

A Pod the webhook denied was never stored, so `why` cannot read it; its controller (the
ReplicaSet, the Job) records the attempt as a `FailedCreate` event quoting the webhook's
denial, one `[policy] message` per reason. A Pod admitted with warnings exists, and the
background audit writes each warning, with its policy and rule, to the namespace's `dragate`
PolicyReport.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from webhook.cli.clusterfacts import ClusterFacts
from webhook.cli.whyfindings import Finding, identity
from webhook.pipeline.audit import rule_of
from webhook.types import Object

DENIED = "denied the request: "
REASON = re.compile(r"\[(?P<policy>[^\]]+)\] (?P<message>.*?)(?=; \[|; and \d+ more|$)")
"""One reason of a denial as `denial_message` joins them: `[policy] message; [policy] ...`."""
REPORTED = ("fail", "warn")


def denials(text: str) -> list[tuple[str, str]]:
    """(policy, message) per reason of a webhook's denial quoted in `text`; [] when `text`
    quotes none."""
    _, found, denial = text.partition(DENIED)
    if not found:
        return []
    return [(m["policy"], m["message"]) for m in REASON.finditer(denial)]


def refused(facts: ClusterFacts, kind: str, namespace: str, name: str) -> Iterator[Finding]:
    """The last `FailedCreate` of workload `kind namespace/name`, a line per reason it quotes
    (blocking: its Pods cannot be created), or the event as written when it quotes none."""
    events = [e for e in facts.events(namespace, name, kind) if e.get("reason") == "FailedCreate"]
    if not events:
        return
    event, source = events[-1], f"{kind} {namespace}/{name}"
    message = str(event.get("message", ""))
    reasons = denials(message)
    for policy, text in reasons:
        yield Finding("denied", source, f"Pods denied by {policy}, rule {rule_of(policy)}: "
                      f"{text}", blocking=True)  # fmt: skip
    if not reasons:
        yield Finding("denied", source, f"FailedCreate: {message}", blocking=True)


def owner_refusals(facts: ClusterFacts, pod: Object) -> Iterator[Finding]:
    """The Pod's controller's denials of its other Pods: not this Pod's, so never blocking."""
    namespace, _ = identity(pod)
    for owner in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if owner.get("controller") and owner.get("kind") in WORKLOADS:
            found = refused(facts, str(owner["kind"]), namespace, str(owner.get("name")))
            yield from (Finding(f.cause, f.source, f.message) for f in found)


WORKLOADS = ("ReplicaSet", "Job", "StatefulSet", "DaemonSet")


def warned(facts: ClusterFacts, obj: Object) -> Iterator[Finding]:
    """The PolicyReport's failures and warnings for `obj` (admitted anyway): never blocking."""
    namespace, name = identity(obj)
    report = facts.policy_report(namespace)
    uid = (obj.get("metadata") or {}).get("uid")
    for result in (report or {}).get("results") or []:
        if result.get("result") in REPORTED and _about(result, str(obj.get("kind", "")), name, uid):
            yield Finding("warned", f"PolicyReport {namespace}/dragate", _reported(result))


def _about(result: Mapping[str, Any], kind: str, name: str, uid: Any) -> bool:
    for resource in result.get("resources") or []:
        if resource.get("kind") == kind and resource.get("name") == name:
            return not uid or not resource.get("uid") or resource.get("uid") == uid
    return False


def _reported(result: Mapping[str, Any]) -> str:
    return (f"{result.get('result')} by {result.get('policy')}, rule {result.get('rule')}: "
            f"{result.get('message')}")  # fmt: skip


REVISION = "deployment.kubernetes.io/revision"
"""The annotation the deployment controller numbers a Deployment's ReplicaSets by."""


def explain_workload(facts: ClusterFacts, kind: str, workload: Object) -> list[Finding]:
    """Why a workload lacks Pods: the denials its controller met, else that none was met. A
    Deployment creates no Pod itself: its current ReplicaSet (highest revision) does."""
    namespace, name = identity(workload)
    if kind == "Deployment":
        current = current_replica_set(facts.replica_sets(namespace), workload)
        if current is None:
            said = "no ReplicaSet yet: the deployment controller has not acted on it"
            return [Finding("admitted", f"Deployment {namespace}/{name}", said)]
        return explain_workload(facts, "ReplicaSet", current)
    found = list(refused(facts, kind, namespace, name))
    if not found:
        said = "no Pod creation refused (no FailedCreate event): ask why of each of its Pods"
        found.append(Finding("admitted", f"{kind} {namespace}/{name}", said))
    return found


def current_replica_set(replica_sets: list[Object], deployment: Object) -> Object | None:
    """The ReplicaSet of `deployment` with the highest revision: the one creating its Pods."""
    uid = (deployment.get("metadata") or {}).get("uid")
    owned = [rs for rs in replica_sets if _controlled_by(rs, uid)]
    return max(owned, key=_revision, default=None)


def _controlled_by(obj: Object, uid: object) -> bool:
    owners = (obj.get("metadata") or {}).get("ownerReferences") or []
    return any(o.get("controller") and o.get("uid") == uid for o in owners)


def _revision(replica_set: Object) -> int:
    text = str(((replica_set.get("metadata") or {}).get("annotations") or {}).get(REVISION, "0"))
    return int(text) if text.isdigit() else 0
