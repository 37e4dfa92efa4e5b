"""The memory ledger keeps the ledger contract and the pending/confirmed lifecycle."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest
from ledger_contract import (
    CONTRACT,
    EXPIRY_CONTRACT,
    GPU,
    Clock,
    MakeTimedLedger,
    ReferenceLedger,
    apply_operation,
    random_operation,
)

from webhook.ledger.memory import MemoryLedger


@pytest.mark.parametrize("case", CONTRACT, ids=[c.__name__ for c in CONTRACT])
def test_contract(case: Callable[[Callable[[], MemoryLedger]], None]) -> None:
    case(MemoryLedger)


def test_pending_holder_is_released_after_its_bound_unless_its_object_appears() -> None:
    clock = Clock()
    ledger = MemoryLedger(clock=clock)
    ledger.reserve("t", {"claim:a/seen": {GPU: 1}, "claim:a/lost": {GPU: 1}}, {})
    clock.now += 60
    ledger.reconcile({"t": {"claim:a/seen": {GPU: 1}}})
    assert ledger.usage("t")[GPU].used == 2  # "lost" still within its bound
    clock.now += 61
    ledger.reconcile({"t": {"claim:a/seen": {GPU: 1}}})
    assert [h.key for h in ledger.usage("t")[GPU].holders] == ["claim:a/seen"]


def test_confirmed_holder_is_dropped_when_its_object_is_gone() -> None:
    ledger = MemoryLedger({"t": {"claim:a/x": {GPU: 2}}})
    ledger.reconcile({"t": {}})
    assert ledger.usage("t") == {}


def test_initial_holds_count() -> None:
    ledger = MemoryLedger({"t": {"claim:a/x": {GPU: 2}}})
    assert not ledger.reserve("t", {"claim:a/y": {GPU: 3}}, {GPU: 4}).granted


@pytest.mark.parametrize("case", EXPIRY_CONTRACT, ids=[c.__name__ for c in EXPIRY_CONTRACT])
def test_expiry_contract(case: Callable[[MakeTimedLedger], None]) -> None:
    case(lambda clock: MemoryLedger(clock=clock))


@pytest.mark.parametrize("seed", range(3), ids=[f"seed-{s}" for s in range(3)])
def test_the_kept_totals_answer_as_the_reference(seed: int) -> None:
    """Random reservations, releases, reconciles and waits: every answer and every usage is
    the one worked out from all the records."""
    rng, clock = random.Random(seed), Clock()
    ledger, oracle = MemoryLedger(clock=clock), ReferenceLedger(clock)
    for step in range(600):
        operation = random_operation(rng)
        assert apply_operation(ledger, clock, operation) == apply_operation(
            oracle, clock, operation
        ), (step, operation)
        for tenant in ("t", "u"):
            assert ledger.usage(tenant) == oracle.usage(tenant), (step, tenant)
