"""Deadlines checked inside long work: a huge legacy Pod's rewrite and judgment pass a
checkpoint per container, claim and patch operation, so a review stops within a few items of
its deadline, and hands the thread over (`pause`) every couple of milliseconds of its work.

Time is a fake clock that advances a fixed tick at every read: what a review reads of it is
what it counts, with no timed assertion.
"""

from __future__ import annotations

from typing import Any

import pytest
from big_review_support import TICK, TickingClock, roomy_context
from kube_limits_cases import pod

from webhook.pipeline import request_from_object, review
from webhook.types import Deadline, DeadlineExceeded, Verdict
from webhook.types.adapters import PAUSE_INTERVAL

ENDPOINTS = {"mutate": True, "validate": False}


class Pauses:
    def __init__(self) -> None:
        self.count = 0

    def __call__(self) -> None:
        self.count += 1


def _pod(containers: int, tag: str) -> dict[str, Any]:
    """A legacy Pod, one GPU per container, its containers named for this test (the
    rewrite's memo is keyed by them: a rewrite another test left there would cost nothing)."""
    return pod([f"{tag}{i}" for i in range(containers)], gpus=1)


def _review(pod: dict[str, Any], mutate: bool, deadline: Deadline) -> Verdict:
    return review(request_from_object(pod), roomy_context(), mutate=mutate, deadline=deadline)


@pytest.mark.parametrize("mutate", ENDPOINTS.values(), ids=ENDPOINTS.keys())
def test_a_huge_pod_stops_within_a_few_containers_of_a_nearly_spent_deadline(
    mutate: bool,
) -> None:
    clock, reads_left = TickingClock(), 50
    deadline = Deadline.after(reads_left * TICK, clock)
    with pytest.raises(DeadlineExceeded):
        _review(_pod(17_000, f"s{mutate:d}-"), mutate, deadline)
    assert clock.reads <= 1 + reads_left + 2  # stopped at the first checkpoint past it


SIZES = {
    # id: (containers, pauses at least, pauses at most)
    "one-container": (1, 0, 0),
    "two-thousand-containers": (2_000, 100, None),
}


@pytest.mark.parametrize(("containers", "least", "most"), SIZES.values(), ids=SIZES.keys())
@pytest.mark.parametrize("mutate", ENDPOINTS.values(), ids=ENDPOINTS.keys())
def test_a_big_review_pauses_every_interval_and_a_small_one_never(
    mutate: bool, containers: int, least: int, most: int | None
) -> None:
    clock, pauses = TickingClock(), Pauses()
    deadline = Deadline.after(3600.0, clock, pauses)
    verdict = _review(_pod(containers, f"pauses-{mutate}"), mutate, deadline)
    assert verdict.allowed
    assert least <= pauses.count <= (most if most is not None else clock.reads)
    assert pauses.count <= clock.reads * TICK / PAUSE_INTERVAL + 1  # never more often


@pytest.mark.parametrize("mutate", ENDPOINTS.values(), ids=ENDPOINTS.keys())
def test_checkpoints_change_no_result(mutate: bool) -> None:
    legacy = _pod(300, f"same-{mutate}")
    paced = _review(legacy, mutate, Deadline.after(3600.0, TickingClock(), Pauses()))
    assert paced == _review(legacy, mutate, Deadline.never())


CLOCK_READS = {
    # id: (seconds to the deadline, whether it pauses, clock reads in 10 checkpoints)
    "no-deadline-no-pause": (float("inf"), False, 0),
    "no-deadline-a-pause": (float("inf"), True, 10),
    "a-deadline-no-pause": (1.0, False, 10),
}


@pytest.mark.parametrize(("seconds", "pauses", "reads"), CLOCK_READS.values(),
                         ids=CLOCK_READS.keys())  # fmt: skip
def test_a_checkpoint_not_due_to_pause_reads_the_clock_once_at_most(
    seconds: float, pauses: bool, reads: int
) -> None:
    clock, counted = TickingClock(), Pauses()
    deadline = Deadline.after(seconds, clock, counted) if pauses else Deadline.after(seconds, clock)
    clock.reads = 0
    for _ in range(10):  # well within one PAUSE_INTERVAL of work: no pause is due
        deadline.checkpoint("work")
    assert clock.reads == reads and counted.count == 0
