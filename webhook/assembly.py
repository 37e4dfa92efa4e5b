"""The one place a pipeline Context is composed: offline, or against a live cluster.

`dragate check`, `dragate test`, `dragate serve` without a cluster and the webhook in a cluster
must judge exactly alike, so each gets its Context here and nowhere else: cluster facts (a
snapshot, or watch caches), a ledger, the device inventory, and where managed templates go.

In a cluster dragate runs in two roles (docs/architecture.md). A webhook replica
(`cluster_mode`) has its own watch caches (admission reads them), its own quota grants
(`GrantBook`) and its own TenantUsage ledger; replicas meet only at the API server's
compare-and-swap, and admission itself (`state.ensure_templates` included) runs in every
one. The work one process is enough for is the controller's (`controller_mode`), on its own
caches and ordinary threads, in the holder of the coordination.k8s.io Lease (`Leadership`):
the ledger's reconciler, the template keeper's re-creation of deleted managed templates,
the rewrite policy keeper, the policy objects' status and the PolicyReports
(`webhook.controllers.table`). Every controller runs the table and its leader-only loops
wait while it does not lead; one that takes the Lease over is woken and starts them at once.
"""

from __future__ import annotations

import atexit
import time
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from itertools import chain
from pathlib import Path

from webhook.controllers.runner import LoopRunner
from webhook.controllers.table import ControllerPieces, controller_loops
from webhook.kube.api import KubeApi, list_pages
from webhook.kube.caches import KubeState
from webhook.kube.inventorysource import InventorySource
from webhook.kube.leader import Leadership
from webhook.kube.policykeeper import RewritePolicyKeeper
from webhook.kube.policyreports import Observe, PolicyReportWriter
from webhook.kube.policystatus import PolicyStatusWriter, QuotaRow
from webhook.kube.policywatch import PolicyObjects
from webhook.kube.snapshot import SnapshotState, load_state
from webhook.kube.templates import TemplateKeeper
from webhook.ledger.grants import GrantBook, process_owner
from webhook.ledger.kube import KubeLedger
from webhook.ledger.memory import MemoryLedger
from webhook.ledger.reconciler import Reconciler, claims_names, claims_truth
from webhook.ledger.sqlite import SqliteLedger
from webhook.ledger.usage import existing_holds, existing_names
from webhook.pipeline import Context
from webhook.pipeline.audit import asks_for_devices, audit, tenant_results
from webhook.pipeline.scope import NOBODY, Identity
from webhook.policy.loading import load_policies
from webhook.policy.policyobjects import check_object, load_with_objects
from webhook.types import AuditResult, FactsUnavailable, Ledger, Object, PolicySet

PolicySource = Callable[[], PolicySet]
"""The policy set to judge with now (reloads swap it)."""

ReadinessCheck = Callable[[], tuple[bool, str]]
"""A named condition for /readyz, e.g. "watch caches synced" in cluster mode."""


@dataclass(frozen=True)
class ClusterTarget:
    """Where live cluster facts come from; None means offline. `quota_grants`: each replica
    admits from its grant of a tenant's quota (`webhook.ledger.grants`); off, every
    admission waits for its TenantUsage write. `keep_rewrite_policy`: keep the legacy rewrite's
    MutatingAdmissionPolicy applied (`webhook.kube.policykeeper`), leaving `own`'s namespace
    and user to the webhook, which passes them unevaluated. `policy_objects`: enforce the
    cluster's dragate.io policy objects beside the files."""

    kubeconfig: str | None = None
    in_cluster: bool = False
    quota_grants: bool = True
    keep_rewrite_policy: bool = False
    own: Identity = NOBODY
    policy_objects: bool = True


POLICY_OBJECTS_WAIT = 5.0
"""Seconds the server waits at boot for the policy objects to be listed before it serves (it
answers as without cluster facts until then)."""


@dataclass(frozen=True)
class PolicyFeed:
    """Where the policy set comes from: the files, and in a cluster the policy objects too.
    `load` reads the files it is given; `changes` fingerprints whatever else it reads."""

    load: Callable[[Sequence[str]], PolicySet]
    changes: Callable[[], Hashable] | None = None
    objects: PolicyObjects | None = None


def policy_feed(cluster: ClusterTarget | None) -> PolicyFeed:
    """Files alone offline (or when told); files and the watched dragate.io objects in a
    cluster (started)."""
    if cluster is None or not cluster.policy_objects:
        return PolicyFeed(load_policies)
    objects = PolicyObjects(cluster_api(cluster)).start()
    objects.wait_synced(POLICY_OBJECTS_WAIT)
    return PolicyFeed(
        lambda paths: load_with_objects(paths, objects.objects()), objects.fingerprint, objects
    )


def cluster_api(target: ClusterTarget) -> KubeApi:
    return KubeApi.in_cluster() if target.in_cluster else KubeApi.from_kubeconfig(target.kubeconfig)


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
        policy_check=policy_check(None),
    )


