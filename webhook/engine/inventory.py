"""What devices the cluster has, and how many of them a set of CEL selectors can match.

A GPU cluster publishes thousands of devices but only a few *kinds*: 10,000 GPUs of three
models differ mostly in ids (uuid, PCI bus id, index). Devices are therefore grouped by their
*signature* - driver, attributes and capacities with the values of per-device ids left out -
and a selector is evaluated once per group, not once per device. Results are cached per
(expression, signature) in a `SelectorCache` that outlives one `Inventory`, so rebuilding the
inventory when a ResourceSlice changes keeps the work already done (it also keeps each slice's
parsed devices by resourceVersion, so only changed slices are parsed again).

An expression that can read an id (it names one, indexes a map with a computed key, or walks
values with a two-variable comprehension) is evaluated per device instead: correct first,
fast for the selectors people actually write.

Semantics follow the scheduler's allocator: class selectors, then request selectors, all
ANDed, first failure stops. An evaluation error on a device does not just fail that device:
the allocator aborts the claim's allocation on every node that device is reachable from, so a
`Selection` keeps which devices errored (`failed`) besides the error text. Current allocations
are ignored: this answers "could the cluster ever satisfy this", not "is it free now".
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, TypeVar

from webhook.engine.cel import TIME_GUARD_MESSAGE, CelCompileError, Program, compile_expression
from webhook.engine.devices import (
    CounterSetKey,
    Device,
    Group,
    Hits,
    Signature,
    counter_sets,
    current_slices,
    device_value,
    parse_slice,
    reads_device_identity,
)
from webhook.types import Object, Toleration, tolerated

T = TypeVar("T")

MAX_CACHED_VERDICTS = 200_000
"""Selectors come from user objects, so every cache is bounded: past this it starts over."""
MAX_CACHED_SELECTIONS = 4096
"""Selections an inventory remembers: each admission of the same claim shape asks again."""
_ABSENT = object()


# ---------------------------------------------------------------------- evaluation cache


@dataclass(frozen=True)
class SelectorMatch:
    """One selector on one device (or on a whole group)."""

    matched: bool
    error: str | None = None


class SelectorCache:
    """Compiled selectors per expression and matches per (expression, signature).

    Safe to share between inventories and threads: entries are only ever added, a lost race
    computes the same value twice, and the match table is cleared when it grows too big.
    """

    def __init__(self, max_verdicts: int = MAX_CACHED_VERDICTS) -> None:
        self._programs: dict[str, Program | str] = {}
        self._identity: dict[str, bool] = {}
        self._matches: dict[tuple[str, Signature], SelectorMatch] = {}
        self._slices: dict[tuple[str, str], tuple[tuple[Device, Signature], ...]] = {}
        self._max = max_verdicts

    def devices(self, slices: Sequence[Object]) -> list[tuple[Device, Signature]]:
        """Parsed devices of `slices`; a slice whose resourceVersion is unchanged since the
        last call is not parsed again, so an informer update costs one slice, not all."""
        parsed: dict[tuple[str, str], tuple[tuple[Device, Signature], ...]] = {}
        devices: list[tuple[Device, Signature]] = []
        for item in current_slices(slices):
            meta = item.get("metadata") or {}
            version = meta.get("resourceVersion")
            if not version:
                devices.extend(parse_slice(item))
                continue
            key = (str(meta.get("uid") or meta.get("name")), str(version))
            found = parsed[key] = self._slices.get(key) or parse_slice(item)
            devices.extend(found)
        self._slices = parsed
        return devices

    def reads_identity(self, expression: str) -> bool:
        found = self._identity.get(expression)
        if found is None:
            found = reads_device_identity(expression)
            _store(self._identity, expression, found, self._max)
        return found

    def program(self, expression: str) -> Program | str:
        """The compiled selector, or the compile error as text."""
        found = self._programs.get(expression)
        if found is None:
            try:
                found = compile_expression(expression, variables=["device"])
            except CelCompileError as error:
                found = f"selector {expression!r} cannot be compiled: {error}"
            _store(self._programs, expression, found, self._max)
        return found

    def match(self, expression: str, group: Group) -> SelectorMatch:
        key = (expression, group.signature)
        found = self._matches.get(key)
        if found is None:
            value, error = group.cel()
            found = self.evaluate(expression, value, error)
            if TIME_GUARD_MESSAGE not in (found.error or ""):  # load, not the device: no cache
                _store(self._matches, key, found, self._max)
        return found

    def evaluate(self, expression: str, device: Any, device_error: str | None) -> SelectorMatch:
        program = self.program(expression)
        if isinstance(program, str):
            return SelectorMatch(False, program)
        if device_error is not None:
            return SelectorMatch(False, device_error)
        result = program.evaluate({"device": device})
        if result.error is not None:
            return SelectorMatch(False, f"selector {expression!r}: {result.error}")
        return SelectorMatch(result.value is True)


def _store(table: dict[Any, Any], key: Any, value: Any, limit: int) -> None:
    if len(table) >= limit:
        table.clear()
    table[key] = value


# ---------------------------------------------------------------------- the inventory


@dataclass(frozen=True)
class Selection:
    """The devices a conjunction of selectors matches, per group, and the errors met."""

    hits: tuple[tuple[Group, Hits], ...]
    errors: tuple[str, ...] = ()
    failed: tuple[tuple[Group, Hits], ...] = ()  # devices whose evaluation errored
    blocked: tuple[tuple[Group, Hits], ...] = ()  # matching, but tainted and not tolerated

    def tolerating(self, tolerations: tuple[Toleration, ...]) -> Selection:
        """The devices a request with `tolerations` can be allocated; the matching devices
        whose taints it does not tolerate move to `blocked` (taints are part of a group's
        signature, so a group is tolerated whole)."""
        allowed = [tolerated(group.devices[0].taints, tolerations) for group, _ in self.hits]
        if all(allowed):
            return self
        usable = tuple(h for h, ok in zip(self.hits, allowed, strict=True) if ok)
        blocked = tuple(h for h, ok in zip(self.hits, allowed, strict=True) if not ok)
        return Selection(usable, self.errors, self.failed, blocked)

    @functools.cached_property
    def blocked_count(self) -> int:
        return sum(len(g.devices) if h is None else len(h) for g, h in self.blocked)

    @functools.cached_property
    def blocked_by_node(self) -> dict[str | None, list[Device]]:
        """Matching devices whose taints the request does not tolerate, per node."""
        return _by_node(self.blocked)

    @functools.cached_property
    def failed_nodes(self) -> frozenset[str | None]:
        """Nodes the scheduler cannot allocate this request on (None: shared devices)."""
        return frozenset(n for g, h in self.failed for n in g.nodes(h))

    @functools.cached_property
    def by_node(self) -> dict[str | None, list[Device]]:
        """Matching devices per node (None: devices reachable from every node)."""
        return _by_node(self.hits)

    @functools.cached_property
    def count(self) -> int:
        return sum(len(g.devices) if h is None else len(h) for g, h in self.hits)

    def most_on_one_node(self) -> int:
        """Matching devices reachable from the best single node (shared pools reach all)."""
        return self._most_on_one_node

    @functools.cached_property
    def _most_on_one_node(self) -> int:
        """Counted once per selection: a remembered selection is asked on every admission."""
        nodes: Counter[str | None] = Counter()
        for group, hits in self.hits:
            nodes.update(group.nodes(hits))
        shared = nodes.pop(None, 0)
        return shared + max(nodes.values(), default=0)

    def examples(self, limit: int = 3) -> tuple[str, ...]:
        """A few matching devices, one per group first so different kinds show up."""
        found: list[str] = []
        for group, hits in self.hits:
            index = 0 if hits is None else min(hits)
            found.append(group.devices[index].describe())
        return tuple(found[:limit])


def _by_node(hits: Iterable[tuple[Group, Hits]]) -> dict[str | None, list[Device]]:
    found: dict[str | None, list[Device]] = {}
    for group, members in hits:
        devices = group.devices if members is None else [group.devices[i] for i in sorted(members)]
        for device in devices:
            found.setdefault(device.node, []).append(device)
    return found


class Inventory:
    """The cluster's devices grouped by signature, and the pools' counter sets; immutable
    apart from its caches."""

    def __init__(
        self,
        groups: Iterable[Group],
        cache: SelectorCache | None = None,
        counters: Mapping[CounterSetKey, Mapping[str, Fraction]] | None = None,
    ) -> None:
        self.groups = tuple(groups)
        self.cache = cache or SelectorCache()
        self.counters: Mapping[CounterSetKey, Mapping[str, Fraction]] = counters or {}
        self._identity_hits: dict[tuple[str, int], tuple[Hits, str | None, Hits]] = {}
        self._selections: dict[Any, Selection] = {}
        self._remembered: dict[Any, Any] = {}

    def remember(self, key: Any, compute: Callable[[], T]) -> T:
        """`compute()`, once per key for this (immutable) inventory: answers derived from it,
        such as whether a claim shape can be placed, are asked again on every admission."""
        found = self._remembered.get(key, _ABSENT)  # one lookup: keys can be dear to hash
        if found is not _ABSENT:
            return found  # type: ignore[no-any-return]
        value = compute()
        _store(self._remembered, key, value, MAX_CACHED_SELECTIONS)
        return value

    @classmethod
    def from_slices(cls, slices: Sequence[Object], cache: SelectorCache | None = None) -> Inventory:
        cache = cache or SelectorCache()
        groups: dict[Signature, Group] = {}
        for device, key in cache.devices(slices):
            group = groups.get(key)
            if group is None:
                group = groups[key] = Group(key)
            group.devices.append(device)
        return cls(groups.values(), cache, counter_sets(current_slices(slices)))

    @property
    def device_count(self) -> int:
        return sum(len(g.devices) for g in self.groups)

    def count_matching(
        self, class_selectors: Sequence[str], request_selectors: Sequence[str] = ()
    ) -> int:
        return self.select([*class_selectors, *request_selectors]).count

    def class_capacity(self, device_classes: Mapping[str, Object]) -> dict[str, int]:
        """Devices each DeviceClass can match: what `allocationMode: All` asks for."""
        return {
            name: self.count_matching(class_selectors(device_class))
            for name, device_class in device_classes.items()
        }

    def select(
        self, expressions: Sequence[str], tolerations: tuple[Toleration, ...] = ()
    ) -> Selection:
        """Devices matching every expression, tried in order like the allocator does, that a
        request with `tolerations` may be allocated (tainted ones are `blocked`).

        Remembered per expression list: the inventory is immutable, so the answer is too.
        """
        key = tuple(expressions)
        found = self._selections.get(key)
        if found is None:
            found = self._select(key)
            _store(self._selections, key, found, MAX_CACHED_SELECTIONS)
        if not tolerations and not found.hits:
            return found
        tolerating = self._selections.get((key, tolerations))
        if tolerating is None:
            tolerating = found.tolerating(tolerations)
            _store(self._selections, (key, tolerations), tolerating, MAX_CACHED_SELECTIONS)
        return tolerating

    def _select(self, expressions: Sequence[str]) -> Selection:
        found: list[tuple[Group, Hits]] = []
        failed: list[tuple[Group, Hits]] = []
        errors: dict[str, None] = {}
        for position, group in enumerate(self.groups):
            hits, errored = self._group_hits(position, group, expressions, errors)
            if hits is None or hits:
                found.append((group, hits))
            if errored is None or errored:
                failed.append((group, errored))
        return Selection(tuple(found), tuple(errors), tuple(failed))

    def _group_hits(
        self, position: int, group: Group, expressions: Sequence[str], errors: dict[str, None]
    ) -> tuple[Hits, Hits]:
        """Devices matching every expression, and devices some expression errored on."""
        hits: Hits = None
        errored: set[int] = set()
        for expression in expressions:
            more, error, failed = self._hits(position, group, expression)
            if error is not None:
                errors[error] = None
                errored |= _members(group, hits if failed is None else _and(hits, failed))
            hits = _and(hits, more)
            if hits is not None and not hits:
                break
        return hits, (None if len(errored) == len(group.devices) else frozenset(errored))

    def _hits(self, position: int, group: Group, expression: str) -> tuple[Hits, str | None, Hits]:
        if not self.cache.reads_identity(expression):
            match = self.cache.match(expression, group)
            return (None if match.matched else frozenset()), match.error, None
        key = (expression, position)
        found = self._identity_hits.get(key)
        if found is None:
            found = self._per_device(group, expression)
            _store(self._identity_hits, key, found, MAX_CACHED_VERDICTS)
        return found

    def _per_device(self, group: Group, expression: str) -> tuple[Hits, str | None, Hits]:
        """Evaluate on every device of the group: the expression may read an id."""
        matched: list[int] = []
        failed: list[int] = []
        first_error: str | None = None
        for index, device in enumerate(group.devices):
            match = self.cache.evaluate(expression, *device_value(device))
            if match.matched:
                matched.append(index)
            if match.error is not None:
                failed.append(index)
            first_error = first_error or match.error
        everyone = len(group.devices)
        return (
            None if len(matched) == everyone else frozenset(matched),
            first_error,
            None if len(failed) == everyone else frozenset(failed),
        )


def _and(left: Hits, right: Hits) -> Hits:
    return right if left is None else left if right is None else left & right


def _members(group: Group, hits: Hits) -> set[int]:
    return set(range(len(group.devices))) if hits is None else set(hits)


class ClassCapacity(Mapping[str, int]):
    """Devices each DeviceClass matches, counted only for the classes asked about.

    Only `allocationMode: All` requests need it, so a review pays for the classes it uses
    (and usually for none) instead of for every class in the cluster.
    """

    def __init__(self, inventory: Inventory, device_classes: Mapping[str, Object]) -> None:
        self._inventory = inventory
        self._classes = device_classes
        self._known: dict[str, int] = {}

    def __getitem__(self, name: str) -> int:
        if name not in self._known:
            if name not in self._classes:
                raise KeyError(name)
            selectors = class_selectors(self._classes[name])
            self._known[name] = self._inventory.count_matching(selectors)
        return self._known[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._classes)

    def __len__(self) -> int:
        return len(self._classes)


def class_selectors(device_class: Object | None) -> tuple[str, ...]:
    """The CEL expressions of a DeviceClass's `spec.selectors`."""
    spec = (device_class or {}).get("spec") or {}
    return tuple(
        str((s.get("cel") or {}).get("expression", "true")) for s in spec.get("selectors") or []
    )
