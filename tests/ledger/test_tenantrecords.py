"""Rows keep a tenant's totals from one change to the next and plan a reservation on them:
always what `accounting.reserve` decides over all the records."""

from __future__ import annotations

import random

import pytest
from ledger_contract import GPU, nonzero

from webhook.ledger import accounting
from webhook.ledger.accounting import PENDING_SECONDS, Record, live, usage_of
from webhook.ledger.tenantrecords import Rows


def _random_rows(rng: random.Random, now: float) -> Rows:
    """Rows as read (expired holders too), or as left by a chain of written changes."""
    records = {
        f"pod:{i}/gpu": Record({GPU: rng.randrange(3)}, rng.choice([None, now + 30, now - 1]))
        for i in range(rng.randrange(5))
    }
    for owner in range(rng.randrange(3)):  # grants: leases, live or ended by `now`
        ends = rng.choice([now - 1, now, now + 30])
        records[f"grant:replica-{owner}"] = Record({GPU: rng.randrange(1, 3)}, ends)
    rows = Rows(records)
    for step in range(rng.randrange(3)):
        if rows.all_live(now):
            changed = {f"pod:{rng.randrange(6)}/gpu": Record({GPU: rng.randrange(3)}, now + step)}
            rows = rows.with_changes(changed)
    return rows


@pytest.mark.parametrize("seed", range(3), ids=[f"seed-{s}" for s in range(3)])
def test_a_plan_on_kept_totals_is_what_reserve_decides_on_the_records(seed: int) -> None:
    """Rows plan a reservation from the totals they keep while every holder is live, and by
    `accounting.reserve` otherwise: over random rows the answer, the rows left, their totals
    and the holders written are always `reserve`'s."""
    rng, now = random.Random(seed), 1000.0
    for _ in range(2000):
        rows = _random_rows(rng, now)
        holds = {f"pod:{rng.randrange(6)}/gpu": {GPU: rng.randrange(4)}}
        limits = {GPU: rng.choice([2, 4, 8])}
        plan = rows.planned(holds, limits, now=now, pending_seconds=PENDING_SECONDS)
        outcome = accounting.reserve(
            rows.records, holds, limits, now=now, pending_seconds=PENDING_SECONDS
        )
        assert plan.granted is outcome.granted, (rows.records, holds, limits)
        left = plan.after.records if plan.granted else live(plan.after.records, now=now)
        assert left == outcome.records
        assert nonzero(plan.after.totals) == nonzero(accounting.totals(plan.after.records))
        assert plan.reservation().usage == usage_of(outcome.records)
        written = {**{k: r for k, r in rows.records.items() if k not in plan.deletes}, **plan.puts}
        assert written == (outcome.records if plan.granted else rows.records)
        assert not plan.after.all_live(now) or live(plan.after.records, now=now) == left


@pytest.mark.parametrize("seed", range(3), ids=[f"seed-{s}" for s in range(3)])
def test_rows_keep_the_totals_of_their_records(seed: int) -> None:
    """What a grant write stores as the tenant's totals and sizes the grant from: the totals
    rows keep after a plan, a holder taken out (`without`) and a holder set are always the
    recount of their records, and `totals_at` is the recount of the live ones."""
    rng, now = random.Random(seed), 1000.0
    for _ in range(2000):
        rows = _random_rows(rng, now)
        holds = {f"pod:{rng.randrange(6)}/gpu": {GPU: rng.randrange(4)}}
        rows = rows.planned(holds, {}, now=now, pending_seconds=PENDING_SECONDS).after
        rows = rows.without(rng.choice(["grant:replica-0", "grant:replica-1", "pod:0/gpu"]))
        if rng.random() < 0.5:
            rows = rows.with_changes({"grant:replica-0": Record({GPU: 2}, now + 30)})
        assert nonzero(rows.totals) == nonzero(accounting.totals(rows.records))
        alive = live(rows.records, now=now)
        assert nonzero(rows.totals_at(now)) == nonzero(accounting.totals(alive))
        assert rows.all_live(now) is (alive == rows.records)