def policy_check(objects: PolicyObjects | None) -> Callable[[Object], list[str]]:
    """What the pipeline asks of a policy object under admission: the loader's problems beside
    the cluster's current objects (alone, when those are unknown)."""

    def check(obj: Object) -> list[str]:
        try:
            current = objects.objects() if objects is not None else ()
        except FactsUnavailable:
            current = ()
        return [
            f"{p.path}: {p.message}" if p.path else p.message for p in check_object(obj, current)
        ]

    return check


def _add_templates(
    state: SnapshotState, namespace: str, templates: Sequence[Object], dry_run: bool
) -> None:
    if dry_run:
        return
    for template in templates:
        metadata = {**(template.get("metadata") or {}), "namespace": namespace}
        state.add({**template, "metadata": metadata})


@dataclass(frozen=True)
class ControllerState:
    """Whether this process holds the Lease and when its reconciler last saw the claims: a
    pending holder is confirmed or released only by a reconciler, so a cluster where no
    replica leads keeps counting every pending holder. /readyz and /metrics show it."""

    leading: bool
    last_reconcile: float | None  # unix time the last good pass saw its truth; None: never
    waiting_since: float  # when this process began to reconcile (or to wait for the Lease)
    lease_failure: str = ""  # why the Lease could not be held, as last seen
    last_audit: float | None = None  # unix time the last background audit pass ended
    audit_seconds: float | None = None  # how long that pass took
    quota: tuple[QuotaRow, ...] = ()  # each Tenant's usage as its status says (leader only)

    def seconds_without_reconcile(self, now: float) -> float:
        return max(0.0, now - (self.last_reconcile or self.waiting_since))

    def report(self, now: float) -> dict[str, object]:
        return {
            "leading": self.leading,
            "lastReconcile": self.last_reconcile,
            "secondsWithoutReconcile": round(self.seconds_without_reconcile(now), 3),
            "leaseFailure": self.lease_failure,
        }


ControllerSource = Callable[[], ControllerState]


@dataclass(frozen=True)
class ClusterMode:
    """What a webhook replica runs in a cluster: its watch caches and the Context on them
    (the ledger with this replica's grants, template creation on the request path). No
    cluster-wide loop runs here: those are the controller's (`controller_mode`).

    The caches and the ledger start no thread of their own: `start` starts the caches and
    the ledger's grant loops (after fork: threads do not survive it), and `stop` (also at
    the process's exit) writes what the grants admitted and gives every grant back."""

    context: Context
    state: KubeState
    ledger: KubeLedger

    def ready(self) -> tuple[bool, str]:
        """A /readyz check: every watch cache has listed and is not stale."""
        return bool(self.state.health()["ready"]), "caches"

    def start(self) -> None:
        self.state.start()
        if self.ledger.loops is not None:
            self.ledger.loops.start()
            atexit.register(self.stop)

    def stop(self, timeout: float = 2.0) -> None:
        self.ledger.close(timeout)


def cluster_mode(
    target: ClusterTarget, policies: PolicySource, feed: PolicyFeed | None = None
) -> ClusterMode:
    """Caches and ledger on one API connection; nothing runs until `start()`."""
    api = feed.objects.api if feed and feed.objects else cluster_api(target)
    state = KubeState(api)
    grants = GrantBook(process_owner()) if target.quota_grants else None
    ledger = KubeLedger(api, grants=grants)
    return ClusterMode(_context(policies, state, ledger, feed), state, ledger)


def _context(
    policies: PolicySource, state: KubeState, ledger: Ledger, feed: PolicyFeed | None
) -> Context:
    return Context(
        policies=policies,
        state=state,
        ledger=ledger,
        templates=state.ensure_templates,
        inventory=InventorySource(state.slices).current,
        policy_check=policy_check(feed.objects if feed else None),
    )


@dataclass(frozen=True)
class ControllerMode:
    """The running pieces of the controller role: its own caches, the Lease, and the table of
    loops (`webhook.controllers.table`) run on ordinary threads; a leader-only loop passes
    only while this process holds the Lease."""

    context: Context
    state: KubeState
    pieces: ControllerPieces
    leader: Leadership
    runner: LoopRunner
    began: float = field(default_factory=time.time)

    def controller(self) -> ControllerState:
        """This process's part in confirming holders: the Lease, the last good pass."""
        reports, status = self.pieces.reports, self.pieces.policy_status
        return ControllerState(
            leading=self.leader.leading(),
            last_reconcile=self.pieces.reconciler.last_success,
            waiting_since=self.began,
            lease_failure=self.leader.failure,
            last_audit=reports.last_success,
            audit_seconds=reports.last_duration,
            quota=status.quota_rows() if status is not None else (),
        )

    def ready(self) -> tuple[bool, str]:
        """A /readyz check: every watch cache has listed and is not stale."""
        return bool(self.state.health()["ready"]), "caches"

    def start(self) -> None:
        self.state.start()
        self.leader.start()
        self.runner.start()


