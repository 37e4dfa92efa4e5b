"""Every fact a review may need, read once; and what a store that cannot answer means."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType

from webhook.engine import namespace_labels, resolve_tenant
from webhook.engine.feasibility import binding_notes, unsatisfied
from webhook.engine.inventory import ClassCapacity, Inventory
from webhook.pipeline.context import Context
from webhook.types import (
    AdmissionRequest,
    ClaimSpec,
    ClusterState,
    Deadline,
    DeadlineExceeded,
    Facts,
    FactsUnavailable,
    Object,
    PolicySet,
)

DEADLINE_SLACK = 0.01
"""A store's wait cut short by the deadline ends this close to it (timers are coarse)."""


def gather(request: AdmissionRequest, policies: PolicySet, context: Context) -> Facts:
    """Every fact the engine may need for `request`, read once."""
    state = context.state
    namespace = state.namespace(request.namespace) if request.namespace else None
    labels = namespace_labels(namespace, request.namespace)
    tenant = resolve_tenant(policies, request.namespace, labels) if request.namespace else None
    classes = state.device_classes()
    inventory = context.inventory() if context.inventory is not None else None
    published = NOTHING_PUBLISHED if inventory is None else _published(inventory, classes)
    return Facts(
        namespace=namespace,
        tenant=tenant,
        templates=_templates(request, state),
        device_classes=classes,
        class_capacity=published[0],
        feasibility=published[1],
        binding=published[2],
    )


def out_of_time(deadline: Deadline, err: FactsUnavailable) -> None:
    """A store that gave up because the review's own time ran out is a timeout, not an outage."""
    if deadline.remaining() <= DEADLINE_SLACK:
        raise DeadlineExceeded(f"deadline passed while waiting: {err}") from err


ByClaim = Callable[[ClaimSpec], Sequence[str]]
Published = tuple[Mapping[str, int], ByClaim | None, ByClaim | None]
NOTHING_PUBLISHED: Published = (MappingProxyType({}), None, None)
"""Without an inventory: the same objects for every review (the engine's memos hold them)."""


class _LastPublished:
    """The last inventory and DeviceClasses looked at, and what they published."""

    seen: tuple[Inventory, Mapping[str, Object], Published] | None = None


def _published(inventory: Inventory, classes: Mapping[str, Object]) -> Published:
    """What the published devices add: `All` counted exactly, unsatisfiable requests, and
    requests only devices with binding conditions can satisfy.

    The same objects while the inventory is the same one and the DeviceClasses are equal (the
    state hands out the same class objects while unchanged, so the comparison is by identity
    of each): the engine remembers a Pod's judgment while these stay the same objects."""
    last = _LastPublished.seen
    if last is not None and last[0] is inventory and last[1] == classes:
        return last[2]

    def problems(spec: ClaimSpec) -> Sequence[str]:
        return unsatisfied(inventory, spec, classes)  # remembered by the inventory

    def waits(spec: ClaimSpec) -> Sequence[str]:
        return binding_notes(inventory, spec, classes)

    published = (ClassCapacity(inventory, classes), problems, waits)
    _LastPublished.seen = (inventory, classes, published)  # one assignment: thread-safe
    return published


def _templates(request: AdmissionRequest, state: ClusterState) -> dict[str, Object]:
    """The ResourceClaimTemplates a Pod names, as the cluster has them."""
    if request.kind != "Pod" or request.object is None:
        return {}
    found = {}
    for name in _template_names(request.object):
        template = state.template(request.namespace, name)
        if template is not None:
            found[name] = template
    return found


def _template_names(pod: Object) -> set[str]:
    """`spec.resourceClaims[].resourceClaimTemplateName`, skipping whatever is malformed: the
    engine reads the claims itself (`normalize.pod_claims`) and denies a malformed Pod."""
    spec = pod.get("spec")
    claims = spec.get("resourceClaims") if isinstance(spec, dict) else None
    names = set()
    for claim in claims if isinstance(claims, list) else ():
        name = claim.get("resourceClaimTemplateName") if isinstance(claim, dict) else None
        if isinstance(name, str) and name:
            names.add(name)
    return names
