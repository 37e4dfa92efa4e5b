"""The behaviour every ledger must show; each ledger's test module runs these against it."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import replace
from typing import Any, Protocol

import pytest

from webhook.engine.quota import limits_of
from webhook.ledger import accounting
from webhook.ledger.accounting import PENDING_SECONDS
from webhook.types import (
    Action,
    ClassUsage,
    Deadline,
    DeadlineExceeded,
    FactsUnavailable,
    Ledger,
    QuotaLimit,
    Reservation,
    Tenant,
)

GPU = "gpu.nvidia.com"
MakeLedger = Callable[[], Ledger]


def nonzero(totals: Mapping[str, int]) -> dict[str, int]:
    """Totals per class without the classes at 0: kept totals keep a class that went back
    to 0, a recount has none."""
    return {c: n for c, n in totals.items() if n}


class Clock:
    """Wall time the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def reserve_within_limit_is_granted(make: MakeLedger) -> None:
    ledger = make()
    assert ledger.reserve("t", {"claim:a/x": {GPU: 3}}, {GPU: 4}).granted
    assert ledger.usage("t")[GPU].used == 3


def reserve_over_limit_is_refused_and_changes_nothing(make: MakeLedger) -> None:
    ledger = make()
    ledger.reserve("t", {"claim:a/x": {GPU: 3}}, {GPU: 4})
    refused = ledger.reserve("t", {"claim:a/y": {GPU: 2}}, {GPU: 4})
    assert not refused.granted
    assert refused.usage[GPU].used == 3
    assert [h.key for h in ledger.usage("t")[GPU].holders] == ["claim:a/x"]


def same_holder_replaces_instead_of_adding(make: MakeLedger) -> None:
    ledger = make()
    ledger.reserve("t", {"pod:u/gpu": {GPU: 2}}, {GPU: 2})
    assert ledger.reserve("t", {"pod:u/gpu": {GPU: 2}}, {GPU: 2}).granted
    assert ledger.usage("t")[GPU].used == 2


def shrinking_is_allowed_over_a_lowered_limit(make: MakeLedger) -> None:
    ledger = make()
    ledger.reserve("t", {"claim:a/x": {GPU: 4}}, {GPU: 4})
    assert ledger.reserve("t", {"claim:a/x": {GPU: 3}}, {GPU: 1}).granted


def release_frees_devices(make: MakeLedger) -> None:
    ledger = make()
    ledger.reserve("t", {"claim:a/x": {GPU: 4}}, {GPU: 4})
    ledger.release("t", "claim:a/x")
    assert ledger.reserve("t", {"claim:a/y": {GPU: 4}}, {GPU: 4}).granted


def tenants_are_independent(make: MakeLedger) -> None:
    ledger = make()
    ledger.reserve("t1", {"claim:a/x": {GPU: 4}}, {GPU: 4})
    assert ledger.reserve("t2", {"claim:b/x": {GPU: 4}}, {GPU: 4}).granted


def reserve_past_its_deadline_stores_nothing(make: MakeLedger) -> None:
    """A review out of time must never reserve, whichever step it ran out in."""
    ledger = make()
    ledger.reserve("t", {"claim:a/x": {GPU: 1}}, {GPU: 4})
    spent = Deadline.after(-1.0)
    with pytest.raises((DeadlineExceeded, FactsUnavailable)):
        ledger.reserve("t", {"claim:a/late": {GPU: 1}}, {GPU: 4}, spent)
    assert [h.key for h in ledger.usage("t")[GPU].holders] == ["claim:a/x"]


def readmitting_an_unchanged_holder_is_granted_and_changes_nothing(make: MakeLedger) -> None:
    ledger = make()
    ledger.reserve("t", {"claim:a/x": {GPU: 3}}, {GPU: 4})
    before = ledger.usage("t")
    assert ledger.reserve("t", {"claim:a/x": {GPU: 3}}, {GPU: 2}).granted  # limit lowered since
    assert ledger.usage("t") == before


