"""The reconciler names the holders it confirms after the Pods their claims were made for, and
runs only while its replica holds the Lease."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from builders import claim, exact, request
from ledger_contract import GPU

from webhook.kube.snapshot import SnapshotState
from webhook.ledger.accounting import PENDING_SECONDS
from webhook.ledger.memory import MemoryLedger
from webhook.ledger.reconciler import Reconciler, claims_names, claims_truth
from webhook.ledger.sqlite import SqliteLedger
from webhook.policy.loading import parse_policies
from webhook.types import FactsUnavailable

POLICIES = parse_policies(
    "apiVersion: dragate.io/v1alpha1\nkind: Tenant\nmetadata: {name: team-a}\n"
    "spec: {namespaces: [team-a]}\n",
    "inline.yaml",
)
LEDGERS: dict[str, Callable[[Path], Any]] = {
    "memory": lambda _: MemoryLedger(),
    "sqlite": lambda tmp: SqliteLedger(str(tmp / "ledger.sqlite")),
}


def generated(pod: str, uid: str) -> dict[str, Any]:
    made = claim(request(exact(count=2)), name=f"{pod}-gpu-x1")
    made["metadata"]["annotations"] = {"resource.kubernetes.io/pod-claim-name": "gpu"}
    made["metadata"]["ownerReferences"] = [{"kind": "Pod", "uid": uid, "name": pod}]
    return made


@pytest.mark.parametrize("kind", sorted(LEDGERS))
@pytest.mark.parametrize(
    ("names", "expected"),
    [(True, "team-a/train-0"), (False, "")],
    ids=["with-names", "without-names-the-key-is-shown"],
)
def test_a_holder_first_seen_by_the_reconciler_is_named(
    kind: str, names: bool, expected: str, tmp_path: Path
) -> None:
    ledger = LEDGERS[kind](tmp_path)
    state = SnapshotState([generated("train-0", "uid-0"), claim(request(exact()), name="plain")])
    reconciler = Reconciler(
        ledger,
        claims_truth(lambda: POLICIES, state),
        names=claims_names(state) if names else None,
    )
    assert reconciler.run_once()
    shown = {h.key: h.name for h in ledger.usage("team-a")[GPU].holders}
    assert shown == {"pod:uid-0/gpu": expected, "claim:team-a/plain": ""}


def test_a_stored_name_is_kept_over_the_claims() -> None:
    ledger = MemoryLedger()
    ledger.reserve("team-a", {"pod:uid-0/gpu": {GPU: 2}}, {}, names={"pod:uid-0/gpu": "team-a/a"})
    ledger.reconcile({"team-a": {"pod:uid-0/gpu": {GPU: 2}}}, {"pod:uid-0/gpu": "team-a/b"})
    (holder,) = ledger.usage("team-a")[GPU].holders
    assert (holder.name, holder.devices) == ("team-a/a", 2)


def _within(seconds: float, condition: Callable[[], bool]) -> bool:
    ends = time.monotonic() + seconds
    while not condition() and time.monotonic() < ends:
        time.sleep(0.01)
    return condition()


@pytest.mark.parametrize(
    ("leading", "held"),
    [(False, 0), (True, 2)],
    ids=["a-follower-reconciles-nothing", "the-leader-reconciles"],
)
def test_the_reconciler_runs_only_while_leading(leading: bool, held: int) -> None:
    """Started and poked (a claim deleted) in every replica, it reconciles only in the Lease
    holder; the follower that takes the Lease over reconciles as soon as it is woken."""
    ledger, lead = MemoryLedger(), [leading]
    state = SnapshotState([claim(request(exact(count=2)), name="held")])
    reconciler = Reconciler(
        ledger, claims_truth(lambda: POLICIES, state), interval=600.0, leading=lambda: lead[0]
    ).start()
    try:
        reconciler.poke()
        _within(0.3, lambda: reconciler.runs > 0)
        usage = ledger.usage("team-a")
        assert (usage[GPU].used if usage else 0) == held
        assert reconciler.runs == (1 if leading else 0)
        lead[0] = True  # the Lease taken over: Leadership wakes the loop
        reconciler.wake()
        assert _within(1.0, lambda: reconciler.runs == 1)
        assert ledger.usage("team-a")[GPU].used == 2
    finally:
        reconciler.stop()


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_a_claim_deleted_before_it_was_confirmed_frees_its_quota_at_the_next_pass() -> None:
    """The deletion names the holder; a pending holder whose claim is merely not created yet
    (the webhook charges before the object exists) stays."""
    clock = Clock()
    ledger, state = MemoryLedger(clock=clock), SnapshotState([])
    reconciler = Reconciler(ledger, claims_truth(lambda: POLICIES, state), clock=clock)
    deleted = claim(request(exact(count=2)), name="deleted")
    holds = {"claim:team-a/deleted": {GPU: 2}, "claim:team-a/coming": {GPU: 2}}
    assert ledger.reserve("team-a", holds, {GPU: 4}).granted
    clock.now += 1
    reconciler.claim_deleted(deleted)
    assert reconciler.run_once()
    assert [h.key for h in ledger.usage("team-a")[GPU].holders] == ["claim:team-a/coming"]
    assert reconciler.run_once()  # a deletion names its holder for one pass only
    assert [h.key for h in ledger.usage("team-a")[GPU].holders] == ["claim:team-a/coming"]


def test_a_pass_that_fails_keeps_the_deletions_for_the_next() -> None:
    clock = Clock()
    ledger, state = MemoryLedger(clock=clock), SnapshotState([])
    failing = [True]

    def truth() -> Any:
        if failing[0]:
            raise FactsUnavailable("caches not synced")
        return claims_truth(lambda: POLICIES, state)()

    reconciler = Reconciler(ledger, truth, clock=clock)
    ledger.reserve("team-a", {"claim:team-a/x": {GPU: 2}}, {})
    reconciler.claim_deleted(claim(request(exact(count=2)), name="x"))
    assert not reconciler.run_once()
    failing[0] = False
    assert reconciler.run_once()
    assert ledger.usage("team-a") == {}


def test_the_truth_is_taken_as_seen_when_the_pass_began() -> None:
    """A holder whose bound ends while the truth is being read is not dropped on it."""
    clock = Clock()
    ledger = MemoryLedger(clock=clock)
    ledger.reserve("team-a", {"claim:team-a/x": {GPU: 2}}, {})

    def slow_truth() -> Any:
        clock.now += PENDING_SECONDS + 1  # the walk of the claims outlasts the bound
        return {}

    reconciler = Reconciler(ledger, slow_truth, clock=clock)
    assert reconciler.run_once()
    assert ledger.usage("team-a")[GPU].used == 2
    assert reconciler.last_success == clock.now - PENDING_SECONDS - 1
    assert reconciler.run_once()
    assert ledger.usage("team-a") == {}
