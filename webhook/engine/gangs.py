"""Gangs: a workload whose Pods are useful only all together, charged whole or not at all.

Quota charged Pod by Pod lets two 4-Pod training Jobs in an 8-device tenant take 2 + 2 Pods
each: neither can start, and together they hold every device (a partial-gang deadlock). A
gang's demand (every Pod it runs at once, `prediction.pod_groups`) is instead reserved at the
workload's creation under one holder, `gang:<namespace>/<kind>/<name>`, or the workload is
refused. Its Pods then draw from that holder (the pipeline sets a Pod's holders and lowers
the gang's in one reservation), so inside the gang a Pod costs nothing extra; a Pod beyond
the gang's size is charged as usual.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import Any

from webhook.engine.counting import add_charges, devices_by_class, holder_shown
from webhook.engine.extended import pod_special_claim
from webhook.engine.normalize import ObjectError, template_claim_spec
from webhook.engine.podgroups import is_podgroup, min_count, named_group, template_names_group
from webhook.engine.prediction import ChargesOf, demand, job_pods
from webhook.engine.quota import HOLDERS_SHOWN, NO_USAGE
from webhook.engine.violations import audit_of, is_violation, warnings_of
from webhook.types import (
    GANG_KINDS,
    Action,
    ClassUsage,
    Decision,
    Object,
    Reason,
    Tenant,
    Violation,
)

GANG_PREFIX = "gang:"
GANG_GROUPS = {
    "Job": "batch",
    "JobSet": "jobset.x-k8s.io",
    "LeaderWorkerSet": "leaderworkerset.x-k8s.io",
    "PodGroup": "scheduling.k8s.io",
}
"""The kinds that may be gangs, by the API group they belong to."""
GANG_ONLY_KINDS = frozenset({("scheduling.k8s.io", "PodGroup")})
"""Kinds judged only as gangs: a PodGroup holds no pod template to predict from."""
DEFAULT_GANG_KINDS = GANG_KINDS
JOBSET_LABEL = "jobset.sigs.k8s.io/jobset-name"
LWS_LABEL = "leaderworkerset.sigs.k8s.io/name"
FINISHED = frozenset({"Complete", "Completed", "Failed"})
"""Conditions of a Job (`Complete`, `Failed`) or JobSet (`Completed`, `Failed`) that end it."""


def is_gang(obj: Mapping[str, Any], kinds: frozenset[str]) -> bool:
    """Whether the workload is a gang: a listed kind of its own group; a PodGroup only with a
    gang policy; a workload whose Pods name a PodGroup never, when PodGroups are listed (the
    PodGroup carries it); a Job only when it runs more than one Pod at once and is not one of
    a JobSet's (its JobSet is the gang)."""
    kind = str(obj.get("kind", ""))
    group = str(obj.get("apiVersion", "")).rpartition("/")[0]
    if kind not in kinds or GANG_GROUPS.get(kind) != group:
        return False
    if is_podgroup(obj):
        return min_count(obj) > 0
    if "PodGroup" in kinds and template_names_group(obj):
        return False
    if kind != "Job":
        return True
    meta = obj.get("metadata") or {}
    owners = meta.get("ownerReferences") or []
    if JOBSET_LABEL in (meta.get("labels") or {}) or any(o.get("kind") == "JobSet" for o in owners):
        return False
    return job_pods(obj.get("spec") or {}) > 1


def gang_demand(obj: Mapping[str, Any], charges_of: ChargesOf) -> dict[str, int]:
    """Devices per class of the whole gang: each Pod charged as its CREATE would be."""
    return {c: n for c, n in demand(obj, charges_of).items() if n}


def gang_key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return key_of(str(meta.get("namespace", "")), str(obj.get("kind", "")), str(meta.get("name")))


def key_of(namespace: str, kind: str, name: str) -> str:
    return f"{GANG_PREFIX}{namespace}/{kind}/{name}"


def pod_gang(pod: Mapping[str, Any], namespace: str, kinds: frozenset[str]) -> str | None:
    """The holder of the gang a Pod belongs to: the PodGroup it names (or, for a claim, the
    PodGroup that owns it) when PodGroups are listed, its JobSet's or LeaderWorkerSet's (by
    the label their controllers set), else the Job that owns it; None for any other Pod."""
    meta = pod.get("metadata") or {}
    group = named_group(pod) or _owner_named(meta, "PodGroup")
    if group is not None and "PodGroup" in kinds:
        return key_of(namespace, "PodGroup", group)
    labels = meta.get("labels") or {}
    for kind, label in (("JobSet", JOBSET_LABEL), ("LeaderWorkerSet", LWS_LABEL)):
        if labels.get(label):
            return key_of(namespace, kind, str(labels[label])) if kind in kinds else None
    for owner in meta.get("ownerReferences") or []:
        if isinstance(owner, Mapping) and owner.get("kind") == "Job" and owner.get("name"):
            return key_of(namespace, "Job", str(owner["name"])) if "Job" in kinds else None
    return None


def _owner_named(meta: Mapping[str, Any], kind: str) -> str | None:
    for owner in meta.get("ownerReferences") or []:
        if isinstance(owner, Mapping) and owner.get("kind") == kind and owner.get("name"):
            return str(owner["name"])
    return None


