"""Could any node ever satisfy a device request? And if not, which selector is in the way?

A claim whose selectors match nothing is accepted by the API server and then waits forever
for the scheduler. Checking it at admission against the published ResourceSlices turns that
into an immediate answer that names the selector to fix and shows devices that nearly
matched. `Settings.feasibility` decides whether a failed check denies or warns.

Allocations are ignored on purpose: a full cluster frees up, a missing GPU model does not.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from webhook.engine.devices import Group, Hits
from webhook.engine.inventory import Inventory, Selection, class_selectors
from webhook.engine.placement import place_claim
from webhook.types import (
    AllocationMode,
    ClaimSpec,
    DeviceRequest,
    Object,
    Taint,
    Toleration,
    UnknownClass,
    unknown_class,
)


@dataclass(frozen=True)
class FeasibilityResult:
    """The answer for one request (for `firstAvailable`: its best alternative)."""

    ok: bool
    request: str
    device_class: str = ""
    matching: int = 0  # devices in the cluster matching class and request selectors
    needed: int = 1
    on_one_node: int | None = None  # best single node, when `needed` > 1
    failed_selector: str | None = None  # the selector whose removal would match the most
    closest: tuple[str, ...] = ()  # devices matching every selector but `failed_selector`
    errors: tuple[str, ...] = ()  # selector evaluation errors (those devices did not match)
    unknown_class: bool = False
    suggestion: str | None = None  # the known class an unknown one most resembles
    alternatives: tuple[FeasibilityResult, ...] = ()
    together: str = ""  # why the requests cannot be allocated together, when that fails
    untolerated: int = 0  # matching devices whose taints the request does not tolerate
    taints: tuple[str, ...] = ()  # those taints, as `key=value:effect`

    @property
    def message(self) -> str:
        if self.together:
            return self.together
        if self.alternatives and not self.ok:
            parts = "; ".join(a.message for a in self.alternatives)
            return f"request {self.request!r}: no alternative can be satisfied ({parts})"
        return _message(self)


def unsatisfied(
    inventory: Inventory, spec: ClaimSpec, device_classes: Mapping[str, Object]
) -> tuple[str, ...]:
    """Why no node could satisfy the claim: the messages of `check_claim`'s failed results.

    Remembered by the (immutable) inventory per claim spec and what the check reads of the
    DeviceClasses (each named class's selectors, or its absence): every Pod of a workload
    asks again, and a rebuilt inventory or a changed class is a different key.
    """
    key = ("unsatisfied", spec, _classes_read(spec, device_classes))
    return inventory.remember(
        key,
        lambda: tuple(r.message for r in check_claim(inventory, spec, device_classes) if not r.ok),
    )


def _classes_read(
    spec: ClaimSpec, device_classes: Mapping[str, Object]
) -> tuple[tuple[str, bool, tuple[str, ...]], ...]:
    """Each named class's selectors; for a class that does not exist, the name offered in its
    place (which a class added elsewhere may change)."""
    read = []
    for request in spec.requests:
        for leaf in request.leaves():
            found = device_classes.get(leaf.device_class)
            known = found is not None or leaf.device_class in device_classes
            seen = class_selectors(found) if known else (_suggestion(leaf, device_classes) or "",)
            read.append((leaf.device_class, known, seen))
    return tuple(read)


def _suggestion(request: DeviceRequest, device_classes: Mapping[str, Object]) -> str | None:
    missing = unknown_class(request.device_class, device_classes)
    return missing.suggestion if missing is not None else None


def check_claim(
    inventory: Inventory, spec: ClaimSpec, device_classes: Mapping[str, Object]
) -> tuple[FeasibilityResult, ...]:
    """One result per request of the claim; when each could be met alone, one more saying
    whether some node can meet them all together, as the scheduler must."""
    results = tuple(check_satisfiable(inventory, r, device_classes) for r in spec.requests)
    if not results or not all(r.ok for r in results):
        return results
    expressions = {
        leaf.name: (*class_selectors(device_classes.get(leaf.device_class)), *leaf.selectors)
        for request in spec.requests
        for leaf in request.leaves()
        if leaf.device_class in device_classes
    }
    tolerations = {leaf.name: leaf.tolerations for r in spec.requests for leaf in r.leaves()}
    selections = {
        name: inventory.select(exprs, tolerations[name]) for name, exprs in expressions.items()
    }
    key = ("placement", replace(spec, label=""), tuple(expressions.items()))
    placement = inventory.remember(key, lambda: place_claim(spec, selections, inventory.counters))
    if placement.ok:
        return results
    failed = FeasibilityResult(ok=False, request=spec.label, together=placement.reason)
    return (*results, failed)


def check_satisfiable(
    inventory: Inventory, request: DeviceRequest, device_classes: Mapping[str, Object]
) -> FeasibilityResult:
    """Feasible when the request (or, for `firstAvailable`, any alternative) can be met."""
    if not request.alternatives:
        return _check_leaf(inventory, request, device_classes)
    results = tuple(_check_leaf(inventory, a, device_classes) for a in request.alternatives)
    chosen = next((r for r in results if r.ok), None)
    if chosen is not None:
        return chosen
    best = max(results, key=lambda r: r.matching)
    return FeasibilityResult(
        ok=False,
        request=request.name,
        matching=best.matching,
        needed=best.needed,
        failed_selector=best.failed_selector,
        closest=best.closest,
        errors=tuple(e for r in results for e in r.errors),
        alternatives=results,
    )


def binding_notes(
    inventory: Inventory, spec: ClaimSpec, device_classes: Mapping[str, Object]
) -> tuple[str, ...]:
    """Requests no node can meet without devices that have binding conditions (KEP-5007).

    Not a failure: the scheduler allocates such a device, then waits before binding the Pod
    until the driver reports the conditions (a failure condition makes it deallocate and try
    again). Its allocator tries pools without binding conditions first, so where some node
    can meet the request without them the Pod may never wait, and nothing is said.
    """
    found = []
    for request in spec.requests:
        for leaf in _allocated_leaves(inventory, request, device_classes):
            device_class = device_classes.get(leaf.device_class)
            if device_class is None:
                continue
            expressions = [*class_selectors(device_class), *leaf.selectors]
            selection = inventory.select(expressions, leaf.tolerations)
            waiting = [(g, h) for g, h in selection.hits if g.devices[0].binding_conditions]
            if waiting and not _met_without_waiting(leaf, selection.hits):
                found.append(_binding_note(leaf.name, waiting))
    return tuple(found)


def _allocated_leaves(
    inventory: Inventory, request: DeviceRequest, device_classes: Mapping[str, Object]
) -> tuple[DeviceRequest, ...]:
    """The request, or of its `firstAvailable` alternatives the first some node can meet:
    the scheduler scores a node by the earliest alternative it allocates there."""
    if not request.alternatives:
        return (request,)
    for alternative in request.alternatives:
        if _check_leaf(inventory, alternative, device_classes).ok:
            return (alternative,)
    return ()


def _met_without_waiting(request: DeviceRequest, hits: Sequence[tuple[Group, Hits]]) -> bool:
    """Whether some node can meet `request` with matching devices that have no binding
    conditions: `All` takes every matching device the node reaches, so none may wait."""
    plain: Counter[str | None] = Counter()
    waits: Counter[str | None] = Counter()
    for group, members in hits:
        (waits if group.devices[0].binding_conditions else plain).update(group.nodes(members))
    shared_plain, shared_waits = plain.pop(None, 0), waits.pop(None, 0)
    nodes = set(plain) | set(waits) or {None}
    if request.allocation_mode == AllocationMode.ALL:
        return not shared_waits and any(
            (plain[n] + shared_plain) > 0 and not waits[n] for n in nodes
        )
    return any(plain[n] + shared_plain >= needed_devices(request) for n in nodes)


def _binding_note(name: str, waiting: Sequence[tuple[Group, Hits]]) -> str:
    """The wait first, then what it waits for: a kubectl warning keeps 120 characters."""
    conditions = ", ".join(
        dict.fromkeys(c for g, _ in waiting for c in g.devices[0].binding_conditions)
    )
    return f"request {name!r}: the Pod binds only once the driver reports {conditions}"


def needed_devices(request: DeviceRequest) -> int:
    """`All` needs at least one matching device, ExactCount its count."""
    return 1 if request.allocation_mode == AllocationMode.ALL else max(request.count, 1)


def _check_leaf(
    inventory: Inventory, request: DeviceRequest, device_classes: Mapping[str, Object]
) -> FeasibilityResult:
    needed = needed_devices(request)
    device_class = device_classes.get(request.device_class)
    if device_class is None:
        return FeasibilityResult(
            ok=False,
            request=request.name,
            device_class=request.device_class,
            needed=needed,
            unknown_class=True,
            suggestion=_suggestion(request, device_classes),
        )
    expressions = [*class_selectors(device_class), *request.selectors]
    selection = inventory.select(expressions, request.tolerations)
    on_one_node = selection.most_on_one_node() if needed > 1 else None
    taints = {
        _taint_text(t): None for g, _ in selection.blocked for t in g.devices[0].taints if t.blocks
    }
    result = FeasibilityResult(
        ok=selection.count >= needed and (on_one_node is None or on_one_node >= needed),
        request=request.name,
        device_class=request.device_class,
        needed=needed,
        matching=selection.count,
        on_one_node=on_one_node,
        errors=selection.errors,
        untolerated=selection.blocked_count,
        taints=tuple(taints),
    )  # built once: `dataclasses.replace` costs more than the selection it reports
    return result if result.ok else _diagnose(inventory, result, expressions, request.tolerations)


def _taint_text(taint: Taint) -> str:
    return (
        f"{taint.key}={taint.value}:{taint.effect}"
        if taint.value
        else f"{taint.key}:{taint.effect}"
    )


def _diagnose(
    inventory: Inventory,
    result: FeasibilityResult,
    expressions: Sequence[str],
    tolerations: tuple[Toleration, ...],
) -> FeasibilityResult:
    """Name the selector whose removal would match the most devices, and those devices."""
    best: tuple[int, str, Selection] | None = None
    for index, expression in enumerate(expressions):
        others = inventory.select([*expressions[:index], *expressions[index + 1 :]], tolerations)
        if others.count > result.matching and (best is None or others.count > best[0]):
            best = (others.count, expression, others)
    if best is None:
        return result
    return replace(result, failed_selector=best[1], closest=best[2].examples())


def _message(result: FeasibilityResult) -> str:
    head = f"request {result.request!r}"
    if result.unknown_class:
        return f"{head}: {UnknownClass(result.device_class, result.suggestion)}"
    noun = "device" if result.needed == 1 else "devices"
    if result.ok:
        return f"{head}: {result.matching} devices of class {result.device_class!r} match"
    if result.matching >= result.needed:
        text = (
            f"{head} needs {result.needed} {result.device_class} {noun} on one node, "
            f"at most {result.on_one_node} on any one node; {result.matching} match in the "
            "cluster"
        )
    else:  # the decisive fact first and short: a kubectl warning keeps 120 characters
        text = (
            f"{head} needs {result.needed} {result.device_class} {noun}, "
            f"{result.matching} in the cluster match"
        )
    if result.failed_selector is not None:
        text += (
            f"; selector {result.failed_selector!r} rules out the most"
            f" (without it: {', '.join(result.closest)})"
        )
    if result.untolerated:
        text += (
            f"; {result.untolerated} more match but have taints the request does not tolerate"
            f" ({', '.join(result.taints[:3])})"
        )
    if result.errors:
        text += f"; errors: {'; '.join(result.errors[:2])}"
    return text