def a_tenant_in_warn_or_audit_is_charged_past_its_limit(make: MakeLedger) -> None:
    """The quota check is what Warn and Audit relax, never the record of what is held: the
    ledger is handed no limit for such a tenant (`limits_of`), while Deny's stays enforced."""
    ledger = make()
    deny = Tenant("t", quota=(QuotaLimit(GPU, max_devices=4),))
    ledger.reserve("t", {"claim:a/x": {GPU: 3}}, limits_of(deny))
    assert not ledger.reserve("t", {"claim:a/y": {GPU: 2}}, limits_of(deny)).granted
    for mode, holder in ((Action.WARN, "claim:a/y"), (Action.AUDIT, "claim:a/z")):
        relaxed = replace(deny, enforcement=mode)
        assert ledger.reserve("t", {holder: {GPU: 2}}, limits_of(relaxed)).granted
    assert ledger.usage("t")[GPU].used == 7
    assert not ledger.reserve("t", {"claim:a/w": {GPU: 1}}, limits_of(deny)).granted


def a_pods_name_is_kept_beside_its_holder(make: MakeLedger) -> None:
    """Holders keyed by a Pod's uid carry its `namespace/name`, kept when re-admitted
    without it (the generated claim's CREATE may not know it) and absent for others."""
    ledger = make()
    named = {"pod:uid-1/gpu": "team-a/train-0"}
    assert ledger.reserve("t", {"pod:uid-1/gpu": {GPU: 2}}, {GPU: 4}, names=named).granted
    assert ledger.reserve("t", {"claim:a/x": {GPU: 1}}, {GPU: 4}).granted
    assert ledger.reserve("t", {"pod:uid-1/gpu": {GPU: 1}}, {GPU: 4}).granted
    holders = {h.key: (h.devices, h.name) for h in ledger.usage("t")[GPU].holders}
    assert holders == {"pod:uid-1/gpu": (1, "team-a/train-0"), "claim:a/x": (1, "")}


GANG = "gang:a/Job/train"


def gang_holders(ledger: Ledger) -> dict[str, int]:
    return {h.key: h.devices for h in ledger.usage("t").get(GPU, ClassUsage()).holders}


def a_pod_draws_from_its_gang_in_one_reservation(make: MakeLedger) -> None:
    """A holder given negative counts is lowered by what the call's other holders grow by:
    a gang's Pod costs nothing more, re-admitting it draws nothing twice, and a Pod past
    the gang's size is charged as any other."""
    ledger = make()
    assert ledger.reserve("t", {GANG: {GPU: 8}}, {GPU: 8}).granted
    for uid in ("u0", "u1", "u0", "u2", "u3"):  # u0 re-admitted: drawn once
        drawn = ledger.reserve("t", {f"pod:{uid}/gpu": {GPU: 2}, GANG: {GPU: -2}}, {GPU: 8})
        assert drawn.granted and ledger.usage("t")[GPU].used == 8
    assert GANG not in gang_holders(ledger)
    assert not ledger.reserve("t", {"pod:u4/gpu": {GPU: 2}, GANG: {GPU: -2}}, {GPU: 8}).granted


def a_draw_stops_at_zero_and_makes_no_holder(make: MakeLedger) -> None:
    ledger = make()
    assert ledger.reserve("t", {GANG: {GPU: 1}}, {GPU: 8}).granted
    assert ledger.reserve("t", {"pod:u0/gpu": {GPU: 3}, GANG: {GPU: -3}}, {GPU: 8}).granted
    assert gang_holders(ledger) == {"pod:u0/gpu": 3}
    other = "gang:a/Job/other"
    assert ledger.reserve("t", {"pod:u1/gpu": {GPU: 2}, other: {GPU: -2}}, {GPU: 8}).granted
    assert gang_holders(ledger) == {"pod:u0/gpu": 3, "pod:u1/gpu": 2}


