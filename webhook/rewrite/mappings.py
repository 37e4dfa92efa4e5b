"""Which legacy extended resource maps to which DRA class, and how many devices it asked for.

The rewriter is handed its mappings: the loaded LegacyResourceMapping policies, or the built-in
default, which is the shipped `policies/legacy-mapping.yaml` read by the policy loader
(`webhook.policy.loading.default_mappings`), so there is one source for it.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from webhook.types import LegacyResourceMapping, ResourceMapping


@dataclass(frozen=True)
class Match:
    """A legacy resource name resolved to the policy and entry that govern it."""

    policy: LegacyResourceMapping
    entry: ResourceMapping
    suffix: str

    @property
    def selectors(self) -> tuple[str, ...]:
        if not self.entry.selector:
            return ()
        return (self.entry.selector.replace("{suffix}", self.suffix),)


def find_match(resource: str, mappings: Sequence[LegacyResourceMapping]) -> Match | None:
    """The governing entry; exact names win over prefixes, then the first in policy order.

    Remembered per mapping set (a tuple, as policies are loaded: immutable) and resource name:
    every container of every Pod asks this for `cpu`, `memory`, `nvidia.com/gpu`, ...
    """
    known = _matches_of(mappings)
    if known is None:
        return _search(resource, mappings)
    found = known.get(resource, _UNSEEN)
    if found is _UNSEEN:
        found = _search(resource, mappings)
        if len(known) < MAX_REMEMBERED_NAMES:
            known[resource] = found
    return found  # type: ignore[return-value]


def any_match(names: Any, mappings: Sequence[LegacyResourceMapping]) -> bool:
    """Whether any of `names` (a container's limits or requests) is a mapped resource: the
    question every validated Pod asks of every container, without a call per name."""
    known = _matches_of(mappings)
    if known is None:
        return any(_search(str(n), mappings) for n in names)
    for name in names:
        found = known.get(name, _UNSEEN)
        if found is _UNSEEN:
            found = find_match(str(name), mappings)
        if found is not None:
            return True
    return False


MAX_REMEMBERED_NAMES = 1024
"""Per mapping set: Pods name few resources, but a client may invent any number of them."""
MAX_REMEMBERED_SETS = 8
"""Mapping sets (policy reloads; tests make many) whose matches are kept, the newest ones."""
_UNSEEN = object()
_known: dict[int, tuple[Sequence[LegacyResourceMapping], dict[str, Match | None]]] = {}
_known_lock = threading.Lock()


def _matches_of(mappings: Sequence[LegacyResourceMapping]) -> dict[str, Match | None] | None:
    """The remembered matches of one mapping set, None for a mutable (non-tuple) one.

    Keyed by identity; the entry holds the set itself, so its id cannot be reused meanwhile.
    Plain dict reads and writes are atomic under the GIL; the lock orders the evictions.
    """
    if type(mappings) is not tuple:
        return None
    entry = _known.get(id(mappings))
    if entry is not None and entry[0] is mappings:
        return entry[1]
    with _known_lock:
        entry = _known.get(id(mappings))
        if entry is None or entry[0] is not mappings:
            entry = _known[id(mappings)] = (mappings, {})
            while len(_known) > MAX_REMEMBERED_SETS:
                del _known[next(iter(_known))]
    return entry[1]


def _search(resource: str, mappings: Sequence[LegacyResourceMapping]) -> Match | None:
    found: Match | None = None
    for policy in mappings:
        for entry in policy.resources:
            suffix = entry.suffix_of(resource)
            if suffix is None:
                continue
            if entry.resource_name is not None:
                return Match(policy, entry, suffix)
            found = found or Match(policy, entry, suffix)
    return found


def resource_markers(mappings: Sequence[LegacyResourceMapping]) -> tuple[str, ...]:
    """Text that every resource name `find_match` accepts contains: each name and prefix.

    The rewriter changes, notes or denies only for a container resource key that `find_match`
    accepts (node labels and MIG hints are read only once one is found), so an object in which
    no key contains one of these comes out of `rewrite_object` unchanged, without a note. The
    CLI relies on that to copy such documents without loading them; `""` (a prefix that takes
    every name) is returned as is, and turns that off.
    """
    return tuple(
        dict.fromkeys(
            entry.resource_name
            if entry.resource_name is not None
            else entry.resource_name_prefix or ""
            for policy in mappings
            for entry in policy.resources
        )
    )


_DIGITS = re.compile(r"^\+?[0-9]+$")


def parse_count(value: Any) -> int | None:
    """An extended-resource quantity as a whole number, or None when it is not one.

    Extended resources only take integers, so `500m`, `1.5` or `2Gi` are left for a person.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float):
        return int(value) if value.is_integer() and value >= 0 else None
    if isinstance(value, str) and _DIGITS.match(value.strip()):
        return int(value.strip())
    return None


def container_count(resources: Mapping[str, Any], resource: str) -> tuple[int | None, str]:
    """The device count a container asked for, or None and why it cannot be rewritten."""
    raw = [section[resource] for section in _sections(resources) if resource in section]
    counts = [parse_count(v) for v in raw]
    if any(c is None for c in counts):
        shown = next(v for v, c in zip(raw, counts, strict=True) if c is None)
        return None, f"quantity {shown!r} is not a whole number"
    if len(set(counts)) > 1:
        return None, f"limits ({raw[0]}) and requests ({raw[1]}) differ"
    return counts[0], ""


def _sections(resources: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    sections = (resources.get("limits"), resources.get("requests"))
    return [s for s in sections if isinstance(s, Mapping)]


def native_resources(device_classes: Iterable[Mapping[str, Any]]) -> frozenset[str]:
    """Extended resources a DeviceClass already serves natively (`extendedResourceName`,
    KEP-5004): the rewrite keeps those as they are."""
    names = ((c.get("spec") or {}).get("extendedResourceName") for c in device_classes)
    return frozenset(str(n) for n in names if n)
