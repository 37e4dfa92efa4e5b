"""The behaviour every ledger must show; each ledger's test module runs these against it."""

from __future__ import annotations

from collections.abc import Callable

from webhook.types import Ledger

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


CONTRACT = [
    reserve_within_limit_is_granted,
    reserve_over_limit_is_refused_and_changes_nothing,
    same_holder_replaces_instead_of_adding,
    shrinking_is_allowed_over_a_lowered_limit,
    release_frees_devices,
    tenants_are_independent,
]
