"""The devices a cluster publishes, grouped by kind: the model `inventory` selects from.

A GPU cluster publishes thousands of devices but only a few *kinds*: 10,000 GPUs of three
models differ mostly in ids (uuid, PCI bus id, index). A device's *signature* - driver,
attributes and capacities with the values of per-device ids left out - names its kind, and a
`Group` holds the devices of one kind, so a selector can be evaluated once per group. An
expression that can read an id (`reads_device_identity`) must be evaluated per device.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from webhook.engine.cel import device_to_cel
from webhook.engine.cel.quantity import parse_quantity
from webhook.types import Object, Taint

ID_ATTRIBUTES = frozenset(
    {
        "uuid",
        "parentUUID",
        "serial",
        "serialNumber",
        "pciBusID",
        "pcieBusID",
        "pcieRoot",
        "index",
        "minor",
        "parentIndex",
        "parentMinor",
        "numa",
    }
)
"""Attribute/capacity ids (in any domain) that name one device rather than describe a kind;
their values are left out of the signature. `memorySlice<N>` MIG capacities count too."""
ID_PREFIXES = ("memorySlice",)

_READS_ID = re.compile(
    r"\b(?:" + "|".join(sorted(ID_ATTRIBUTES)) + r")\b|\b(?:" + "|".join(ID_PREFIXES) + ")",
    re.IGNORECASE,
)
_COMPUTED_INDEX = re.compile(r"[\w\])]\s*\[(?!\s*(?:'[^'\\]*'|\"[^\"\\]*\"|\d+)\s*\])")
_IN_LIST = re.compile(r"\bin\s*\[")  # `x in [...]` is a list literal, not an index
_TWO_VARIABLE_MACRO = re.compile(r"\.\w+\(\s*\w+\s*,\s*\w+\s*,")

Signature = frozenset[tuple[Any, ...]]
CounterSetKey = tuple[str, str, str]
"""A counter set (KEP-4815): driver, pool and the set's name, unique in its pool."""
Amounts = tuple[tuple[str, Fraction], ...]
"""Counter name and amount, sorted by name."""
Consumption = tuple[tuple[CounterSetKey, Amounts], ...]
"""What a device consumes from each counter set (`consumesCounters`)."""
Hits = frozenset[int] | None
"""Which devices of a group match: None for all of them, else their positions in the group."""


def reads_device_identity(expression: str) -> bool:
    """Whether the expression might tell two devices of one group apart (conservative)."""
    return bool(
        _READS_ID.search(expression)
        or _COMPUTED_INDEX.search(_IN_LIST.sub("in (", expression))
        or _TWO_VARIABLE_MACRO.search(expression)
    )


@functools.lru_cache(maxsize=4096)
def is_id(name: str) -> bool:
    """Whether an attribute or capacity name is a per-device id (cached: names are few)."""
    ident = name.rpartition("/")[2]
    return ident in ID_ATTRIBUTES or ident.startswith(ID_PREFIXES)


# ---------------------------------------------------------------------- devices and groups


@dataclass(frozen=True, slots=True)
class Device:
    """One published device, as the selector environment sees it, plus where it is."""

    name: str  # "<pool>/<device>"
    driver: str
    node: str | None  # None: reachable from several nodes (allNodes / nodeSelector)
    attributes: Mapping[str, Any]
    capacity: Mapping[str, Any]
    taints: tuple[Taint, ...] = ()
    consumes: Consumption = ()
    binding_conditions: tuple[str, ...] = ()

    def describe(self) -> str:
        """The name, with the product or MIG profile when the driver publishes one."""
        for key in ("productName", "profile"):
            value = _attribute_value(self.attributes, key)
            if value is not None:
                return f"{self.name} ({value})"
        return self.name


def _attribute_value(attributes: Mapping[str, Any], ident: str) -> Any:
    for name, value in attributes.items():
        if name.rpartition("/")[2] == ident and isinstance(value, Mapping) and value:
            return next(iter(value.values()))
    return None


def signature(device: Device) -> Signature:
    """Driver, attributes and capacities; ids contribute their name but not their value.

    The fast path hashes the published `{kind: value}` items as they are; anything unusual
    (a malformed value, an unhashable one) takes the slow path through `_frozen`.
    """
    try:
        return frozenset(
            (
                ("driver", device.driver),
                *[
                    ("a", n) if is_id(n) else ("a", n, *v.items())
                    for n, v in device.attributes.items()
                ],
                *[
                    ("c", n) if is_id(n) else ("c", n, *v.items())
                    for n, v in device.capacity.items()
                ],
                *_scheduling(device),
            )
        )
    except (AttributeError, TypeError):
        return _slow_signature(device)


def _slow_signature(device: Device) -> Signature:
    items: list[tuple[Any, ...]] = [("driver", device.driver)]
    for kind, entries in (("a", device.attributes), ("c", device.capacity)):
        for name, value in entries.items():
            items.append((kind, name) if is_id(name) else (kind, name, _frozen(value)))
    return frozenset((*items, *_scheduling(device)))


def _scheduling(device: Device) -> tuple[tuple[Any, ...], ...]:
    """Taints and binding conditions: not visible to selectors, but devices of one group must
    share them, so that a request's tolerations and notes hold for the whole group."""
    found: tuple[tuple[Any, ...], ...] = tuple(("t", t) for t in device.taints)
    if device.binding_conditions:
        found += (("b", device.binding_conditions),)
    return found