def controller_mode(
    target: ClusterTarget, policies: PolicySource, feed: PolicyFeed | None = None,
    served: Callable[[], PolicySet | None] | None = None, observe: Observe = lambda _r: None,
) -> ControllerMode:  # fmt: skip
    """The controller's caches, ledger (no grants: it admits nothing), Lease and loops on one
    API connection; nothing runs until `start()`. With a `feed` of policy objects and the
    `served` set, the policy objects' status is kept too."""
    api = feed.objects.api if feed and feed.objects else cluster_api(target)

    def claim_event(kind: str, claim: Object) -> None:
        if kind == "DELETED":  # reconcile now, dropping its holder even if still pending
            reconciler.claim_deleted(claim)

    def template_event(kind: str, template: Object) -> None:
        keeper.observe(kind, template)  # a deleted managed template is put back soon

    state = KubeState(api, claim_listener=claim_event, template_listener=template_event)
    leader = Leadership(api, target.own.namespace)
    keeper = TemplateKeeper(state, policies, leading=leader.leading)
    ledger = KubeLedger(api)
    reconciler = Reconciler(
        ledger, claims_truth(policies, state), names=claims_names(state), leading=leader.leading
    )
    context = _context(policies, state, ledger, feed)
    reports = PolicyReportWriter(
        api, audit_pass(context, state), leading=leader.leading,
        changed=lambda: _digest(served or (lambda: None)), observe=observe,
    )  # fmt: skip
    status = None
    if feed is not None and feed.objects is not None and served is not None:
        status = PolicyStatusWriter(
            api, feed.objects, served, usage=ledger.usage, leading=leader.leading
        )
    policy_keeper = (
        _policy_keeper(target, state, policies, leader) if target.keep_rewrite_policy else None
    )
    pieces = ControllerPieces(reconciler, keeper, reports, policy_keeper, status)
    runner = LoopRunner(controller_loops(pieces), lease=leader.leading)
    leader.on_change(runner.wake_all)
    leader.on_change(lambda: _new_term(leader, reports))
    return ControllerMode(context, state, pieces, leader, runner)


def _new_term(leader: Leadership, reports: PolicyReportWriter) -> None:
    """The Lease was lost: the writer forgets what it wrote (the next term starts from what
    the cluster holds) and its audit metrics clear (another controller reports now)."""
    if not leader.leading():
        reports.run_once()


def audit_pass(context: Context, state: KubeState) -> Callable[[], list[AuditResult]]:
    """One background audit over the cluster's claims, templates and device-asking Pods, and
    each tenant's usage against its quota, counted from the claims themselves (never the
    admission ledger)."""

    def run() -> list[AuditResult]:
        current = context.policies()
        truth = MemoryLedger(existing_holds(current, state))
        judged = replace(context, policies=lambda: current, ledger=truth)
        cached = chain(state.claims(), state.templates())
        found = audit(cached, judged, streamed=_device_pods(state.api))
        return [*found, *tenant_results(current, truth.usage)]

    return run


def _device_pods(api: KubeApi) -> Iterator[Object]:
    """Pods that hold claims or ask for an extended resource, read a page at a time (in the
    API server's key order: by namespace, then name) as the pass reaches their namespaces, so
    a pass that outlasts its first page's snapshot reads on from the latest state."""
    for pod in list_pages(api, "/api/v1/pods", resume_expired=True):
        if asks_for_devices(pod):
            yield {**pod, "kind": "Pod", "apiVersion": "v1"}


def _digest(served: Callable[[], PolicySet | None]) -> str:
    policies = served()
    return policies.digest if policies is not None else ""


def _policy_keeper(
    target: ClusterTarget, state: KubeState, policies: PolicySource, leader: Leadership
) -> RewritePolicyKeeper:
    own = target.own
    return RewritePolicyKeeper(
        state, state.api, policies, own_namespace=own.namespace,
        exempt_users=frozenset({own.user} - {""}), leading=leader.leading,
    )  # fmt: skip


def seed_ledger_file(path: Path, policies: PolicySet, state: SnapshotState) -> None:
    """Once, before the worker forks (`dragate serve` offline): the snapshot's claims become
    the ledger file's confirmed truth, the file `serving_context` opens in the worker."""
    path.parent.mkdir(parents=True, exist_ok=True)
    ledger = SqliteLedger(str(path))
    try:
        ledger.seed(existing_holds(policies, state), existing_names(state))
    finally:
        ledger.close()


def serving_context(
    policies: PolicySource,
    cluster: ClusterTarget | None,
    state_file: Path | None,
    ledger_file: Path | None,
    *,
    feed: PolicyFeed | None = None,
) -> tuple[Context, list[ReadinessCheck]]:
    """The webhook's Context, started, and its readiness checks: cluster mode when a target
    is given, otherwise offline.

    Offline, the ledger file was seeded at start (`seed_ledger_file`); nothing reconciles it.
    """
    if cluster is not None:
        mode = cluster_mode(cluster, policies, feed)
        mode.start()
        objects = [feed.objects.ready] if feed and feed.objects else []
        return mode.context, [mode.ready, *objects]
    state = load_state(str(state_file)) if state_file else SnapshotState.empty()
    ledger = SqliteLedger(str(ledger_file)) if ledger_file else MemoryLedger()
    return offline_context(policies, state, ledger), []