CONTRACT = [
    a_pod_draws_from_its_gang_in_one_reservation,
    a_draw_stops_at_zero_and_makes_no_holder,
    a_pods_name_is_kept_beside_its_holder,
    a_tenant_in_warn_or_audit_is_charged_past_its_limit,
    reserve_within_limit_is_granted,
    reserve_over_limit_is_refused_and_changes_nothing,
    same_holder_replaces_instead_of_adding,
    shrinking_is_allowed_over_a_lowered_limit,
    release_frees_devices,
    tenants_are_independent,
    reserve_past_its_deadline_stores_nothing,
    readmitting_an_unchanged_holder_is_granted_and_changes_nothing,
]


# ------------------------------------------------ expiry: only a reconciler's truth drops


class Reconciling(Protocol):
    """A ledger the reconciler can keep (every ledger: memory, SQLite, TenantUsage)."""

    def reserve(
        self,
        tenant: str,
        holds: Mapping[str, Mapping[str, int]],
        limits: Mapping[str, int],
        deadline: Deadline | None = None,
        names: Mapping[str, str] | None = None,
    ) -> Reservation: ...

    def usage(self, tenant: str, deadline: Deadline | None = None) -> Mapping[str, ClassUsage]: ...

    def reconcile(
        self,
        truth: Mapping[str, Mapping[str, Mapping[str, int]]],
        names: Mapping[str, str] | None = None,
        *,
        seen_at: float | None = None,
        gone: AbstractSet[str] = frozenset(),
    ) -> None: ...


MakeTimedLedger = Callable[[Clock], Reconciling]


def unconfirmed_holder_counts_without_a_reconciler_whatever_its_age(
    make: MakeTimedLedger,
) -> None:
    """Nothing but a reconciler knows whether a pending holder's object exists: without one
    (no Lease holder, offline serving) a holder past its bound still counts."""
    clock = Clock()
    ledger = make(clock)
    assert ledger.reserve("t", {"claim:a/x": {GPU: 4}}, {GPU: 4}).granted
    clock.now += 10 * PENDING_SECONDS
    assert ledger.usage("t")[GPU].used == 4
    assert not ledger.reserve("t", {"claim:a/y": {GPU: 1}}, {GPU: 4}).granted


def unconfirmed_holder_is_dropped_by_a_truth_seen_after_its_bound(make: MakeTimedLedger) -> None:
    """A forged CREATE review fills the quota; the first reconcile whose truth was seen after
    its bound and lacks its object releases it."""
    clock = Clock()
    ledger = make(clock)
    admitted = clock.now
    assert ledger.reserve("t", {"claim:a/forged": {GPU: 4}}, {GPU: 4}).granted
    clock.now += PENDING_SECONDS + 1
    ledger.reconcile({}, seen_at=admitted + PENDING_SECONDS - 1)  # seen within the bound
    assert ledger.usage("t")[GPU].used == 4
    ledger.reconcile({})
    assert ledger.usage("t") == {}
    assert ledger.reserve("t", {"claim:a/real": {GPU: 4}}, {GPU: 4}).granted


def readmitting_a_pending_holder_never_extends_it(make: MakeTimedLedger) -> None:
    clock = Clock()
    ledger = make(clock)
    started = clock.now
    for offset in (0, PENDING_SECONDS / 2, PENDING_SECONDS - 1, 2 * PENDING_SECONDS):
        clock.now = started + offset  # the same forged review
        assert ledger.reserve("t", {"claim:a/forged": {GPU: 4}}, {GPU: 4}).granted
    ledger.reconcile({}, seen_at=started + PENDING_SECONDS + 1)  # its first admission's bound
    assert ledger.reserve("t", {"claim:a/real": {GPU: 4}}, {GPU: 4}).granted


