"""The background audit: objects already in the cluster judged against the policies in force.

A policy changes after objects were admitted (a quota lowered, a rule added), and an object
admitted under a rollout mode other than Deny was never refused; the audit says which objects
break the current policies. Each object goes through `review` as the dry-run CREATE of itself,
the same judgment `kubectl apply --dry-run=server` would meet: a re-admitted object's own
devices are not counted twice, nothing is reserved and nothing is created. The caller hands
in a Context whose ledger holds what the cluster's claims hold (the truth, counted once per
pass), so the audit never reads or writes the admission ledger.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator, Mapping

from webhook.engine.violations import warnings_of
from webhook.pipeline.context import Context
from webhook.pipeline.offline import request_from_object
from webhook.pipeline.scope import handles
from webhook.types import (
    API_VERSION,
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    Action,
    AuditResult,
    ClassUsage,
    Object,
    PolicySet,
    Reason,
    Verdict,
)

Usage = Callable[[str], Mapping[str, ClassUsage]]
"""A tenant's usage per DeviceClass."""

AUDITED_KINDS = frozenset({"ResourceClaim", "ResourceClaimTemplate", "Pod"})
AUDITOR = {"username": "system:serviceaccount:dragate:audit"}
"""Who the audit's reviews come from: nobody Settings exempt by name."""
PASS_POLICY = "dragate"
PASS_RULE = "admission"
WARNING_PREFIX = "dragate: "


def audit(
    objects: Iterable[Object], context: Context, *, streamed: Iterable[Object] = ()
) -> Iterator[AuditResult]:
    """Results for every object of an audited kind that the webhook would review.

    Objects are judged namespace by namespace: a tenant's objects one after another share
    what the engine remembers of its rules' results, which objects in creation order across
    thousands of tenants never would (docs/benchmarks.md, the audit section). `objects` (the
    caches' claims and templates, in memory already) are sorted; `streamed` (the Pods, read a
    page at a time) come in namespace order as the API server lists them and are merged in as
    they are read, so a pass never holds every Pod of the cluster. It runs in the controller
    process, never on the loop that answers reviews."""
    from webhook.pipeline import review  # noqa: PLC0415  (the package imports this module)

    policies = context.policies()
    cached = sorted(filter(_audited, objects), key=_listed_order)
    for obj in heapq.merge(cached, filter(_audited, streamed), key=_listed_order):
        request = request_from_object(obj, dry_run=True, user_info=AUDITOR)
        if not handles(request, policies.settings, context.own, mutate=False).reviewed:
            continue
        yield from results_of(obj, review(request, context))


def _audited(obj: Object) -> bool:
    return obj.get("kind") in AUDITED_KINDS and not _own(obj)


