"""The behaviour every ledger must show; each ledger's test module runs these against it."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from webhook.types import Deadline, DeadlineExceeded, FactsUnavailable, Ledger

GPU = "gpu.nvidia.com"
MakeLedger = Callable[[], Ledger]


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


CONTRACT = [
    reserve_within_limit_is_granted,
    reserve_over_limit_is_refused_and_changes_nothing,
    same_holder_replaces_instead_of_adding,
    shrinking_is_allowed_over_a_lowered_limit,
    release_frees_devices,
    tenants_are_independent,
    reserve_past_its_deadline_stores_nothing,
    readmitting_an_unchanged_holder_is_granted_and_changes_nothing,
]