def is_suspended(obj: Mapping[str, Any]) -> bool:
    return (obj.get("spec") or {}).get("suspend") is True


def is_finished(obj: Mapping[str, Any]) -> bool:
    """Whether a Job or JobSet has ended: its Pods hold nothing more of the gang."""
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(
        isinstance(c, Mapping) and c.get("type") in FINISHED and c.get("status") == "True"
        for c in conditions
    )


def gang_reasons(
    tenant: Tenant,
    name: str,
    needed: Mapping[str, int],
    usage: Mapping[str, ClassUsage],
    replaced: Mapping[str, int],
) -> Iterator[Reason]:
    """Why the gang `name` (`<namespace>/<name>`) does not fit whole: per class over
    `maxDevices`, its demand, what is free (its own holder's share, `replaced`, counts as free)
    and who holds the rest."""
    for device_class, devices in sorted(needed.items()):
        limit = tenant.limit_for(device_class)
        if limit is None or limit.max_devices is None:
            continue
        class_usage = usage.get(device_class, NO_USAGE)
        used = class_usage.used - replaced.get(device_class, 0)
        if used + devices <= limit.max_devices:
            continue
        free = max(limit.max_devices - used, 0)
        yield Reason(
            policy=f"Tenant/{tenant.name}",
            message=f"gang {name} needs {devices} {device_class}; tenant {tenant.name} has "
            f"{free} free{_held_by(class_usage)}",
            tenant=tenant.name,
            device_class=device_class,
            used=used,
            limit=limit.max_devices,
            requested=devices,
        )


def _held_by(usage: ClassUsage) -> str:
    holders = sorted(usage.holders, key=lambda h: (-h.devices, h.key))
    shown = [f"{holder_shown(h.key, h.name)} ({h.devices})" for h in holders[:HOLDERS_SHOWN]]
    more = len(holders) - len(shown)
    text = ", ".join(shown) + (f" and {more} more" if more > 0 else "")
    return f" (held by {text})" if text else ""


def pod_charges(
    pod_spec: Mapping[str, Any],
    template: Callable[[str], Object | None],
    device_classes: Mapping[str, Object] = MappingProxyType({}),
) -> dict[str, int]:
    """Devices per class a Pod with `pod_spec` is charged at its CREATE: its claim templates'
    (`template` finds one by name; one not found, or a claim named by `resourceClaimName`,
    adds nothing, as at the Pod's admission). Legacy extended resources count once rewritten:
    the caller hands in the rewritten pod spec and the templates the rewrite makes; those a
    DeviceClass of `device_classes` maps (KEP-5004) count as the claim kube-scheduler makes."""
    special = pod_special_claim({"spec": pod_spec}, device_classes)
    charges = [devices_by_class(special)] if special is not None else []
    for claim in pod_spec.get("resourceClaims") or []:
        name = claim.get("resourceClaimTemplateName") if isinstance(claim, Mapping) else None
        found = template(name) if isinstance(name, str) and name else None
        if found is not None:
            charges.append(_template_charges(found))
    return add_charges(charges)


def _template_charges(found: Object) -> dict[str, int]:
    try:
        return devices_by_class(template_claim_spec(found, "template"))
    except ObjectError:
        return {}  # a malformed template was refused at its own creation


def gang_target(
    new: Mapping[str, Any],
    old: Mapping[str, Any] | None,
    needed: Mapping[str, int],
    old_needed: Mapping[str, int],
    held: Mapping[str, int],
) -> dict[str, int] | None:
    """What the gang's holder must hold after this CREATE (`old` None) or UPDATE; None when
    the holder is left as it is.

    Suspended or finished: nothing (charged again when it runs). Starting (created running,
    or unsuspended): the whole demand. Running and scaled: the holder as its Pods left it,
    moved by the change of demand, never below 0.
    """
    if is_suspended(new) or is_finished(new):
        return {} if old is not None else None
    if old is None or is_suspended(old):
        return dict(needed)
    if dict(needed) == dict(old_needed):
        return None
    classes = set(needed) | set(old_needed) | set(held)
    moved = {c: held.get(c, 0) + needed.get(c, 0) - old_needed.get(c, 0) for c in classes}
    return {c: n for c, n in moved.items() if n > 0}


def gang_decision(
    tenant: Tenant,
    key: str,
    name: str,
    target: Mapping[str, int],
    usage: Mapping[str, ClassUsage],
    *,
    released: tuple[str, ...] = (),
) -> Decision:
    """The gang's verdict on `usage` (its own holder's share counted as free, and that of the
    holders it takes over, `released`: a Job's, when the PodGroup its controller made carries
    the gang): refused under Deny when it does not fit whole, told under Warn or Audit;
    `holds` its holder's target (first) and nothing for each released holder."""
    own = {c: u.held_by((key, *released)) for c, u in usage.items()}
    reasons = list(gang_reasons(tenant, name, target, usage, own))
    action = tenant.enforcement
    violations = tuple(Violation(action, r) for r in reasons if is_violation(action, r))
    return Decision(
        allowed=action != Action.DENY or not reasons,
        reasons=tuple(reasons) if action == Action.DENY else (),
        warnings=tuple(warnings_of(violations)),
        audit=audit_of(violations),
        tenant=tenant.name,
        holds={key: dict(target), **{r: {} for r in released if r != key}},
        violations=violations,
    )