def _own(obj: Object) -> bool:
    """A ResourceClaimTemplate dragate manages (the legacy rewrite's): never the user's."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return obj.get("kind") == "ResourceClaimTemplate" and (
        labels.get(MANAGED_BY_LABEL) == MANAGED_BY_VALUE
    )


def _listed_order(obj: Object) -> str:
    """The order the API server lists objects of a kind in, by namespace: its storage keys,
    `<namespace>/<name>`, compared bytewise (`team-a-x/` before `team-a/`)."""
    return str((obj.get("metadata") or {}).get("namespace", "")) + "/"


STANDARD_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage", "storage"})


def tenant_results(policies: PolicySet, usage: Usage) -> Iterator[AuditResult]:
    """Each tenant's usage against each `maxDevices` of its quota: pass, or fail when a quota
    was lowered below what the tenant holds. Cluster-scoped, like the Tenant."""
    for tenant in policies.tenants:
        held = usage(tenant.name)
        for limit in tenant.quota:
            if limit.max_devices is None:
                continue
            found = held.get(limit.device_class)
            used = found.used if found is not None else 0
            over = used > limit.max_devices
            message = (f"tenant '{tenant.name}' holds {used} {limit.device_class} devices, "
                       f"limit {limit.max_devices}")  # fmt: skip
            yield AuditResult(
                namespace="", api_version=API_VERSION, kind="Tenant", name=tenant.name, uid="",
                policy=f"Tenant/{tenant.name}", result="fail" if over else "pass",
                message=message, tenant=tenant.name, rule="maxDevices",
                properties={"deviceClassName": limit.device_class, "used": str(used),
                            "limit": str(limit.max_devices)},
            )  # fmt: skip


def asks_for_devices(pod: Object) -> bool:
    """A Pod that holds claims, or asks for an extended resource (`nvidia.com/gpu`): the only
    Pods the audit has something to say about."""
    spec = pod.get("spec") or {}
    if spec.get("resourceClaims"):
        return True
    containers = [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]
    for container in containers:
        resources = container.get("resources") or {}
        names = {*(resources.get("limits") or {}), *(resources.get("requests") or {})}
        if any(n not in STANDARD_RESOURCES and not n.startswith("hugepages-") for n in names):
            return True
    return False


def results_of(obj: Object, verdict: Verdict) -> Iterator[AuditResult]:
    """Fail per denial reason and per rule broken under Audit, warn per rule broken under
    Warn and per other warning; one pass when nothing was said."""
    decision = verdict.decision
    said = [("fail", reason) for reason in decision.reasons]
    said += [(_RESULT_OF[v.mode], v.reason) for v in decision.violations]
    for result, reason in said:
        numbers = _numbers(reason)
        yield _result(obj, reason.policy, result, reason.message, decision.tenant,
                      rule=reason.rule or rule_of(reason.policy), properties=numbers)  # fmt: skip
    of_violations = set(warnings_of(decision.violations))
    others = [w for w in decision.warnings if w not in of_violations]
    for warning in others:
        policy = _policy_of(warning)
        rule = PASS_RULE if policy == PASS_POLICY else rule_of(policy)
        yield _result(obj, policy, "warn", _undecorated(warning), decision.tenant, rule=rule)
    if not said and not others:
        yield _result(obj, PASS_POLICY, "pass", "admitted by every policy", decision.tenant,
                      rule=PASS_RULE)  # fmt: skip


_RESULT_OF = {Action.AUDIT: "fail", Action.WARN: "warn", Action.DENY: "fail"}


def _result(
    obj: Object, policy: str, result: str, message: str, tenant: str, *, rule: str,
    properties: dict[str, str] | None = None,
) -> AuditResult:  # fmt: skip
    meta = obj.get("metadata") or {}
    return AuditResult(
        namespace=str(meta.get("namespace", "")), api_version=str(obj.get("apiVersion", "")),
        kind=str(obj.get("kind", "")), name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")), policy=policy, result=result, message=message,
        tenant=tenant, properties=properties or {}, rule=rule,
    )  # fmt: skip


def _numbers(reason: Reason) -> dict[str, str]:
    """The numbers of a quota finding, as PolicyReport properties (strings)."""
    numbers = {
        "deviceClassName": reason.device_class,
        "used": reason.used,
        "limit": reason.limit,
        "requested": reason.requested,
    }
    return {k: str(v) for k, v in numbers.items() if v not in (None, "")}


def _policy_of(text: str) -> str:
    """The policy a warning names, `dragate: ... (gpu-rules)` as kubectl warnings end;
    dragate's own otherwise."""
    suffix = _suffix(text)
    return suffix[2:-1] if suffix else PASS_POLICY


def _suffix(text: str) -> str:
    """A kubectl warning's ` (policy)` ending; "" when the text has none."""
    if not text.endswith(")") or " (" not in text:
        return ""
    suffix = text[text.rindex(" (") :]
    return "" if " " in suffix[2:] else suffix


def _undecorated(text: str) -> str:
    """A warning as a report says it: without kubectl's `dragate: ` and ` (policy)` (the report
    names its policy and source in their own fields)."""
    text = text.removeprefix(WARNING_PREFIX)
    suffix = _suffix(text)
    return text[: -len(suffix)] if suffix else text


def rule_of(policy: str) -> str:
    """The rule of a finding that names none: a Tenant's quota, a DeviceClassPolicy's rules,
    or dragate's own check (`feasibility`, `device-class`...) named by itself."""
    kind, _, name = policy.partition("/")
    return {"Tenant": "quota", "DeviceClassPolicy": "rules"}.get(kind, name or kind)
