"""A Pod's judgment but quota, remembered for the Pods of one workload.

Every Pod a Deployment or Job creates names the same templates, so `evaluate` would find
the same claim specs, class checks, rule results and feasibility for each of them again;
only quota reads what differs (the Pod's uid keys its holders, the tenant's usage moves).
A `PodShape` is all the rest. It is remembered per (namespace, operation, pod claims,
admin-access label, tenant name) in the table of the policy set it was judged under (a slot
of its `memos`: a reload makes a new set and so an empty table), valid while the tenant, the
feasibility and class capacity of the published devices and each named template are the very
objects it was computed from (`HeldMemo`): an edited template or a new inventory make new ones.
It is remembered only when every rule that applies to its requests reads nothing but the
request, the tenant and the operation (`rules.request_only`): a rule that reads the object,
the namespace or the user is evaluated for each Pod. Near the review's deadline nothing is
remembered or answered from memory (`evaluate`).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass

from webhook.engine.heldmemo import HeldMemo
from webhook.engine.normalize import ClaimRef
from webhook.engine.requests import Finding
from webhook.engine.tenancy import namespace_labels
from webhook.types import (
    ADMIN_ACCESS_LABEL,
    AdmissionRequest,
    ClaimSpec,
    Facts,
)
from webhook.types.memos import Memos, Slot


@dataclass(frozen=True)
class Findings:
    """Every finding but quota's, in the order a denial lists them: the checks of each
    request come before quota, what the published devices say after it."""

    before: tuple[Finding, ...]
    after: tuple[Finding, ...]


@dataclass(frozen=True)
class PodShape:
    """What a Pod's claims come to in given facts: each template-backed pod claim's name,
    spec and charges, the notes, and every finding but quota's."""

    claims: tuple[tuple[str, ClaimSpec, Mapping[str, int]], ...]
    notes: tuple[str, ...]
    findings: Findings


SHAPES: Slot[HeldMemo[PodShape]] = Slot("pod shapes", lambda: HeldMemo[PodShape](epoch=3))
"""Held: the published devices' feasibility, binding waits and class capacity (shared by
every entry at a time), then the tenant and each named template."""


def shape_key(
    request: AdmissionRequest, refs: tuple[ClaimRef, ...], facts: Facts
) -> tuple[Hashable, tuple[object, ...]]:
    """What a Pod's shape reads: the key, and the objects it must have been computed from."""
    admin = namespace_labels(facts.namespace, request.namespace).get(ADMIN_ACCESS_LABEL)
    templates = (facts.templates.get(ref[1]) for ref in refs if ref[1])
    tenant = facts.tenant.name if facts.tenant else ""
    key = (request.namespace, request.operation, refs, admin, tenant)
    return key, (
        facts.feasibility,
        facts.binding,
        facts.class_capacity,
        facts.tenant,
        *templates,
    )


def remembered(memos: Memos) -> int:
    """Shapes remembered now in `memos` (tests)."""
    return len(memos.of(SHAPES))
