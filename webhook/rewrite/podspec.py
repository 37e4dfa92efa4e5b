"""Legacy GPU requests in one pod spec become DRA claims: the heart of the rewriter.

Works in place on a private deep copy (callers never see their input change). Each container
that asked for mapped resources gets its own pod claim, because the device plugin never shared
devices between containers and a shared claim would; several mapped resources in one container
become several requests of that one claim. A resource that a regular init container asks for
is the exception: the device plugin handed init devices on to the app containers, so those
containers share one claim sized to what the Pod needed before (`initshare`).

Linear in the number of containers: names are handed out by one `UniqueNames` per pod spec,
never by rescanning the claims already added.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from webhook.rewrite import initshare, nodes
from webhook.rewrite.initshare import Member, Role
from webhook.rewrite.mappings import Match, any_match, container_count, find_match
from webhook.rewrite.names import (
    UniqueNames,
    class_prefix,
    dns_label,
    request_name,
    template_name,
)
from webhook.rewrite.notes import note
from webhook.types import (
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    Deadline,
    LegacyResourceMapping,
    MappingAction,
    RewriteResult,
)
from webhook.types.adapters import NEVER
from webhook.types.kubelimits import ALLOCATION_RESULTS_MAX
from webhook.types.records import record

REPLACES_ANNOTATION = "dragate.io/replaces"
GPU_RESOURCE = "nvidia.com/gpu"


@record
class Options:
    """How to rewrite; `deadline` is passed at every container (`Deadline.checkpoint`)."""

    mappings: Sequence[LegacyResourceMapping]
    native_resources: frozenset[str] = frozenset()
    action_override: MappingAction | None = None
    namespace: str | None = None
    deadline: Deadline = NEVER


@dataclass
class Outcome:
    """What rewriting one object produced, accumulated over its pod specs."""

    notes: list[str] = field(default_factory=list)
    denied: list[str] = field(default_factory=list)
    templates: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class Wanted:
    """One DRA request a container needs in place of a legacy resource."""

    resource: str
    count: int
    match: Match

    @property
    def device_class(self) -> str:
        return self.match.entry.device_class


@dataclass
class Plan:
    container: dict[str, Any]
    role: Role = Role.APP
    mig_single: str | None = None  # why `nvidia.com/gpu` may mean a MIG slice in this Pod
    wanted: list[Wanted] = field(default_factory=list)
    remove: list[str] = field(default_factory=list)
    kept_legacy: bool = False


def rewrite_pod_spec(
    spec: dict[str, Any],
    mappings: Sequence[LegacyResourceMapping],
    *,
    native_resources: frozenset[str] = frozenset(),
    action_override: MappingAction | None = None,
    namespace: str | None = None,
) -> RewriteResult:
    """A rewritten copy of one pod spec, with the templates its claims need."""
    new = copy.deepcopy(spec)
    out = Outcome()
    rewrite_in_place(new, Options(mappings, native_resources, action_override, namespace), out)
    return RewriteResult(
        object=new,
        changed=new != spec,
        notes=tuple(out.notes),
        templates=tuple(out.templates.values()),
        denied=tuple(out.denied),
    )


def rewrite_in_place(spec: dict[str, Any], opts: Options, out: Outcome) -> set[str]:
    """Rewrite `spec` (already a private copy); returns the legacy resources it removed."""
    mig_single = nodes.mig_single_reason(spec)
    plans = [_plan(Plan(c, role, mig_single), opts, out) for c, role in _with_roles(spec)]
    checkpoint = opts.deadline.checkpoint
    plans = [p for p in plans if p.wanted or p.remove or p.kept_legacy]
    wanted = [w for p in plans for w in p.wanted]
    selectors = _carry_node_labels(spec, wanted, any(p.kept_legacy for p in plans), out)
    claims = spec.setdefault("resourceClaims", []) if wanted else spec.get("resourceClaims")
    names = UniqueNames(
        str(c.get("name")) for c in claims or [] if isinstance(c, dict) and c.get("name")
    )
    pod = PodClaims(spec, names, selectors, opts, out)
    shared = _shared_resources(plans, out)
    for plan in plans:
        _remove_legacy(plan)
        own = [w for w in plan.wanted if w.resource not in shared]
        if own:
            checkpoint("rewriting containers")
            pod.add_own(plan.container, own)
    for resource, members in shared.items():
        pod.add_shared(resource, members)
    return {r for p in plans for r in p.remove}


def asks_legacy(spec: Any, mappings: Sequence[LegacyResourceMapping]) -> bool:
    """Whether a container of the pod spec asks for a mapped (legacy) resource. Without one,
    a rewrite plans nothing: it makes no claim template and denies nothing. On every
    validated Pod, so plain loops: no lists, generators or call per resource name."""
    if not isinstance(spec, dict):
        return False
    for key in ("initContainers", "containers"):
        items = spec.get(key)
        if not isinstance(items, list):
            continue
        for container in items:
            resources = container.get("resources") if isinstance(container, dict) else None
            if not isinstance(resources, dict):
                continue
            for section in ("limits", "requests"):
                names = resources.get(section)
                if isinstance(names, dict) and names and any_match(names, mappings):
                    return True
    return False


def containers_of(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """Init containers (restartable sidecars included) then app containers; never ephemeral."""
    return [c for c, _ in _with_roles(spec)]


def _with_roles(spec: dict[str, Any]) -> list[tuple[dict[str, Any], Role]]:
    found: list[tuple[dict[str, Any], Role]] = []
    for key in ("initContainers", "containers"):
        items = spec.get(key)
        if isinstance(items, list):
            found.extend((c, _role(key, c)) for c in items if isinstance(c, dict))
    return found


def _role(key: str, container: dict[str, Any]) -> Role:
    if key == "containers":
        return Role.APP
    return Role.SIDECAR if container.get("restartPolicy") == "Always" else Role.INIT


def _plan(plan: Plan, opts: Options, out: Outcome) -> Plan:
    opts.deadline.checkpoint("planning the rewrite of containers")
    resources = plan.container.get("resources")
    if not isinstance(resources, dict):
        return plan
    for resource in _legacy_names(resources):
        match = find_match(resource, opts.mappings)
        if match is not None:
            _plan_resource(plan, resource, match, opts, out)
    return plan


def _legacy_names(resources: dict[str, Any]) -> list[str]:
    names: dict[str, None] = {}
    for section in ("limits", "requests"):
        value = resources.get(section)
        if isinstance(value, dict):
            names.update(dict.fromkeys(str(k) for k in value))
    return list(names)


def _plan_resource(plan: Plan, resource: str, match: Match, opts: Options, out: Outcome) -> None:
    action = opts.action_override or match.policy.action
    if action == MappingAction.IGNORE:
        return
    who = f'dragate: container "{plan.container.get("name", "")}": {resource}'
    cls = match.entry.device_class
    if action.keeps_native(resource, opts.native_resources):
        kept = _native_note(who, resource, opts.native_resources)
    elif action == MappingAction.WARN:
        kept = f"{who} is a legacy GPU request; use DRA class {cls}"
    elif action == MappingAction.DENY:
        plan.kept_legacy = True
        out.denied.append(note(f"{who} is a legacy GPU request; ask DRA class {cls} instead"))
        return
    else:
        kept = _plan_rewrite(plan, resource, match, who, out)
    if kept:
        plan.kept_legacy = True
        out.notes.append(note(kept))


def _native_note(who: str, resource: str, native: frozenset[str]) -> str:
    if resource in native:
        return f"{who} kept: a DeviceClass maps it (KEP-5004)"
    return f"{who} kept (Native): no DeviceClass maps it, only a device plugin"


def _plan_rewrite(plan: Plan, resource: str, match: Match, who: str, out: Outcome) -> str:
    """Plan the rewrite of one resource; returns why it is kept instead, or ""."""
    count, problem = container_count(plan.container["resources"], resource)
    if count is None:
        return f"{who} kept: {problem}"
    if resource == GPU_RESOURCE and plan.mig_single is not None and count > 0:
        return f"{who} kept: may be a MIG slice ({plan.mig_single})"
    plan.remove.append(resource)
    if count == 0:
        out.notes.append(note(f"{who}=0 removed: asks for no device"))
    else:
        plan.wanted.append(Wanted(resource, count, match))
    return ""


def _carry_node_labels(
    spec: dict[str, Any], wanted: list[Wanted], kept_legacy: bool, out: Outcome
) -> list[nodes.LabelRule]:
    """Node label rules to turn into selectors; removes those every claim now carries."""
    if not wanted:
        return []
    translation = nodes.translate(spec)
    out.notes.extend(note(w) for w in translation.warnings)
    classes = {w.device_class for w in wanted}
    removable = [r for r in translation.rules if not kept_legacy and classes <= r.classes]
    if removable:
        nodes.remove_rules(spec, removable)
        keys = ", ".join(dict.fromkeys(r.key for r in removable))
        out.notes.append(note(f"dragate: node labels {keys} -> device selectors on the claims"))
    return list(translation.rules)


def _remove_legacy(plan: Plan) -> None:
    resources = plan.container["resources"]
    for section in ("limits", "requests"):
        values = resources.get(section)
        if isinstance(values, dict):
            for resource in plan.remove:
                values.pop(resource, None)
            if not values:
                del resources[section]


SharedMembers = list[tuple[Plan, Wanted]]


def _shared_resources(plans: list[Plan], out: Outcome) -> dict[str, SharedMembers]:
    """Resources a regular init container asks for, each with every container asking it."""
    asked: dict[str, SharedMembers] = {}
    for plan in plans:
        for wanted in plan.wanted:
            asked.setdefault(wanted.resource, []).append((plan, wanted))
    shared: dict[str, SharedMembers] = {}
    for resource, members in asked.items():
        if not any(plan.role == Role.INIT for plan, _ in members):
            continue
        if initshare.layout(_members(members)) is None:
            text = (
                f"dragate: {resource}: init containers keep claims of their own; one claim "
                f"cannot hold more than {ALLOCATION_RESULTS_MAX} devices"
            )
            out.notes.append(note(text))
            continue
        shared[resource] = members
    return shared


def _members(members: SharedMembers) -> list[Member]:
    return [Member(plan.role, wanted.count) for plan, wanted in members]


@dataclass
class PodClaims:
    """Adds claims to one pod spec: names from one allocator, templates into the outcome."""

    spec: dict[str, Any]
    names: UniqueNames
    rules: list[nodes.LabelRule]
    opts: Options
    out: Outcome

    def add_own(self, container: dict[str, Any], wanted: list[Wanted]) -> None:
        """One claim for one container, with a request per legacy resource it asked for."""
        name = self.names.take(
            dns_label(f"{class_prefix(wanted[0].device_class)}-{container.get('name', '')}")
        )
        requests = [_request(w, self.rules) for w in wanted]
        template = build_template(requests, wanted, self.opts.namespace)
        self._add(name, template)
        container["resources"].setdefault("claims", []).append({"name": name})
        asked = ", ".join(f"{w.resource}={w.count}" for w in wanted)
        classes = ", ".join(dict.fromkeys(w.device_class for w in wanted))
        text = (
            f'dragate: container "{container.get("name", "")}": {asked} -> claim "{name}" '
            f"(class {classes})"
        )
        self.out.notes.append(note(text))

    def add_shared(self, resource: str, members: SharedMembers) -> None:
        """One claim for every container asking `resource`, sized as the device plugin was."""
        layout = initshare.layout(_members(members))
        assert layout is not None  # checked by _shared_resources
        first = members[0][1]
        request_names = UniqueNames(["init"])
        own = {
            i: request_names.take(dns_label(str(members[i][0].container.get("name", ""))))
            for i in layout.own
        }
        requests = [_request(members[i][1], self.rules, own[i], n) for i, n in layout.own.items()]
        if layout.extra:
            requests.append(_request(first, self.rules, "init", layout.extra))
        replaced = Wanted(resource, layout.total, first.match)
        template = build_template(requests, [replaced], self.opts.namespace, named=True)
        name = self.names.take(
            dns_label(f"{request_name(first.device_class, first.match.suffix)}-shared")
        )
        self._add(name, template)
        for i, (plan, _) in enumerate(members):
            refs = [own[j] for j in layout.refs[i]] if i in layout.refs else [own[i]]
            refs += ["init"] if i in layout.refs and layout.extra else []
            plan.container["resources"].setdefault("claims", []).extend(
                {"name": name, "request": r} for r in refs
            )
        text = (
            f'dragate: {resource}: init containers share claim "{name}" '
            f"({layout.total} devices, as with the device plugin)"
        )
        self.out.notes.append(note(text))

    def _add(self, name: str, template: dict[str, Any]) -> None:
        made = template["metadata"]["name"]
        self.spec["resourceClaims"].append({"name": name, "resourceClaimTemplateName": made})
        self.out.templates.setdefault((self.opts.namespace or "", made), template)


def _request(
    wanted: Wanted, rules: list[nodes.LabelRule], name: str | None = None, count: int | None = None
) -> dict[str, Any]:
    selectors = list(wanted.match.selectors)
    selectors += [r.expression for r in rules if r.expression and wanted.device_class in r.classes]
    exactly: dict[str, Any] = {
        "deviceClassName": wanted.device_class,
        "count": wanted.count if count is None else count,
    }
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": s}} for s in dict.fromkeys(selectors)]
    return {
        "name": name or request_name(wanted.device_class, wanted.match.suffix),
        "exactly": exactly,
    }


def build_template(
    requests: list[dict[str, Any]],
    wanted: list[Wanted],
    namespace: str | None,
    *,
    named: bool = False,
) -> dict[str, Any]:
    """A managed `resource.k8s.io/v1` ResourceClaimTemplate, named from what it asks for.

    `named`: containers refer to its requests by name, so the names are part of its identity.
    """
    metadata: dict[str, Any] = {"name": template_name(requests, named=named)}
    if namespace:
        metadata["namespace"] = namespace
    metadata["labels"] = {MANAGED_BY_LABEL: MANAGED_BY_VALUE}
    replaces = ", ".join(f"{w.resource}={w.count}" for w in wanted)
    metadata["annotations"] = {REPLACES_ANNOTATION: replaces}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": metadata,
        "spec": {"spec": {"devices": {"requests": requests}}},
    }
