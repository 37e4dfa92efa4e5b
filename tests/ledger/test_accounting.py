"""The shared arithmetic: which re-admissions change a holder's record (and so are written)."""

from __future__ import annotations

import random

import pytest
from ledger_contract import GPU

from webhook.ledger import accounting
from webhook.ledger.accounting import Record

NOW, BOUND = 1000.0, 120.0
PENDING = Record({GPU: 2}, NOW + 30)
CONFIRMED = Record({GPU: 2})
EXPIRED = Record({GPU: 2}, NOW - 1)


@pytest.mark.parametrize(
    ("known", "devices", "expected"),
    [
        pytest.param(PENDING, {GPU: 2}, PENDING, id="pending-same-devices-kept-as-is"),
        pytest.param(PENDING, {GPU: 2, "other": 0}, PENDING, id="zero-counts-are-no-change"),
        pytest.param(PENDING, {GPU: 3}, Record({GPU: 3}, NOW + 30), id="grows-keeps-expiry"),
        pytest.param(CONFIRMED, {GPU: 2}, CONFIRMED, id="confirmed-same-devices"),
        pytest.param(CONFIRMED, {GPU: 1}, Record({GPU: 1}), id="confirmed-shrinks-stays-confirmed"),
        pytest.param(EXPIRED, {GPU: 2}, EXPIRED, id="past-its-bound-kept-never-renewed"),
        pytest.param(None, {GPU: 2}, Record({GPU: 2}, NOW + BOUND), id="new-holder-is-pending"),
    ],
)
def test_readmission_changes_a_record_only_when_something_changed(
    known: Record | None, devices: dict[str, int], expected: Record
) -> None:
    current = {"claim:a/x": known} if known is not None else {}
    outcome = accounting.reserve(
        current, {"claim:a/x": devices}, {GPU: 8}, now=NOW, pending_seconds=BOUND
    )
    assert outcome.granted and outcome.records == {"claim:a/x": expected}


def test_readmitting_a_pending_holder_cannot_push_its_expiry_out() -> None:
    """Were every retry to renew it, a client retrying forever would hold quota forever."""
    current = {"claim:a/x": PENDING}
    for step in range(1, 10):
        outcome = accounting.reserve(current, {"claim:a/x": {GPU: 2}}, {}, now=NOW + step)
        current = outcome.records
    assert current == {"claim:a/x": PENDING}


def _random_records(rng: random.Random) -> dict[str, Record]:
    records = {}
    for i in range(rng.randrange(4)):
        devices = {GPU: rng.randrange(3), "mig": rng.choice([0, 1])}
        records[f"pod:{i}/gpu"] = Record(devices, rng.choice([None, NOW + 30]))
    return records


def _random_holds(rng: random.Random) -> dict[str, dict[str, int]]:
    return {
        f"pod:{rng.randrange(5)}/gpu": {GPU: rng.randrange(3), "mig": rng.choice([0, 1])}
        for _ in range(rng.randrange(3))
    }


@pytest.mark.parametrize("seed", range(3), ids=[f"seed-{s}" for s in range(3)])
def test_readmitted_is_exactly_when_reserve_grants_and_changes_nothing(seed: int) -> None:
    """Over live records (what a ledger checks first): `readmitted` is the shortcut of
    `reserve` granting with the records as they were, never a different answer."""
    rng = random.Random(seed)
    for _ in range(2000):
        current, holds = _random_records(rng), _random_holds(rng)
        limits = {GPU: rng.choice([1, 2, 4]), "mig": 1}
        outcome = accounting.reserve(current, holds, limits, now=NOW, pending_seconds=BOUND)
        same = outcome.granted and outcome.records == current
        assert accounting.readmitted(current, holds, NOW) is same, (current, holds, limits)


def _granted_by_definition(
    current: dict[str, Record], holds: dict[str, dict[str, int]], limits: dict[str, int]
) -> bool:
    """The rule as the docstring states it, totals recounted from scratch: no class that
    grows may end above its limit (expired holders count for nothing)."""
    alive = accounting.live(current, now=NOW)
    updated = {**alive, **{k: Record({c: n for c, n in d.items() if n}) for k, d in holds.items()}}
    before, after = accounting.totals(alive), accounting.totals(updated)
    return all(
        not (t > before.get(c, 0) and c in limits and t > limits[c]) for c, t in after.items()
    )


@pytest.mark.parametrize("seed", range(3), ids=[f"seed-{s}" for s in range(3)])
def test_reserve_grants_exactly_what_recounted_totals_allow(seed: int) -> None:
    """`reserve` moves the tenant's totals by the holders that change instead of counting
    every holder twice; over random records (expired ones too) it decides as a recount."""
    rng = random.Random(seed)
    for _ in range(2000):
        current = _random_records(rng)
        if rng.random() < 0.3:
            current["pod:old/gpu"] = Record({GPU: rng.randrange(1, 3)}, NOW - 1)
        holds, limits = _random_holds(rng), {GPU: rng.choice([1, 2, 4]), "mig": 1}
        outcome = accounting.reserve(current, holds, limits, now=NOW, pending_seconds=BOUND)
        assert outcome.granted is _granted_by_definition(current, holds, limits), (
            current,
            holds,
            limits,
        )


@pytest.mark.parametrize(
    ("current", "expected"),
    [
        ({"pod:u/gpu": Record({GPU: 1}, 50.0, "ns/p")}, Record({GPU: 1}, None, "ns/p")),
        ({}, Record({GPU: 1})),
    ],
    ids=["confirmed-keeps-the-name", "no-record-no-name"],
)
def test_reconcile_keeps_a_holders_name(current: dict[str, Record], expected: Record) -> None:
    truth = {"pod:u/gpu": {GPU: 1}}
    assert accounting.reconcile(current, truth, now=10.0) == {"pod:u/gpu": expected}


def test_a_confirmed_holder_kept_for_its_grace_keeps_its_name() -> None:
    current = {"pod:u/gpu": Record({GPU: 1}, None, "ns/p")}
    kept = accounting.reconcile(current, {}, now=10.0, drop_grace=5.0)
    assert kept == {"pod:u/gpu": Record({GPU: 1}, 15.0, "ns/p")}


def test_usage_of_counts_the_pending_devices_among_the_used() -> None:
    """Pending: admitted, not yet confirmed (with an expiry); a grant is a lease, not pending."""
    records = {
        "claim:team-a/done": Record({GPU: 2}),
        "claim:team-a/new": Record({GPU: 1}, expires_at=50.0),
        accounting.GRANT_PREFIX + "replica-1": Record({GPU: 3}, expires_at=50.0),
    }
    found = accounting.usage_of(records)[GPU]
    assert (found.used, found.pending) == (6, 1)


@pytest.mark.parametrize("seed", range(3), ids=[f"seed-{s}" for s in range(3)])
def test_live_drops_exactly_the_ended_leases(seed: int) -> None:
    """`live` keeps every record but the leases ended by `now` (copied without a call per
    holder when none has ended)."""
    rng = random.Random(seed)
    for _ in range(2000):
        current = _random_records(rng)
        for owner in range(rng.randrange(3)):
            ends = rng.choice([NOW - 1, NOW, NOW + 30])
            current[f"grant:replica-{owner}"] = Record({GPU: rng.randrange(1, 3)}, ends)
        alive = accounting.live(current, now=NOW)
        assert alive == {k: r for k, r in current.items() if not accounting.ended(k, r, NOW)}
