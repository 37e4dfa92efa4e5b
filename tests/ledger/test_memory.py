"""The memory ledger keeps the ledger contract and the pending/confirmed lifecycle."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from ledger_contract import CONTRACT, EXPIRY_CONTRACT, GPU, MakeTimedLedger

from webhook.ledger.memory import MemoryLedger


@pytest.mark.parametrize("case", CONTRACT, ids=[c.__name__ for c in CONTRACT])
def test_contract(case: Callable[[Callable[[], MemoryLedger]], None]) -> None:
    case(MemoryLedger)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


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
