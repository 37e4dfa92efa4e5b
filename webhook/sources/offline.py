"""A pipeline Context without a cluster: snapshot state, an offline ledger, the inventory.

`dragate check`, `dragate test` and `dragate serve` without `--kubeconfig` must judge exactly
alike, so they build their Context here, in one way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from webhook.ledger.accounting import Holds
from webhook.pipeline import Context
from webhook.sources.inventory import InventorySource
from webhook.sources.state import SnapshotState
from webhook.sources.usage import holds_by_tenant
from webhook.types import Ledger, Object, PolicySet


def existing_holds(policies: PolicySet, state: SnapshotState) -> dict[str, Holds]:
    """Per tenant, what the claims already in `state` hold: the ledger's starting truth."""
    namespaces = {str(n["metadata"]["name"]): n for n in state.namespaces()}
    holds, _ = holds_by_tenant(policies, state.claims(), namespaces)
    return holds


def offline_context(
    policies: Callable[[], PolicySet], state: SnapshotState, ledger: Ledger
) -> Context:
    """A Context whose managed templates are added to `state` (there is no API to create in)."""
    return Context(
        policies=policies,
        state=state,
        ledger=ledger,
        templates=lambda namespace, templates, dry_run: _add_templates(
            state, namespace, templates, dry_run
        ),
        inventory=InventorySource(state.slices).current,
    )


def _add_templates(
    state: SnapshotState, namespace: str, templates: Sequence[Object], dry_run: bool
) -> None:
    if dry_run:
        return
    for template in templates:
        metadata = {**(template.get("metadata") or {}), "namespace": namespace}
        state.add({**template, "metadata": metadata})