def _frozen(value: Any) -> Any:
    if isinstance(value, Mapping):
        return tuple(sorted((str(k), repr(v)) for k, v in value.items()))
    return repr(value)


@dataclass
class Group:
    """Devices with one signature; the first stands for all in signature-only evaluations."""

    signature: Signature
    devices: list[Device] = field(default_factory=list)
    _cel: Any = None
    _cel_error: str | None = None
    _per_node: Counter[str | None] | None = None
    _consumes: bool | None = None

    def consumes(self) -> bool:
        """Whether some device consumes counters (their sets differ per device)."""
        if self._consumes is None:
            self._consumes = any(d.consumes for d in self.devices)
        return self._consumes

    def cel(self) -> tuple[Any, str | None]:
        """The `device` variable of the representative device, built once."""
        if self._cel is None and self._cel_error is None:
            self._cel, self._cel_error = device_value(self.devices[0])
        return self._cel, self._cel_error

    def nodes(self, hits: Hits) -> Counter[str | None]:
        if hits is None:
            return self.per_node()
        return Counter(self.devices[i].node for i in sorted(hits))

    def per_node(self) -> Counter[str | None]:
        """How many of the group's devices each node reaches (counted once: groups are built
        once per inventory and never change afterwards)."""
        if self._per_node is None:
            self._per_node = Counter(d.node for d in self.devices)
        return Counter(self._per_node)


def device_value(device: Device) -> tuple[Any, str | None]:
    try:
        return device_to_cel(device.driver, device.attributes, device.capacity), None
    except ValueError as error:
        return None, f"device {device.name}: {error}"


# ---------------------------------------------------------------------- slices


def current_slices(slices: Sequence[Object]) -> list[Object]:
    """The slices of the newest generation of each pool (older ones are being replaced)."""
    newest: dict[tuple[str, str], int] = {}
    for item in slices:
        key, generation = _pool(item)
        newest[key] = max(newest.get(key, generation), generation)
    return [item for item in slices if _pool(item)[1] == newest[_pool(item)[0]]]


def parse_slice(item: Object) -> tuple[tuple[Device, Signature], ...]:
    """A slice's devices (v1/v1beta2 or v1beta1 shape), each with its signature."""
    return tuple((d, signature(d)) for d in _slice_devices(item.get("spec") or {}))


def _pool(item: Object) -> tuple[tuple[str, str], int]:
    spec = item.get("spec") or {}
    pool = spec.get("pool") or {}
    key = (str(spec.get("driver", "")), str(pool.get("name", "")))
    return key, int(pool.get("generation") or 0)


def _slice_devices(spec: Mapping[str, Any]) -> Iterator[Device]:
    driver = str(spec.get("driver", ""))
    pool = str((spec.get("pool") or {}).get("name", ""))
    shared = spec.get("allNodes") or spec.get("nodeSelector") is not None
    slice_node = None if shared else spec.get("nodeName")
    for raw in spec.get("devices") or []:
        body = raw.get("basic") or raw  # v1beta1 wraps the device in `basic`
        node = body.get("nodeName") or (None if body.get("allNodes") else slice_node)
        yield Device(
            name=f"{pool}/{raw.get('name', '')}" if pool else str(raw.get("name", "")),
            driver=driver,
            node=str(node) if node else None,
            attributes=body.get("attributes") or {},
            capacity=body.get("capacity") or {},
            taints=tuple(_taints(body.get("taints"))),
            consumes=tuple(
                ((driver, pool, str(c.get("counterSet", ""))), _amounts(c.get("counters")))
                for c in body.get("consumesCounters") or []
            ),
            binding_conditions=tuple(str(c) for c in body.get("bindingConditions") or ()),
        )


def _taints(raw: Any) -> Iterator[Taint]:
    for taint in raw or ():
        if isinstance(taint, Mapping):
            yield Taint(
                str(taint.get("key", "")), str(taint.get("value", "")), str(taint.get("effect", ""))
            )


def counter_sets(slices: Sequence[Object]) -> dict[CounterSetKey, dict[str, Fraction]]:
    """Every pool's `sharedCounters` (KEP-4815), by driver, pool and set name.

    Since 1.36 a slice holds either devices or counter sets, so a pool's sets may be published
    in other slices than the devices that consume them; `slices` are the current ones.
    """
    found: dict[CounterSetKey, dict[str, Fraction]] = {}
    for item in slices:
        spec = item.get("spec") or {}
        driver = str(spec.get("driver", ""))
        pool = str((spec.get("pool") or {}).get("name", ""))
        for counter_set in spec.get("sharedCounters") or []:
            name = str(counter_set.get("name", ""))
            found[(driver, pool, name)] = dict(_amounts(counter_set.get("counters")))
    return found


def _amounts(raw: Any) -> Amounts:
    """`{name: {value: quantity}}` as exact amounts (an unreadable value counts as zero)."""
    amounts = []
    for name, counter in (raw or {}).items():
        value = counter.get("value", "0") if isinstance(counter, Mapping) else "0"
        try:
            amount = parse_quantity(str(value)).value
        except ValueError:
            amount = Fraction(0)
        amounts.append((str(name), amount))
    return tuple(sorted(amounts))
