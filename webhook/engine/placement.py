"""Can one node hold every request of a claim at once? The scheduler's question, asked early.

The scheduler allocates a claim on one node: all its requests together, on distinct devices,
at most 32 devices in all (`AllocationResultsMaxSize`), `All` taking every matching device the
node can reach, `firstAvailable` trying alternatives, `matchAttribute` constraints holding
across the requests they name. Checking requests one at a time says "fits" for
`[{gpu 8},{gpu 1}]` on 8-GPU nodes; this module checks them together.

Two things are errors in the scheduler's DRA filter, not "this node does not fit", and an
error aborts the Pod's scheduling cycle on every node (kube-scheduler, seen in the e2e):
a CEL runtime error on a device, and a node where the claim's least possible device count
(`All` = every matching device it can reach; `firstAvailable` = its smallest alternative)
passes 32. Either makes the claim infeasible everywhere. (The allocator evaluates devices
lazily, so an error on a device it never reaches would go unnoticed; treating every error as
fatal is the conservative reading.)

Device taints (KEP-5055): a device whose NoSchedule/NoExecute taint a request does not
tolerate is never allocated to it; an `All` request that matches such a device fails on that
node, because the allocator takes every matching device or none. Partitionable devices
(KEP-4815): the devices chosen together must fit the counter sets they consume (`counters`).

Nodes with the same devices (as far as this claim can tell) are checked once: a node is
described by, per device, how it stands to each request (not matched, usable, matched but
tainted), its constrained attribute values and its counter consumption, plus the node's
counter sets. Devices of a shared pool (`allNodes`, a node selector) are reachable from every
node.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from webhook.engine.counters import Capacities, LocalConsumption, pack
from webhook.engine.devices import CounterSetKey, Device
from webhook.engine.inventory import Selection
from webhook.types import ALL_MODE_DEVICES, AllocationMode, ClaimSpec, DeviceRequest

MAX_COMBINATIONS = 256
"""firstAvailable alternatives tried per node; past this the claim is judged on the first."""

NO, USABLE, BLOCKED = 0, 1, 2
"""How a device stands to a leaf: not matched, matched, matched but tainted (not tolerated)."""

Kind = tuple[tuple[int, ...], tuple[Any, ...], LocalConsumption]
"""A device as the claim sees it: how it stands to each leaf, its constrained attribute
values, and what it consumes from the node's counter sets."""
Counters = Mapping[CounterSetKey, Mapping[str, Fraction]]


@dataclass(frozen=True)
class Placement:
    ok: bool
    nodes: int = 0  # nodes that could hold the claim
    reason: str = ""


def place_claim(
    spec: ClaimSpec, selections: Mapping[str, Selection], counters: Counters | None = None
) -> Placement:
    """Whether some node can hold all of `spec`'s requests together.

    `selections` maps each leaf name (`request` or `request/sub`) to its devices (taking
    the leaf's tolerations into account); `counters` are the pools' counter sets.
    """
    leaves = [leaf for r in spec.requests for leaf in r.leaves() if leaf.name in selections]
    attributes = tuple(dict.fromkeys(c.attribute for c in spec.constraints))
    failed = [e for leaf in leaves for e in selections[leaf.name].errors]
    if any(selections[leaf.name].failed for leaf in leaves):
        return Placement(
            False,
            0,
            f"a selector fails with a CEL runtime error ({failed[0]}), which aborts scheduling",
        )
    kinds = _by_group(leaves, selections) if not attributes else None
    if kinds is None:
        kinds = _by_device(leaves, selections, attributes, counters or {})
    for kind in kinds:
        least = _least_devices(spec, leaves, kind)
        if least > ALL_MODE_DEVICES:
            return Placement(
                False,
                0,
                f"a node needs at least {least} devices for the claim, "
                f"over the limit of {ALL_MODE_DEVICES} per claim, which "
                "aborts scheduling",
            )
    fitting = sum(n for kind, n in kinds.items() if _fits(spec, leaves, attributes, kind))
    if fitting:
        return Placement(True, fitting)
    return Placement(False, 0, _why(spec, leaves, selections))


NodeKind = tuple[tuple[tuple[Kind, int], ...], Capacities]
"""A node as the claim sees it: its kinds of devices with their numbers, its counter sets."""


def _by_device(
    leaves: Sequence[DeviceRequest],
    selections: Mapping[str, Selection],
    attributes: Sequence[str],
    counters: Counters,
) -> Counter[NodeKind]:
    """Nodes described device by device (needed for constrained attribute values and for
    counters, whose sets belong to single devices)."""
    shared = _devices_at(None, leaves, selections)
    kinds: Counter[NodeKind] = Counter()
    for node in _nodes(leaves, selections):
        devices = _devices_at(node, leaves, selections) | shared
        kinds[_describe(devices, leaves, attributes, counters)] += 1
    return kinds


