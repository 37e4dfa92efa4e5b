"""The one place a pipeline Context is composed: offline, or against a live cluster.

`dragate check`, `dragate test`, `dragate serve` without a cluster and the webhook in a cluster
must judge exactly alike, so each gets its Context here and nowhere else: cluster facts (a
snapshot, or watch caches), a ledger, the device inventory, and where managed templates go.
Cluster mode is built in each gunicorn worker after fork (threads do not survive a fork), so
every worker has its own caches, reconciler and keeper; the ledger's compare-and-swap makes
the reconcilers agree, and AlreadyExists-is-success makes keepers racing to re-create a
template harmless.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from webhook.kube.api import KubeApi
from webhook.kube.caches import KubeState
from webhook.kube.inventorysource import InventorySource
from webhook.kube.policykeeper import RewritePolicyKeeper
from webhook.kube.snapshot import SnapshotState, load_state
from webhook.kube.templates import TemplateKeeper
from webhook.ledger.grants import GrantBook, process_owner
from webhook.ledger.kube import KubeLedger
from webhook.ledger.memory import MemoryLedger
from webhook.ledger.reconciler import Reconciler, claims_names, claims_truth
from webhook.ledger.share import Share
from webhook.ledger.sqlite import SqliteLedger
from webhook.ledger.usage import existing_holds, existing_names
from webhook.pipeline import Context
from webhook.pipeline.scope import NOBODY, Identity
from webhook.types import Ledger, Object, PolicySet

PolicySource = Callable[[], PolicySet]
"""The policy set to judge with now (reloads swap it)."""

ReadinessCheck = Callable[[], tuple[bool, str]]
"""A named condition for /readyz, e.g. "watch caches synced" in cluster mode."""


@dataclass(frozen=True)
class ClusterTarget:
    """Where live cluster facts come from; None means offline. `quota_grants`: each worker
    admits from its grant of a tenant's quota (`webhook.ledger.grants`); off, every
    admission waits for its TenantUsage write. `keep_rewrite_policy`: keep the legacy rewrite's
    MutatingAdmissionPolicy applied (`webhook.kube.policykeeper`), leaving `own`'s namespace
    and user to the webhook, which passes them unevaluated."""

    kubeconfig: str | None = None
    in_cluster: bool = False
    quota_grants: bool = True
    keep_rewrite_policy: bool = False
    own: Identity = NOBODY


def offline_context(
    policies: PolicySource, state: SnapshotState, ledger: Ledger | None = None
) -> Context:
    """A Context on snapshot facts; managed templates are added to `state` (no API to create in).

    Without a `ledger`, an in-memory one starts from the claims already in `state`.
    """
    if ledger is None:
        ledger = MemoryLedger(existing_holds(policies(), state), names=existing_names(state))
    return Context(
        policies=policies,
        state=state,
        ledger=ledger,
        templates=lambda namespace, templates, dry_run, _seconds: _add_templates(
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


@dataclass(frozen=True)
class ClusterMode:
    """The running pieces of cluster mode: the Context and what runs beside it."""

    context: Context
    state: KubeState
    reconciler: Reconciler
    keeper: TemplateKeeper
    policy_keeper: RewritePolicyKeeper | None = None

    def ready(self) -> tuple[bool, str]:
        """A /readyz check: every watch cache has listed and is not stale."""
        return bool(self.state.health()["ready"]), "caches"

    def start(self) -> None:
        self.state.start()
        self.reconciler.start()
        self.keeper.start()
        if self.policy_keeper is not None:
            self.policy_keeper.start()


def cluster_mode(target: ClusterTarget, policies: PolicySource) -> ClusterMode:
    """Caches and ledger on one API connection; nothing runs until `start()`."""
    api = KubeApi.in_cluster() if target.in_cluster else KubeApi.from_kubeconfig(target.kubeconfig)

    def claim_event(kind: str, _claim: Object) -> None:
        if kind == "DELETED":  # reconcile now, not at the next tick (Reconciler.poke)
            reconciler.poke()

    def template_event(kind: str, template: Object) -> None:
        keeper.observe(kind, template)  # a deleted managed template is put back soon

    state = KubeState(api, claim_listener=claim_event, template_listener=template_event)
    keeper = TemplateKeeper(state, policies)
    grants = GrantBook(process_owner()) if target.quota_grants else None
    ledger = KubeLedger(api, share=Share.for_server(api.server_identity()), grants=grants)
    reconciler = Reconciler(ledger, claims_truth(policies, state), names=claims_names(state))
    context = Context(
        policies=policies,
        state=state,
        ledger=ledger,
        templates=state.ensure_templates,
        inventory=InventorySource(state.slices).current,
    )
    policy_keeper = _policy_keeper(target, state, policies) if target.keep_rewrite_policy else None
    return ClusterMode(context, state, reconciler, keeper, policy_keeper)


def _policy_keeper(
    target: ClusterTarget, state: KubeState, policies: PolicySource
) -> RewritePolicyKeeper:
    own = target.own
    return RewritePolicyKeeper(
        state, state.api, policies, own_namespace=own.namespace,
        exempt_users=frozenset({own.user} - {""}),
    )  # fmt: skip


def serving_context(
    policies: PolicySource,
    cluster: ClusterTarget | None,
    state_file: Path | None,
    ledger_file: Path | None,
) -> tuple[Context, list[ReadinessCheck]]:
    """The webhook's Context, started: cluster mode when a target is given, otherwise offline.

    Offline, the ledger file was seeded by the master before fork (`dragate serve`).
    """
    if cluster is not None:
        mode = cluster_mode(cluster, policies)
        mode.start()
        return mode.context, [mode.ready]
    state = load_state(str(state_file)) if state_file else SnapshotState.empty()
    ledger = SqliteLedger(str(ledger_file)) if ledger_file else MemoryLedger()
    return offline_context(policies, state, ledger), []
