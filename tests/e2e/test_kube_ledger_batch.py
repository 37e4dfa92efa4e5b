"""KubeLedger's group commit and its remembered copy, against the real kube-apiserver.

Threads of a process queue per tenant and the first in line writes every queued change at
once; writes start from the object as this process last saw it, and re-read only after a
409. These tests hold a batch at its read (WatchedApi's gate) to queue changes behind it in
a known order, and log every request, so each asserts which path was taken, not how fast.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import pytest
from ledger_contract import GPU

from webhook.ledger.accounting import PENDING_SECONDS
from webhook.ledger.kube import KubeLedger
from webhook.ledger.memory import MemoryLedger
from webhook.ledger.recordtext import Lines
from webhook.ledger.tenantrecords import Rows
from webhook.ledger.tenantusage import COLLECTION, object_name
from webhook.types import FactsUnavailable, Reservation

from .cluster import Cluster
from .ledger_support import WatchedApi, race, stored
from .processes import wait_for

pytestmark = pytest.mark.e2e

Step = tuple[str, str, int, int]
"""(action, holder, GPUs, limit): ("reserve", "a", 3, 6) or ("release", "a", 0, 0)."""


def apply_step(ledger: Any, tenant: str, step: Step) -> Reservation | None:
    action, holder, gpus, limit = step
    if action == "release":
        ledger.release(tenant, f"claim:t/{holder}")
        return None
    answer: Reservation = ledger.reserve(tenant, {f"claim:t/{holder}": {GPU: gpus}}, {GPU: limit})
    return answer


def watched(fresh: Callable[..., KubeLedger], gated: tuple[str, ...] = (), **options: Any) -> Any:
    """A fresh KubeLedger whose requests go through a WatchedApi (returned as `.api`)."""
    ledger = fresh(**options)
    ledger.api = WatchedApi(ledger.api, gated)  # type: ignore[assignment]
    return ledger


def hold_first_batch(ledger: Any, tenant: str, first: Step) -> tuple[threading.Thread, list[Any]]:
    """Start `first` in a thread and wait until its batch is held at its read (gate closed)."""
    answers: list[Any] = []
    thread = threading.Thread(target=lambda: answers.append(apply_step(ledger, tenant, first)))
    thread.start()
    wait_for(lambda: ledger.api.waiting["GET"] == 1, timeout=10, what="first batch at its read")
    return thread, answers


def queue_behind(ledger: Any, tenant: str, steps: list[Step], queued: int = 0) -> list[Any]:
    """Start each step in its own thread, one after another, so they queue in this order."""
    threads, answers = [], [None] * len(steps)

    def run(number: int, step: Step) -> None:
        try:
            answers[number] = apply_step(ledger, tenant, step)
        except FactsUnavailable as error:
            answers[number] = error

    for number, step in enumerate(steps):
        threads.append(threading.Thread(target=run, args=(number, step)))
        threads[-1].start()
        count = queued + number + 1
        wait_for(lambda c=count: ledger._turns.queued(tenant) == c, timeout=10, what="queued")
    return [threads, answers]


BATCHES: dict[str, list[Step]] = {  # the first step is held at its read, the rest queue
    "order-decides-who-fits": [
        ("reserve", "a", 3, 6), ("reserve", "b", 2, 6), ("reserve", "c", 2, 6),
        ("reserve", "d", 1, 6), ("reserve", "e", 4, 6), ("reserve", "f", 1, 6),
    ],
    "a-release-makes-room-mid-batch": [
        ("reserve", "a", 4, 4), ("reserve", "b", 2, 4), ("release", "a", 0, 0),
        ("reserve", "b", 2, 4), ("reserve", "c", 3, 4),
    ],
    "shrink-then-grow-the-same-holder": [
        ("reserve", "a", 4, 4), ("reserve", "a", 1, 4), ("reserve", "b", 3, 4),
        ("reserve", "b", 4, 4), ("reserve", "a", 2, 4),
    ],
}  # fmt: skip


def _told(answer: Reservation | None) -> tuple[bool, Any] | None:
    """What a caller learns: granted, or refused with the usage (KubeLedger lists it only
    for a refusal)."""
    if answer is None:
        return None
    return (True, None) if answer.granted else (False, answer.usage)


@pytest.mark.parametrize("name", list(BATCHES), ids=list(BATCHES))
def test_a_batch_answers_as_its_changes_would_one_by_one(fresh: Any, name: str) -> None:
    """Changes queued behind a held batch are written at once, each answered as if alone."""
    ledger = watched(fresh, gated=("GET",), budget=30.0)
    first, *steps = BATCHES[name]
    leader, first_answer = hold_first_batch(ledger, "batch", first)
    threads, answers = queue_behind(ledger, "batch", steps)
    ledger.api.gate.set()
    for thread in [leader, *threads]:
        thread.join(timeout=30)
    writes = [request for request in ledger.api.log if request in ("POST", "PUT")]
    one_by_one = MemoryLedger()
    expected = [apply_step(one_by_one, "batch", step) for step in [first, *steps]]
    assert [_told(a) for a in first_answer + answers] == [_told(a) for a in expected]
    assert ledger.usage("batch") == one_by_one.usage("batch")
    assert writes == ["POST", "PUT"]  # the first step's, then one for all queued behind it


@pytest.mark.parametrize(
    "processes, threads, quota",
    [(2, 8, 5), (3, 6, 12), (2, 10, 40)],
    ids=["2x8-for-5", "3x6-for-12", "2x10-all-fit"],
)
def test_racing_processes_grant_exactly_what_is_stored(
    crd: Cluster, fresh: Any, processes: int, threads: int, quota: int
) -> None:
    """One-GPU reservations from several processes' threads: as many grants as one by one
    (min(quota, attempts)), and the stored holders are exactly the granted ones."""
    fresh()
    answers = race(crd, "racers", quota, processes, threads)
    granted = [key for answer in answers for key in answer["granted"]]
    assert sum(answer["answered"] for answer in answers) == processes * threads
    assert len(granted) == min(quota, processes * threads)
    holders = stored(crd, "racers")
    assert sorted(holders) == sorted(granted)
    assert sum(h["devices"][GPU] for h in holders.values()) == len(granted)


def test_a_caller_out_of_time_in_the_queue_is_never_written(crd: Cluster, fresh: Any) -> None:
    ledger = watched(fresh, gated=("GET",), budget=30.0)
    leader, _ = hold_first_batch(ledger, "late", ("reserve", "a", 1, 8))
    ledger.budget = 0.2  # only for the call below: the held batch has its 30 s
    with pytest.raises(FactsUnavailable, match="too contended"):
        apply_step(ledger, "late", ("reserve", "b", 1, 8))
    ledger.api.gate.set()
    leader.join(timeout=30)
    assert list(stored(crd, "late")) == ["claim:t/a"]
    ledger.budget = 5.0  # and the withdrawn change does not hold up the next one
    assert apply_step(ledger, "late", ("reserve", "d", 1, 8)).granted  # type: ignore[union-attr]
    assert list(stored(crd, "late")) == ["claim:t/a", "claim:t/d"]


def test_a_caller_out_of_time_in_flight_leaves_only_a_pending_holder(
    crd: Cluster, fresh: Any
) -> None:
    """Its change may land after the caller was refused: then it is pending, and released
    after the pending bound like any holder whose object never came."""
    clock = Clock()
    ledger = watched(fresh, gated=("GET",), budget=30.0, drop_grace=0.0, clock=clock)
    leader, _ = hold_first_batch(ledger, "late", ("reserve", "a", 1, 8))
    threads, answers = queue_behind(ledger, "late", [("reserve", "b", 1, 8)])
    ledger.budget = 4.0  # time for batch 2 to reach its write, which then waits for c to fail
    [late], late_answers = queue_behind(ledger, "late", [("reserve", "c", 1, 8)], queued=1)
    refused = threading.Event()
    ledger.api.after_write = lambda: refused.wait(30) if ledger.api.log[-1] == "PUT" else None
    ledger.api.gate.set()
    late.join(timeout=30)
    refused.set()
    for thread in [leader, *threads]:
        thread.join(timeout=30)
    assert isinstance(late_answers[0], FactsUnavailable)
    assert answers[0].granted
    orphan = stored(crd, "late")["claim:t/c"]
    assert orphan["expiresAt"] > clock()  # pending, so bounded
    clock.shift += PENDING_SECONDS + 1
    ledger.reconcile({})
    assert stored(crd, "late") == {}


def test_a_leader_out_of_time_puts_back_the_changes_that_have_time(
    crd: Cluster, fresh: Any
) -> None:
    """The batch [s, j] is committed by s's short deadline, which passes while it reads:
    s is refused, j goes back to the queue and is committed in the next batch."""
    ledger = watched(fresh, gated=("GET",), budget=30.0)
    leader, _ = hold_first_batch(ledger, "lead", ("reserve", "a", 1, 8))
    ledger.budget = 2.0
    [short], short_answers = queue_behind(ledger, "lead", [("reserve", "s", 1, 8)])
    ledger.budget = 30.0
    [patient], answers = queue_behind(ledger, "lead", [("reserve", "j", 1, 8)], queued=1)
    ledger.api.after_write = ledger.api.gate.clear  # hold the next batch at its read
    ledger.api.gate.set()
    wait_for(lambda: ledger.api.waiting["GET"] == 2, timeout=10, what="second batch reads")
    time.sleep(2.0)  # past s's deadline
    ledger.api.after_write = lambda: None
    ledger.api.gate.set()
    for thread in (leader, short, patient):
        thread.join(timeout=30)
    assert isinstance(short_answers[0], FactsUnavailable)
    assert answers[0].granted
    assert sorted(stored(crd, "lead")) == ["claim:t/a", "claim:t/j"]


class Clock:
    """Wall time, shifted by the test to pass the pending bound without waiting for it."""

    def __init__(self) -> None:
        self.shift = 0.0

    def __call__(self) -> float:
        return time.time() + self.shift


def other_writer_fills_the_quota(ledger: Any, other: Any) -> None:
    apply_step(ledger, "t", ("reserve", "a", 1, 2))
    apply_step(other, "t", ("reserve", "b", 1, 2))


def other_writer_frees_the_quota(ledger: Any, other: Any) -> None:
    apply_step(ledger, "t", ("reserve", "a", 2, 2))
    apply_step(other, "t", ("release", "a", 0, 0))


def nobody_else_writes(ledger: Any, other: Any) -> None:
    apply_step(ledger, "t", ("reserve", "a", 1, 2))


def quota_already_full(ledger: Any, other: Any) -> None:
    apply_step(ledger, "t", ("reserve", "a", 2, 2))


def object_deleted_meanwhile(ledger: Any, other: Any) -> None:
    apply_step(ledger, "t", ("reserve", "a", 1, 2))
    other.api.request("DELETE", f"{COLLECTION}/{object_name('t')}")


@dataclass(frozen=True)
class Remembered:
    """What happened since this process last wrote, and what reserving "c" must then do."""

    before: Callable[[Any, Any], None]
    granted: bool
    requests: list[str]  # the requests the reserve makes, in order
    holders: list[str]  # stored afterwards
    busy: bool = False  # this process wrote the tenant just before (back to back)


REMEMBERED = [
    Remembered(other_writer_fills_the_quota, False, ["PUT 409", "GET"], ["a", "b"]),
    Remembered(other_writer_frees_the_quota, True, ["GET", "PUT"], ["c"]),
    Remembered(nobody_else_writes, True, ["PUT"], ["a", "c"]),
    Remembered(nobody_else_writes, True, ["GET", "PUT"], ["a", "c"], busy=True),
    Remembered(quota_already_full, False, ["GET"], ["a"]),
    Remembered(object_deleted_meanwhile, True, ["PUT 404", "GET 404", "POST"], ["c"]),
]


@pytest.mark.parametrize(
    "case", REMEMBERED, ids=[r.before.__name__ + ("-back-to-back" * r.busy) for r in REMEMBERED]
)
def test_a_write_from_the_remembered_object_is_checked_by_the_api_server(
    crd: Cluster, fresh: Any, case: Remembered
) -> None:
    """Another process changed the object after this one last saw it: the write from the old
    copy is refused (409) and re-decided on a fresh read; a refusal made on the old copy is
    re-checked on a fresh read before it is given. Writing back to back, it reads first."""
    ledger = watched(fresh)
    other = KubeLedger.from_kubeconfig(str(crd.kubeconfig))
    case.before(ledger, other)
    wait_for(lambda: not ledger._busy("t"), timeout=10, what="the last write long ago")
    if case.busy:
        ledger._last_write["t"] = (time.monotonic(), 60.0)
    seen = len(ledger.api.log)
    answer = apply_step(ledger, "t", ("reserve", "c", 1, 2))
    assert answer is not None and answer.granted == case.granted
    assert ledger.api.log[seen:] == case.requests
    assert sorted(stored(crd, "t")) == [f"claim:t/{h}" for h in case.holders]


def test_managed_fields_do_not_list_every_holder(crd: Cluster, fresh: Any) -> None:
    """Holders live in one string (`spec.records`): field tracking has one entry for it."""
    ledger = fresh()
    for number in range(5):
        ledger.reserve("fields", {f"claim:t/h{number}": {GPU: 1}}, {})
    obj = ledger.api.request("GET", f"{COLLECTION}/{object_name('fields')}")
    managed = json.dumps(obj["metadata"]["managedFields"])
    assert "f:records" in managed
    assert "claim:t/" not in managed
    assert sorted(stored(crd, "fields")) == [f"claim:t/h{number}" for number in range(5)]


def test_replicas_meet_only_at_the_compare_and_swap(crd: Cluster, fresh: Any) -> None:
    """Two replicas (two KubeLedgers) writing one tenant in turn: each writes from the copy
    it last wrote, the API server refuses it once the other has written (409), and it
    re-reads and writes again; nothing passes between them but the stored object."""
    first, second = watched(fresh), watched(fresh)
    steps = [
        (first, "a", ["GET 404", "POST"]),
        (second, "b", ["GET", "PUT"]),
        (first, "c", ["PUT 409", "GET", "PUT"]),
        (second, "d", ["PUT 409", "GET", "PUT"]),
    ]
    for ledger, holder, requests in steps:
        for other in (first, second):  # not back to back: a write would read first
            wait_for(lambda o=other: not o._busy("t"), timeout=10, what="the last write long ago")
        seen = len(ledger.api.log)
        assert apply_step(ledger, "t", ("reserve", holder, 1, 8)) == Reservation(True)
        assert ledger.api.log[seen:] == requests, holder
    assert sorted(stored(crd, "t")) == ["claim:t/a", "claim:t/b", "claim:t/c", "claim:t/d"]


def test_a_copy_of_another_object_with_the_same_name_is_refused(crd: Cluster, fresh: Any) -> None:
    """A copy whose resourceVersion matches but whose uid does not (another cluster behind
    the same address) is refused by the API server (409) and re-read, never written over."""
    ledger = watched(fresh)
    assert apply_step(ledger, "t", ("reserve", "a", 1, 8)) == Reservation(True)
    wait_for(lambda: not ledger._busy("t"), timeout=10, what="the last write long ago")
    current = ledger._known["t"]
    ledger._known["t"] = replace(current, rows=Rows({}), lines=Lines(), uid="0000-another-object")
    seen = len(ledger.api.log)
    assert apply_step(ledger, "t", ("reserve", "b", 1, 8)) == Reservation(True)
    assert ledger.api.log[seen:] == ["PUT 409", "GET", "PUT"]
    assert sorted(stored(crd, "t")) == ["claim:t/a", "claim:t/b"]