def _by_group(
    leaves: Sequence[DeviceRequest], selections: Mapping[str, Selection]
) -> Counter[NodeKind] | None:
    """Nodes described group by group: devices of one group match the same leaves, so a node
    is its group counts. None when a selector tells devices of a group apart, or when
    devices consume counters."""
    matched: dict[int, dict[int, int]] = {}
    groups: dict[int, Any] = {}
    for position, leaf in enumerate(leaves):
        selection = selections[leaf.name]
        for state, found in ((USABLE, selection.hits), (BLOCKED, selection.blocked)):
            for group, hits in found:
                if hits is not None or group.consumes():
                    return None
                matched.setdefault(id(group), {})[position] = state
                groups[id(group)] = group
    per_node: dict[str | None, Counter[int]] = {}
    for key, group in groups.items():
        for node, count in group.per_node().items():
            per_node.setdefault(node, Counter())[key] += count
    shared = per_node.pop(None, Counter())
    nodes = per_node.values() if per_node else [Counter()]
    kinds: Counter[NodeKind] = Counter()
    for counts in nodes:
        total = counts + shared
        described: Counter[Kind] = Counter()
        for key, count in total.items():
            states = tuple(matched[key].get(i, NO) for i in range(len(leaves)))
            described[(states, (), ())] += count
        kinds[(tuple(sorted(described.items(), key=repr)), ())] += 1
    return kinds


def _least_devices(spec: ClaimSpec, leaves: Sequence[DeviceRequest], kind: NodeKind) -> int:
    """The scheduler's `minDevicesPerClaim` on one node: per request, its smallest
    alternative, `All` counting every matching device the node can reach."""
    position = {leaf.name: i for i, leaf in enumerate(leaves)}
    matching = {name: sum(n for k, n in kind[0] if k[0][i]) for name, i in position.items()}

    def size(leaf: DeviceRequest) -> int:
        if leaf.allocation_mode == AllocationMode.ALL:
            return matching.get(leaf.name, 0)
        return leaf.count

    return sum(
        min((size(leaf) for leaf in request.leaves()), default=0) for request in spec.requests
    )


def _nodes(leaves: Sequence[DeviceRequest], selections: Mapping[str, Selection]) -> set[str | None]:
    nodes: set[str | None] = {
        n
        for leaf in leaves
        for found in (selections[leaf.name].by_node, selections[leaf.name].blocked_by_node)
        for n in found
    }
    shared_only = nodes == {None}
    nodes.discard(None)
    return {None} if shared_only else nodes


def _devices_at(
    node: str | None, leaves: Sequence[DeviceRequest], selections: Mapping[str, Selection]
) -> dict[str, tuple[Device, dict[str, int]]]:
    """Per device name on `node`: the device and how it stands to each leaf it matches."""
    found: dict[str, tuple[Device, dict[str, int]]] = {}
    for leaf in leaves:
        selection = selections[leaf.name]
        for state, by_node in ((USABLE, selection.by_node), (BLOCKED, selection.blocked_by_node)):
            for device in by_node.get(node, ()):
                found.setdefault(device.name, (device, {}))[1][leaf.name] = state
    return found


def _describe(
    devices: Mapping[str, tuple[Device, Mapping[str, int]]],
    leaves: Sequence[DeviceRequest],
    attributes: Sequence[str],
    counters: Counters,
) -> NodeKind:
    sets = sorted({key for device, _ in devices.values() for key, _ in device.consumes})
    index = {key: i for i, key in enumerate(sets)}
    kinds: Counter[Kind] = Counter()
    for device, matched in devices.values():
        states = tuple(matched.get(leaf.name, NO) for leaf in leaves)
        values = tuple(_attribute(device, a) for a in attributes)
        kinds[(states, values, tuple((index[k], a) for k, a in device.consumes))] += 1
    capacities = tuple(
        tuple(sorted(counters[key].items())) if key in counters else None for key in sets
    )
    return tuple(sorted(kinds.items(), key=repr)), capacities


def _attribute(device: Device, qualified: str) -> Any:
    domain, _, name = qualified.rpartition("/")
    raw = device.attributes.get(qualified)
    if raw is None and domain == device.driver:
        raw = device.attributes.get(name)
    if isinstance(raw, Mapping) and raw:
        return repr(sorted(raw.items()))
    return None