def a_holder_named_by_a_deletion_goes_at_the_next_reconcile(make: MakeTimedLedger) -> None:
    """A claim deleted before it was confirmed frees its quota at once; a pending holder whose
    object was merely not created yet (not named) stays."""
    clock = Clock()
    ledger = make(clock)
    holds = {"claim:a/deleted": {GPU: 2}, "claim:a/coming": {GPU: 2}}
    assert ledger.reserve("t", holds, {GPU: 4}).granted
    clock.now += 1
    ledger.reconcile({}, gone={"claim:a/deleted"})
    assert [h.key for h in ledger.usage("t")[GPU].holders] == ["claim:a/coming"]


def a_deleted_holder_still_in_the_truth_is_kept(make: MakeTimedLedger) -> None:
    """A deletion names the key, the truth decides: a claim of that name seen again counts."""
    clock = Clock()
    ledger = make(clock)
    assert ledger.reserve("t", {"claim:a/x": {GPU: 2}}, {GPU: 4}).granted
    ledger.reconcile({"t": {"claim:a/x": {GPU: 2}}}, gone={"claim:a/x"})
    assert ledger.usage("t")[GPU].used == 2


EXPIRY_CONTRACT = [
    unconfirmed_holder_counts_without_a_reconciler_whatever_its_age,
    unconfirmed_holder_is_dropped_by_a_truth_seen_after_its_bound,
    readmitting_a_pending_holder_never_extends_it,
    a_holder_named_by_a_deletion_goes_at_the_next_reconcile,
    a_deleted_holder_still_in_the_truth_is_kept,
]


class ReferenceLedger:
    """The ledgers' arithmetic with nothing kept between calls: every answer worked out from
    all the records by `accounting`, the oracle the ledgers' kept totals are compared with."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._tenants: dict[str, accounting.Records] = {}

    def usage(self, tenant: str) -> Mapping[str, ClassUsage]:
        live = accounting.live(self._tenants.get(tenant, {}), now=self._clock())
        return accounting.usage_of(live)

    def reserve(
        self, tenant: str, holds: Mapping[str, Mapping[str, int]], limits: Mapping[str, int]
    ) -> Reservation:
        current = self._tenants.get(tenant, {})
        outcome = accounting.reserve(current, holds, limits, now=self._clock())
        self._tenants[tenant] = outcome.records
        return Reservation(outcome.granted, accounting.usage_of(outcome.records))

    def release(self, tenant: str, holder: str) -> None:
        self._tenants.get(tenant, {}).pop(holder, None)

    def reconcile(self, truth: Mapping[str, Mapping[str, Mapping[str, int]]]) -> None:
        for tenant in set(self._tenants) | set(truth):
            current = self._tenants.get(tenant, {})
            self._tenants[tenant] = accounting.reconcile(
                current, truth.get(tenant, {}), now=self._clock()
            )


MIG = "mig.nvidia.com"


def random_operation(rng: random.Random) -> tuple[Any, ...]:
    tenant = rng.choice(["t", "u"])
    holder = f"pod:{rng.randrange(6)}/gpu"
    kind = rng.choices(["reserve", "usage", "release", "reconcile", "wait"], [6, 3, 1, 1, 1])[0]
    if kind == "reserve":
        devices = {GPU: rng.randrange(4), MIG: rng.choice([0, 0, 1])}
        return kind, tenant, {holder: devices}, {GPU: rng.choice([4, 6, 8]), MIG: 2}
    if kind == "reconcile":
        return kind, {tenant: {holder: {GPU: 1}}}
    if kind == "wait":
        return kind, rng.choice([1.0, PENDING_SECONDS / 2])
    return kind, tenant, holder


def apply_operation(ledger: Any, clock: Clock, operation: tuple[Any, ...]) -> Any:
    kind, *args = operation
    if kind == "wait":
        clock.now += args[0]
        return None
    if kind == "usage":
        return ledger.usage(args[0])
    if kind == "release":
        return ledger.release(*args)
    if kind == "reconcile":
        return ledger.reconcile(*args)
    reservation: Reservation = ledger.reserve(*args)
    return reservation
