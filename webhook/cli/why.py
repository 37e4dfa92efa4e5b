"""Why a Pod is Pending: `kubectl dragate why POD`, each finding citing its object.

Three sources, most decisive first: the tenant's quota (would the Pod's devices pass its
limit, and who holds them), the claims (does each exist; could any node ever satisfy it,
by the engine's feasibility over the published ResourceSlices; is it allocated), and the
scheduler's own word (its last FailedScheduling event and the PodScheduled condition,
quoted as written). A Pod with a node is scheduled; one with nothing in its way is waiting
for the scheduler.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from webhook.cli.clusterfacts import ClusterFacts
from webhook.cli.refusals import owner_refusals, warned
from webhook.cli.usagerows import UsageRow, holders_text, usage_rows
from webhook.cli.whybinding import binding_findings
from webhook.cli.whyfindings import Finding, identity
from webhook.engine.counting import devices_by_class, holder_key, pod_holder_key
from webhook.engine.devices import Device
from webhook.engine.feasibility import needed_devices, unsatisfied
from webhook.engine.gangs import GANG_PREFIX
from webhook.engine.inventory import Inventory, class_selectors
from webhook.engine.nodefit import admits, constrained, constraints_text
from webhook.engine.normalize import ObjectError, claim_spec, pod_claims, template_claim_spec
from webhook.engine.occupancy import Blockage, DeviceKey, Holding, Occupancy, blockage, device_key
from webhook.engine.tenancy import namespace_labels, resolve_tenant
from webhook.types import ClaimSpec, DeviceRequest, Object, PodClaim, Tenant

QUOTED_EVENTS = ("FailedScheduling", "FailedResourceClaimCreation")
"""The scheduler's, and the resourceclaim controller's when a claim could not be made."""


_RANK = {"quota": 0, "claim": 1, "feasibility": 1, "node": 1, "allocated": 1, "counters": 1,
         "binding": 1, "scheduler": 2}  # fmt: skip


def explain(facts: ClusterFacts, pod: Object) -> list[Finding]:
    """The findings for `pod`, blocking ones first (quota, claims, the scheduler's)."""
    namespace, name = identity(pod)
    node = (pod.get("spec") or {}).get("nodeName")
    said = [*warned(facts, pod), *owner_refusals(facts, pod)]
    if node:
        return [Finding("scheduled", f"Pod {namespace}/{name}", f"scheduled on {node}"), *said]
    claims = PodClaims(facts, pod)
    found = [*claims.findings(), *quota_findings(facts, pod, claims), *scheduler(facts, pod)]
    ordered = sorted(found, key=lambda f: (not f.blocking, _RANK.get(f.cause, 3)))
    if not any(f.blocking for f in found):
        waiting = Finding("schedulable", f"Pod {namespace}/{name}", "waiting for the scheduler")
        ordered.insert(0, waiting)
    return [*ordered, *said]


@dataclass
class PodClaims:
    """The Pod's claims: what each needs, and whether it exists, is allocated or feasible."""

    facts: ClusterFacts
    pod: Object
    needs: dict[str, int] = field(default_factory=dict)  # devices per class, all claims
    keys: set[str] = field(default_factory=set)  # the ledger keys the Pod's devices are held at

    def findings(self) -> Iterator[Finding]:
        for claim in pod_claims(self.pod):
            yield from self._claim(claim)

    def _claim(self, ref: PodClaim) -> Iterator[Finding]:
        namespace, _ = identity(self.pod)
        claim_name = ref.claim_name or self._generated(ref.name)
        if claim_name is not None:
            yield from self._existing(namespace, claim_name, ref)
        elif ref.template_name is not None:
            yield from self._templated(namespace, ref.template_name, ref)

    def _generated(self, pod_claim: str) -> str | None:
        statuses = (self.pod.get("status") or {}).get("resourceClaimStatuses") or []
        found = [s.get("resourceClaimName") for s in statuses if s.get("name") == pod_claim]
        return str(found[0]) if found and found[0] else None

    def _existing(self, namespace: str, name: str, ref: PodClaim) -> Iterator[Finding]:
        source = f"ResourceClaim {namespace}/{name}"
        claim = self.facts.claim(namespace, name)
        if claim is None:
            yield Finding("claim", source, "does not exist", blocking=True)
            return
        self.keys.add(holder_key(claim))
        allocation = (claim.get("status") or {}).get("allocation")
        if allocation:
            self.count(claim_spec, claim, source)
            yield Finding("claim", source, f"allocated: {_devices(allocation)}")
            yield from binding_findings(claim, self.devices)
            return
        yield from self.feasible(claim_spec, claim, source, f"pod claim {ref.name!r}")

    def _templated(self, namespace: str, name: str, ref: PodClaim) -> Iterator[Finding]:
        source = f"ResourceClaimTemplate {namespace}/{name}"
        template = self.facts.template(namespace, name)
        if template is None:
            yield Finding("claim", source, "does not exist", blocking=True)
            return
        uid = str((self.pod.get("metadata") or {}).get("uid", ""))
        self.keys.add(pod_holder_key(uid, ref.name))
        yield Finding("claim", source, f"pod claim {ref.name!r}: no ResourceClaim made yet")
        yield from self.feasible(template_claim_spec, template, source, f"pod claim {ref.name!r}")

    def feasible(self, read: Any, obj: Object, source: str, what: str) -> Iterator[Finding]:
        """Why no node could ever satisfy `obj` (blocking), or that its devices match."""
        spec = self.count(read, obj, source)
        if spec is None:
            yield Finding("claim", source, "cannot be read", blocking=True)
            return
        reasons = unsatisfied(self.inventory, spec, self.device_classes)
        for reason in reasons:
            yield Finding("feasibility", source, reason, blocking=True)
        if not reasons:
            yield Finding("feasibility", source, f"{what}: devices match")
            yield from self.occupied(spec, source)

    def occupied(self, spec: ClaimSpec, source: str) -> Iterator[Finding]:
        """What keeps devices that match from this claim now: the Pod's node constraints,
        allocations to other claims, counters of partitionable devices used up."""
        for request in spec.requests:
            found = [self._blockage(leaf) for leaf in request.leaves()]
            if found and all(found):
                block = found[0]
                assert block is not None
                cited = block.source or f"Pod {'/'.join(identity(self.pod))}"
                text = block.message
                if block.cause == "node":
                    text = f"{text}: {constraints_text(self.pod)}; {source}"
                yield Finding(block.cause, cited, text, blocking=True)

    def _blockage(self, leaf: DeviceRequest) -> Blockage | None:
        device_class = self.device_classes.get(leaf.device_class)
        expressions = [*class_selectors(device_class), *leaf.selectors]
        selection = self.inventory.select(expressions, leaf.tolerations)
        matching = [d for devices in selection.by_node.values() for d in devices]
        return blockage(leaf.name, needed_devices(leaf), matching, self.occupancy, self.allowed)

    def allowed(self, node: str | None) -> bool:
        return node is None or self.admitted is None or node in self.admitted

    @functools.cached_property
    def admitted(self) -> frozenset[str] | None:
        """The Nodes the Pod may run on; None when it does not narrow them."""
        if not constrained(self.pod):
            return None
        nodes = self.facts.nodes()
        return frozenset(str(n["metadata"]["name"]) for n in nodes if admits(self.pod, n))

    @functools.cached_property
    def occupancy(self) -> Occupancy:
        held = {k: h for c in self.facts.claims() for k, h in _holdings(c)}
        return Occupancy(held, self.devices, self.inventory.counters)

    @functools.cached_property
    def devices(self) -> dict[DeviceKey, Device]:
        """The published devices by driver and `pool/device`."""
        return {device_key(d): d for g in self.inventory.groups for d in g.devices}

    def count(self, read: Any, obj: Object, label: str) -> ClaimSpec | None:
        try:
            spec: ClaimSpec = read(obj, label)
        except ObjectError:
            return None
        for device_class, devices in devices_by_class(spec).items():
            self.needs[device_class] = self.needs.get(device_class, 0) + devices
        return spec

    @functools.cached_property
    def inventory(self) -> Inventory:
        return self.facts.inventory()

    @functools.cached_property
    def device_classes(self) -> dict[str, Object]:
        return self.facts.device_classes()


def _holdings(claim: Object) -> Iterator[tuple[DeviceKey, Holding]]:
    namespace, name = identity(claim)
    status = claim.get("status") or {}
    results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
    pods = tuple(
        f"{namespace}/{c.get('name')}" for c in status.get("reservedFor") or []
        if _consumer_kind(c) == "Pod"
    )  # fmt: skip
    for result in results:
        key = (str(result.get("driver")), f"{result.get('pool')}/{result.get('device')}")
        yield key, Holding(f"ResourceClaim {namespace}/{name}", pods)


def _devices(allocation: Mapping[str, Any]) -> str:
    results = (allocation.get("devices") or {}).get("results") or []
    named = [f"{r.get('driver')}/{r.get('pool')}/{r.get('device')}" for r in results]
    return ", ".join(named) or "no devices"


def explain_claim(facts: ClusterFacts, claim: Object) -> list[Finding]:
    """The findings for a ResourceClaim, the claim's own state first: its devices and the Pods
    it is reserved for, or why no node could satisfy it; then the tenant's quota for the
    classes it asks for (never blocking once the claim holds its devices)."""
    namespace, name = identity(claim)
    source = f"ResourceClaim {namespace}/{name}"
    own = PodClaims(facts, claim)  # the claim stands in for a Pod: its namespace, its holder
    own.keys.add(holder_key(claim))
    status = claim.get("status") or {}
    found: list[Finding] = []
    if status.get("allocation"):
        own.count(claim_spec, claim, source)
        allocated = f"allocated: {_devices(status['allocation'])}; {_reserved(status, namespace)}"
        found.append(Finding("claim", source, allocated))
        found += binding_findings(claim, own.devices)
    else:
        found += own.feasible(claim_spec, claim, source, "claim")
        if not any(f.blocking for f in found):
            waiting = "not allocated: the scheduler allocates it for the first Pod that uses it"
            found.insert(0, Finding("claim", source, waiting))
    quota = quota_findings(facts, claim, own, who="claim")
    held = bool(status.get("allocation"))  # its devices are its own: quota cannot block it
    found += (dataclasses.replace(f, blocking=f.blocking and not held) for f in quota)
    return found


def _reserved(status: Mapping[str, Any], namespace: str) -> str:
    """`status.reservedFor`: the Pods (or other consumers) the claim's devices are for."""
    consumers = status.get("reservedFor") or []
    named = [f"{_consumer_kind(c)} {namespace}/{c.get('name')}" for c in consumers]
    return f"reserved for {', '.join(named)}" if named else "reserved for nothing yet"


def _consumer_kind(consumer: Mapping[str, Any]) -> str:
    resource = str(consumer.get("resource", ""))
    return "Pod" if resource == "pods" and not consumer.get("apiGroup") else resource


def quota_findings(
    facts: ClusterFacts, pod: Object, claims: PodClaims, who: str = "Pod"
) -> Iterator[Finding]:
    """Per class the Pod needs: the tenant's limit, used and pending, and who holds them."""
    namespace, _ = identity(pod)
    tenant = pod_tenant(facts, namespace)
    if tenant is None:
        yield Finding("tenant", f"Namespace {namespace}", "no Tenant covers it: no quota applies")
        return
    records = facts.records(tenant.name)
    rows = {r.device_class: r for r in usage_rows(tenant, records)}
    for device_class, need in sorted(claims.needs.items()):
        row = rows.get(device_class)
        held = sum(records[k].devices.get(device_class, 0) for k in claims.keys if k in records)
        if row is not None and row.limit is not None:
            yield _quota_line(tenant, row, need, held, who)


def pod_tenant(facts: ClusterFacts, namespace: str) -> Tenant | None:
    labels = namespace_labels(facts.namespace(namespace), namespace)
    return resolve_tenant(facts.policies(), namespace, labels)


def _quota_line(tenant: Tenant, row: UsageRow, need: int, held: int, who: str) -> Finding:
    over = held < need and row.used - held + need > (row.limit or 0)
    state = f"needs {need}, holds {held}" if held < need else f"holds {held}"
    message = (
        f"{row.device_class}: {row.used}/{row.limit} used ({row.pending} pending), this {who} "
        f"{state}; held by {holders_text(row.holders)}{_gangs_text(row)}"
    )
    return Finding("quota", f"Tenant {tenant.name}", message, blocking=over)


def _gangs_text(row: UsageRow) -> str:
    """The gang reservations among the holders: devices a workload's creation took for Pods
    it has not created yet, which no Pod or claim shows."""
    gangs = [h for h in row.holders if h.key.startswith(GANG_PREFIX)]
    named = (f"{h.key.removeprefix(GANG_PREFIX)} reserves {h.devices}" for h in gangs)
    return f"; gang {', '.join(named)} for Pods not created yet" if gangs else ""


def scheduler(facts: ClusterFacts, pod: Object) -> Iterator[Finding]:
    """The last event of each quoted reason, and a PodScheduled condition that is False."""
    namespace, name = identity(pod)
    last = {e.get("reason"): e for e in facts.events(namespace, name)}
    for reason in QUOTED_EVENTS:
        event = last.get(reason)
        if event is not None:
            source = f"Event {namespace}/{(event.get('metadata') or {}).get('name')}"
            yield Finding("scheduler", source, f"{reason}: {event.get('message')}", True)
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            text = f"{condition.get('reason')}: {condition.get('message')}"
            yield Finding("scheduler", f"Pod {namespace}/{name} PodScheduled", text, True)
