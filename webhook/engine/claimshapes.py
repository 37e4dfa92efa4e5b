"""A claim's or claim template's judgment but quota, remembered for the claims of a workload.

kube-controller-manager makes each Pod's claims from the Pod's templates, so the claims a
workload brings are alike: `evaluate` would check the same requests against the same tenant,
class policies and published devices for each of them again. Its findings are remembered
per (kind, namespace, operation, admin-access label, tenant name, normalized spec) in the table
of the policy set they were judged under (a slot of its `memos`: a reload makes a new set and
so an empty table), valid while the tenant and the feasibility, binding waits and class
capacity of the published devices are the very objects they were judged with (`HeldMemo`).
The spec is the one `contentmemo.claim_spec` remembers for the claim's content, so alike
claims make one key. What reads the claim itself (its holder, its charges, quota) or the
DeviceClasses of the moment (classes the cluster lacks) is judged for each claim.

Remembered only when every rule that applies to its requests reads nothing but the request,
the tenant and the operation (`rules.request_only`): a rule that reads the object, the
namespace or the user is evaluated for each claim. Near the review's deadline nothing is
remembered or answered from memory (`evaluate`).
"""

from __future__ import annotations

from collections.abc import Hashable

from webhook.engine.heldmemo import HeldMemo
from webhook.engine.podshapes import Findings
from webhook.engine.tenancy import namespace_labels
from webhook.types import ADMIN_ACCESS_LABEL, AdmissionRequest, ClaimSpec, Facts
from webhook.types.memos import Memos, Slot

SHAPES: Slot[HeldMemo[Findings]] = Slot("claim shapes", lambda: HeldMemo[Findings](epoch=3))
"""Held: the published devices' feasibility, binding waits and class capacity (shared by
every entry at a time), then the tenant."""


def shape_key(
    request: AdmissionRequest, specs: tuple[ClaimSpec, ...], facts: Facts
) -> tuple[Hashable, tuple[object, ...]]:
    """What a claim's findings read: the key, and the objects they must come from."""
    admin = namespace_labels(facts.namespace, request.namespace).get(ADMIN_ACCESS_LABEL)
    tenant = facts.tenant.name if facts.tenant else ""
    key = (request.kind, request.namespace, request.operation, admin, tenant, specs)
    return key, (facts.feasibility, facts.binding, facts.class_capacity, facts.tenant)


def remembered(memos: Memos) -> int:
    """Claim shapes remembered now in `memos` (tests)."""
    return len(memos.of(SHAPES))
