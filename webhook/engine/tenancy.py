"""Which tenant a namespace belongs to: by name first, then by label selector.

Explicit names win over selectors so that a platform team can carve a namespace out of a
label-selected group without relabelling it; the loader already refuses a name listed twice.
"""

from __future__ import annotations

from collections.abc import Mapping

from webhook.types import LabelRequirement, LabelSelector, Object, PolicySet, Tenant


def resolve_tenant(policies: PolicySet, namespace: str, labels: Mapping[str, str]) -> Tenant | None:
    """The tenant owning `namespace`, or None when no tenant claims it."""
    for tenant in policies.tenants:
        if namespace in tenant.namespaces:
            return tenant
    for tenant in policies.tenants:
        if tenant.namespace_selector is not None and selector_matches(
            tenant.namespace_selector, labels
        ):
            return tenant
    return None


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
