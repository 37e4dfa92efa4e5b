"""What the published devices say of a claim's requests, after the requests' own checks.

`evaluate` lists these findings after quota's: what an `All` request would really get, the
requests no published device can satisfy (`Settings.feasibility`), and the requests only
devices with binding conditions meet. Each reads the facts' inventory views, never the
request's object, so a remembered Pod or claim shape holds them with the rest.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from webhook.engine.extended import LABEL as EXTENDED_LABEL
from webhook.engine.requests import Finding
from webhook.types import ALL_MODE_DEVICES, Action, AllocationMode, ClaimSpec, Facts, Reason

BINDING_POLICY = "binding-conditions"
"""The policy named in the warning for a request only devices with binding conditions meet."""


def prefix(spec: ClaimSpec) -> str:
    """What precedes a request's name in messages: nothing for the object's own claim."""
    return f"{spec.label}, " if spec.label.startswith(("pod claim", EXTENDED_LABEL)) else ""


def feasibility_findings(
    specs: Sequence[ClaimSpec], facts: Facts, action: Action | None
) -> Iterator[Finding]:
    if action is None or facts.feasibility is None:
        return
    tenant = facts.tenant.name if facts.tenant else ""
    for spec in specs:
        for message in facts.feasibility(spec):
            reason = Reason(policy="feasibility", message=f"{prefix(spec)}{message}", tenant=tenant)
            yield Finding(action, reason)


def binding_findings(specs: Sequence[ClaimSpec], facts: Facts) -> Iterator[Finding]:
    """Requests the Pod will wait on the driver for: always a warning, never a denial (the
    Pod is admitted and scheduled; it binds late), whatever `Settings.feasibility` says."""
    if facts.binding is None:
        return
    for spec in specs:
        for message in facts.binding(spec):
            reason = Reason(policy=BINDING_POLICY, message=f"{prefix(spec)}{message}")
            yield Finding(Action.WARN, reason)


def all_mode_insight(specs: Sequence[ClaimSpec], facts: Facts) -> Iterator[Finding]:
    """A warning, never a charge: what an `All` request would really get in this cluster.

    Quota charges `All` as ResourceQuota does (32); the published devices only inform.
    """
    for spec in specs:
        for leaf in (leaf for r in spec.requests for leaf in r.leaves()):
            if leaf.allocation_mode != AllocationMode.ALL:
                continue
            published = facts.class_capacity.get(leaf.device_class)
            if published is None:
                continue
            message = (
                f"{prefix(spec)}request {leaf.name!r}: allocationMode All is charged "
                f"{ALL_MODE_DEVICES} {leaf.device_class} devices (as ResourceQuota); "
                f"{published} published devices match the class"
            )
            yield Finding(Action.WARN, Reason(policy="quota", message=message))
