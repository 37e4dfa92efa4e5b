"""dragate's controller loops, as one table: each row says whether it needs the Lease, how
often it passes and what it writes (docs/architecture.md shows the same table).

The rows wrap the pieces `webhook.assembly` composed; a piece that can be woken (a deleted
claim for the reconciler, a deleted managed template for the keeper) shares its wake event
with its row, so the runner's thread passes at once.
"""

from __future__ import annotations

from dataclasses import dataclass

from webhook.controllers.loop import LoopSpec
from webhook.kube.policykeeper import RewritePolicyKeeper
from webhook.kube.policyreports import PolicyReportWriter
from webhook.kube.policystatus import PolicyStatusWriter
from webhook.kube.templates import TemplateKeeper
from webhook.ledger.reconciler import Reconciler

KEEPER_TICK = 1.0
"""Seconds between the template keeper's looks for due restores (sweeps: its `interval`)."""


@dataclass(frozen=True)
class ControllerPieces:
    """What the controller's loops act on; the optional ones are off unless configured."""

    reconciler: Reconciler
    keeper: TemplateKeeper
    reports: PolicyReportWriter
    policy_keeper: RewritePolicyKeeper | None = None
    policy_status: PolicyStatusWriter | None = None


def controller_loops(pieces: ControllerPieces) -> list[LoopSpec]:
    """The table, in the order the loops start."""
    reconciler, keeper, reports = pieces.reconciler, pieces.keeper, pieces.reports
    loops = [
        LoopSpec("reconciler", reconciler.run_once, reconciler.interval,
                 writes="TenantUsage (holders confirmed, released, named)",
                 wake=reconciler.wake_event),
        LoopSpec("template-keeper", keeper.step, KEEPER_TICK,
                 writes="managed ResourceClaimTemplates (re-created)", wake=keeper.wake_event),
        LoopSpec("policy-reports", reports.step, reports.tick,
                 writes="PolicyReport, ClusterPolicyReport", wake=reports.wake_event),
    ]  # fmt: skip
    if pieces.policy_status is not None:
        status = pieces.policy_status
        loops.append(LoopSpec("policy-status", status.write_once, status.interval,
                              writes="status of Tenant, DeviceClassPolicy, ... objects",
                              wake=status.wake_event))  # fmt: skip
    if pieces.policy_keeper is not None:
        keeper_ = pieces.policy_keeper
        loops.append(LoopSpec("rewrite-policy-keeper", keeper_.step, keeper_.tick,
                              writes="MutatingAdmissionPolicy, its binding and templates",
                              wake=keeper_.wake_event))  # fmt: skip
    return loops
