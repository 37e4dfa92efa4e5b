"""The truth a ledger is rebuilt from: every existing claim, counted for its tenant.

Claims being deleted still count until they are gone, as ResourceQuota does; a claim the
engine cannot read is counted as nothing and reported, never fatal.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from webhook.engine.counting import devices_by_class, holder_key, holder_pod_name
from webhook.engine.normalize import ObjectError, claim_spec
from webhook.engine.tenancy import namespace_labels, resolve_tenant
from webhook.ledger.accounting import Holds
from webhook.types import ClusterState, Object, PolicySet


def holds_by_tenant(
    policies: PolicySet,
    claims: Iterable[Object],
    namespaces: Mapping[str, Object],
) -> tuple[dict[str, Holds], list[str]]:
    """Per tenant, each claim's devices per class; and a note per claim that could not be read."""
    tenants: dict[str, Holds] = {}
    notes: list[str] = []
    for claim in claims:
        meta = claim.get("metadata") or {}
        namespace = str(meta.get("namespace", ""))
        tenant = resolve_tenant(
            policies, namespace, namespace_labels(namespaces.get(namespace), namespace)
        )
        if tenant is None:
            continue
        try:
            devices = devices_by_class(claim_spec(claim, holder_key(claim)))
        except ObjectError as err:
            notes.append(f"ResourceClaim {namespace}/{meta.get('name')}: not counted: {err}")
            continue
        tenants.setdefault(tenant.name, {})[holder_key(claim)] = devices
    return tenants, notes


def existing_holds(policies: PolicySet, state: ClusterState) -> dict[str, Holds]:
    """Per tenant, what the claims already in `state` hold: the ledger's starting truth."""
    namespaces = {str(n["metadata"]["name"]): n for n in state.namespaces()}
    holds, _ = holds_by_tenant(policies, state.claims(), namespaces)
    return holds


def holder_names(claims: Iterable[Object]) -> dict[str, str]:
    """Per holder keyed by a Pod's uid, the Pod's `<namespace>/<name>`, from the owner
    reference of the claim generated for it: names for a ledger started from the claims."""
    names = {}
    for claim in claims:
        name = holder_pod_name(claim)
        if name is not None:
            names[holder_key(claim)] = name
    return names


def existing_names(state: ClusterState) -> dict[str, str]:
    """`holder_names` of the claims already in `state`, beside `existing_holds`."""
    return holder_names(state.claims())