def _fits(
    spec: ClaimSpec,
    leaves: Sequence[DeviceRequest],
    attributes: Sequence[str],
    kind: NodeKind,
) -> bool:
    position = {leaf.name: i for i, leaf in enumerate(leaves)}
    choices = [[a for a in r.alternatives or (r,) if a.name in position] for r in spec.requests]
    combinations = itertools.islice(itertools.product(*choices), MAX_COMBINATIONS)
    return any(_fits_choice(spec, chosen, position, attributes, kind) for chosen in combinations)


def _fits_choice(
    spec: ClaimSpec,
    chosen: Sequence[DeviceRequest],
    position: Mapping[str, int],
    attributes: Sequence[str],
    kind: NodeKind,
) -> bool:
    """One alternative per request: try every value of the constrained attributes."""
    values = [
        sorted({k[1][i] for k, _ in kind[0]} - {None}, key=repr) for i in range(len(attributes))
    ]
    for picked in itertools.product(*values):
        usable = _restrict(spec, chosen, attributes, dict(zip(attributes, picked, strict=True)))
        if _assign(chosen, position, usable, kind):
            return True
    return False


def _restrict(
    spec: ClaimSpec,
    chosen: Sequence[DeviceRequest],
    attributes: Sequence[str],
    picked: Mapping[str, Any],
) -> dict[str, list[tuple[int, Any]]]:
    """Per chosen leaf, the attribute values its devices must have (index into attributes)."""
    rules: dict[str, list[tuple[int, Any]]] = {leaf.name: [] for leaf in chosen}
    for constraint in spec.constraints:
        index = attributes.index(constraint.attribute)
        for leaf in chosen:
            parent = leaf.name.split("/", 1)[0]
            if not constraint.requests or {leaf.name, parent} & set(constraint.requests):
                rules[leaf.name].append((index, picked[constraint.attribute]))
    return rules


def _assign(
    chosen: Sequence[DeviceRequest],
    position: Mapping[str, int],
    rules: Mapping[str, list[tuple[int, Any]]],
    node: NodeKind,
) -> bool:
    """Distinct devices for every chosen leaf: `All` takes all it matches, then a max flow,
    then (when devices consume counters) whether some such choice fits the counter sets."""
    kinds, capacities = node
    free = [n for _, n in kinds]
    needed: list[tuple[int, list[int]]] = []
    whole: list[int] = []
    taken = 0
    for leaf in chosen:
        at = position[leaf.name]
        matched = [
            i
            for i, (k, _) in enumerate(kinds)
            if k[0][at] and all(k[1][a] == v for a, v in rules[leaf.name])
        ]
        if leaf.allocation_mode == AllocationMode.ALL:
            every = sum(free[i] for i in matched)
            if every == 0 or any(
                free[i] != kinds[i][1] or kinds[i][0][0][at] == BLOCKED for i in matched
            ):
                return False  # none match, some are taken already, or some are not tolerated
            for i in matched:
                free[i] = 0
            whole.extend(matched)
            taken += every
        else:
            needed.append((leaf.count, [i for i in matched if kinds[i][0][0][at] == USABLE]))
            taken += leaf.count
    if taken > ALL_MODE_DEVICES or not _flow(needed, free):
        return False
    return not capacities or pack(needed, whole, [(k[2], n) for k, n in kinds], capacities)


def _flow(needed: list[tuple[int, list[int]]], free: list[int]) -> bool:
    """Whether every (count, usable kinds) demand can be met from `free` devices per kind."""
    left = list(free)
    given: list[dict[int, int]] = [{} for _ in needed]

    def augment(demand: int, seen: set[int]) -> bool:
        for kind in needed[demand][1]:
            if kind in seen:
                continue
            seen.add(kind)
            if left[kind] > 0:
                left[kind] -= 1
                given[demand][kind] = given[demand].get(kind, 0) + 1
                return True
            for other, amounts in enumerate(given):
                if other != demand and amounts.get(kind) and _reroute(other, kind, seen):
                    given[demand][kind] = given[demand].get(kind, 0) + 1
                    return True
        return False

    def _reroute(other: int, kind: int, seen: set[int]) -> bool:
        given[other][kind] -= 1
        if augment(other, seen):
            return True
        given[other][kind] += 1
        return False

    for demand, (count, _) in enumerate(needed):
        for _ in range(count):
            if not augment(demand, set()):
                return False
    return True


def _why(
    spec: ClaimSpec, leaves: Sequence[DeviceRequest], selections: Mapping[str, Selection]
) -> str:
    names = ", ".join(repr(r.name) for r in spec.requests)
    failed = {n for leaf in leaves for n in selections[leaf.name].failed_nodes}
    text = f"requests {names} cannot be allocated together on any one node"
    if failed:
        text += (
            f" (a selector failed with an error on {len(failed)} node(s), which aborts "
            "allocation there)"
        )
    if spec.constraints:
        text += " with their matchAttribute constraints"
    return text
