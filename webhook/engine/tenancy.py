"""Which tenant a namespace belongs to: by name first, then by label selector.

Explicit names win over selectors so that a platform team can carve a namespace out of a
label-selected group without relabelling it; the loader already refuses a name listed twice.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Mapping
from dataclasses import dataclass

from webhook.types import LabelRequirement, LabelSelector, Object, PolicySet, Tenant


def resolve_tenant(policies: PolicySet, namespace: str, labels: Mapping[str, str]) -> Tenant | None:
    """The tenant owning `namespace`, or None when no tenant claims it."""
    return tenant_index(policies).resolve(namespace, labels)


@dataclass(frozen=True)
class TenantIndex:
    """Lookups for one PolicySet, so resolving a namespace does not scan every tenant.

    `by_namespace` maps a listed namespace to its tenant (the first listing wins, as the
    scan did). Selector tenants keep their policy order (`position`); those with
    `matchLabels` are filed under one of their (key, value) pairs, so only tenants whose
    pair the namespace carries, plus those without `matchLabels`, are ever tried.
    """

    by_namespace: Mapping[str, Tenant]
    by_label: Mapping[tuple[str, str], tuple[int, ...]]
    unlabelled: tuple[int, ...]
    selecting: tuple[Tenant, ...]

    @classmethod
    def build(cls, tenants: tuple[Tenant, ...]) -> TenantIndex:
        by_namespace: dict[str, Tenant] = {}
        for tenant in tenants:
            for name in tenant.namespaces:
                by_namespace.setdefault(name, tenant)
        selecting = tuple(t for t in tenants if t.namespace_selector is not None)
        by_label: dict[tuple[str, str], list[int]] = {}
        unlabelled: list[int] = []
        for position, tenant in enumerate(selecting):
            assert tenant.namespace_selector is not None
            pairs = list(tenant.namespace_selector.match_labels.items())
            if pairs:
                by_label.setdefault(pairs[0], []).append(position)
            else:
                unlabelled.append(position)
        filed = {pair: tuple(positions) for pair, positions in by_label.items()}
        return cls(by_namespace, filed, tuple(unlabelled), selecting)

    def resolve(self, namespace: str, labels: Mapping[str, str]) -> Tenant | None:
        named = self.by_namespace.get(namespace)
        if named is not None:
            return named
        candidates = set(self.unlabelled)
        for pair in labels.items():
            candidates.update(self.by_label.get(pair, ()))
        for position in sorted(candidates):
            tenant = self.selecting[position]
            assert tenant.namespace_selector is not None
            if selector_matches(tenant.namespace_selector, labels):
                return tenant
        return None


_indexes: dict[int, tuple[weakref.ref[PolicySet], TenantIndex]] = {}
_indexes_lock = threading.Lock()


def tenant_index(policies: PolicySet) -> TenantIndex:
    """The index of `policies`, built once per PolicySet object (kept while it lives)."""
    key = id(policies)
    entry = _indexes.get(key)
    if entry is not None and entry[0]() is policies:
        return entry[1]
    index = TenantIndex.build(policies.tenants)
    with _indexes_lock:
        _indexes[key] = (weakref.ref(policies, lambda _ref: _forget(key)), index)
    return index


def _forget(key: int) -> None:
    with _indexes_lock:
        entry = _indexes.get(key)
        if entry is not None and entry[0]() is None:
            del _indexes[key]


def namespace_labels(namespace: Object | None, name: str) -> dict[str, str]:
    """A Namespace's labels, with the one Kubernetes always sets even when the object is unknown."""
    labels = dict(((namespace or {}).get("metadata") or {}).get("labels") or {})
    if name:
        labels.setdefault("kubernetes.io/metadata.name", name)
    return {str(k): str(v) for k, v in labels.items()}


def selector_matches(selector: LabelSelector, labels: Mapping[str, str]) -> bool:
    """Kubernetes label-selector semantics; an empty selector matches everything."""
    if any(labels.get(k) != v for k, v in selector.match_labels.items()):
        return False
    return all(_requirement_matches(r, labels) for r in selector.match_expressions)


def _requirement_matches(req: LabelRequirement, labels: Mapping[str, str]) -> bool:
    present = req.key in labels
    if req.operator == "Exists":
        return present
    if req.operator == "DoesNotExist":
        return not present
    if req.operator == "In":
        return present and labels[req.key] in req.values
    return not present or labels[req.key] not in req.values  # NotIn
