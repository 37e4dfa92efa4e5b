"""Cluster mode: watch caches for facts, the TenantUsage ledger, its reconciler, and the
template keeper.

Built in each gunicorn worker after fork (threads do not survive fork), so every worker has
its own caches, reconciler and keeper; the ledger's compare-and-swap makes the reconcilers
agree, and AlreadyExists-is-success makes keepers racing to re-create a template harmless.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from webhook.admission.config import ClusterTarget
from webhook.ledger.kube import KubeLedger
from webhook.ledger.reconciler import Reconciler, claims_truth
from webhook.ledger.share import Share
from webhook.pipeline import Context
from webhook.sources.cluster import KubeState
from webhook.sources.informer import KubeApi
from webhook.sources.inventory import InventorySource
from webhook.sources.templates import TemplateKeeper
from webhook.types import Object, PolicySet


@dataclass(frozen=True)
class ClusterMode:
    """The running pieces of cluster mode, for the app factory."""

    context: Context
    state: KubeState
    reconciler: Reconciler
    keeper: TemplateKeeper

    def ready(self) -> tuple[bool, str]:
        """A /readyz check: every watch cache has listed and is not stale."""
        return bool(self.state.health()["ready"]), "caches"

    def start(self) -> None:
        self.state.start()
        self.reconciler.start()
        self.keeper.start()


def connect(target: ClusterTarget, policies: Callable[[], PolicySet]) -> ClusterMode:
    """Caches and ledger on one API connection; nothing runs until `start()`."""
    api = KubeApi.in_cluster() if target.in_cluster else KubeApi.from_kubeconfig(target.kubeconfig)

    def claim_event(kind: str, _claim: Object) -> None:
        if kind == "DELETED":  # reconcile now, not at the next tick (Reconciler.poke)
            reconciler.poke()

    def template_event(kind: str, template: Object) -> None:
        keeper.observe(kind, template)  # a deleted managed template is put back soon

    state = KubeState(api, claim_listener=claim_event, template_listener=template_event)
    keeper = TemplateKeeper(state, policies)
    ledger = KubeLedger(api, share=Share.for_server(api.server_identity()))
    reconciler = Reconciler(ledger, claims_truth(policies, state))
    context = Context(
        policies=policies,
        state=state,
        ledger=ledger,
        templates=state.ensure_templates,
        inventory=InventorySource(state.slices).current,
    )
    return ClusterMode(context, state, reconciler, keeper)
