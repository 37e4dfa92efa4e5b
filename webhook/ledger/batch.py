"""Group commit: threads of one process that change the same tenant share one write.

Every change to a tenant's stored records costs a round trip to the store, and only one can
be in flight per tenant and process anyway (a second would only lose the compare-and-swap to
the first). So changes for a tenant queue up, and the thread whose turn it is takes every
change queued so far and commits them together: the store sees one write, and every caller
still gets the answer its own change produced, because the changes are applied one after
another in arrival order, each to the records the previous one left (`apply_in_order`),
exactly as if each had run alone in that order.

Each caller keeps its own deadline. A batch is committed by the earliest deadline in it (its
leader is the oldest caller); when that passes first, the changes whose callers still have
time go back to the head of the queue for the next batch. A change still queued when its
caller's deadline passes is withdrawn, so it is never written. A change already taken into a
batch in flight cannot be withdrawn: its caller gets FactsUnavailable at its deadline all
the same, and the change may or may not land, exactly as when a single write times out. That
is safe: a new holder is stored as pending, so it only over-counts until the pending bound
releases it (never an overcommit), and a release or a reconcile is correct whether it lands
or not.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from webhook.ledger.accounting import Records
from webhook.types import FactsUnavailable

T = TypeVar("T")
Change = Callable[[Records], tuple[Records, T]]
"""Records as read -> (records to store, result); storing the same records writes nothing."""


@dataclass(frozen=True)
class Answer:
    """What one change produced: its result, or the error it raised."""

    value: Any = None
    error: Exception | None = None


@dataclass(eq=False)
class Job(Generic[T]):
    """One caller's change, its deadline, and the answer its batch gave it."""

    change: Change[T]
    deadline: float
    answer: Answer | None = None
    done: bool = False  # set under the queue's lock, once the batch is over

    def result(self, tenant: str) -> T:
        """The change's result; FactsUnavailable when its batch ended without an answer."""
        if self.answer is None:
            raise FactsUnavailable(f"ledger for tenant {tenant!r} did not answer in time")
        if self.answer.error is not None:
            raise self.answer.error
        value: T = self.answer.value
        return value


Commit = Callable[[str, Sequence[Job[Any]], float], None]
"""(tenant, jobs in arrival order, deadline) -> None, having set every job's answer.

Raises OutOfTime when the deadline passes before the batch is stored, any other exception
when it cannot be stored at all.
"""


class OutOfTime(FactsUnavailable):
    """The batch's deadline passed before it could be stored; raise it only when nothing of
    the batch may have been stored (no write sent, or every write sent was refused)."""


def apply_in_order(records: Records, jobs: Sequence[Job[Any]]) -> tuple[Records, list[Answer]]:
    """Each job's change applied to the records the previous one left, in arrival order."""
    answers = []
    for job in jobs:
        try:
            records, value = job.change(records)
        except Exception as error:  # one caller's faulty change must not sink the batch
            answers.append(Answer(error=error))
        else:
            answers.append(Answer(value))
    return records, answers


def settle(jobs: Sequence[Job[Any]], answers: Sequence[Answer]) -> None:
    for job, answer in zip(jobs, answers, strict=True):
        job.answer = answer


def settle_all(jobs: Sequence[Job[Any]], error: Exception) -> None:
    """Every job not answered yet fails with `error`."""
    for job in jobs:
        job.answer = job.answer or Answer(error=error)


@dataclass(eq=False)
class _Queue:
    """One tenant's waiting jobs; `busy` while a thread commits a batch for the tenant."""

    ready: threading.Condition = field(default_factory=threading.Condition)
    waiting: list[Job[Any]] = field(default_factory=list)
    busy: bool = False

    def take(self) -> list[Job[Any]]:
        batch, self.waiting, self.busy = self.waiting, [], True
        return batch


class GroupCommit:
    """Per tenant, one thread at a time commits every change queued so far, in one batch."""

    def __init__(self, commit: Commit) -> None:
        self._commit = commit
        self._queues: dict[str, _Queue] = {}
        self._queues_lock = threading.Lock()

    def run(self, tenant: str, change: Change[T], deadline: float) -> T:
        """`change`'s result once committed; FactsUnavailable if not answered by `deadline`."""
        queue = self._queue_for(tenant)
        job = Job(change, deadline)
        with queue.ready:
            queue.waiting.append(job)
        while not job.done:  # a batch out of time puts back the jobs that still have time
            batch = self._wait_for_turn(queue, job, tenant)
            if batch:
                self._lead(queue, tenant, batch)
        return job.result(tenant)

    def queued(self, tenant: str) -> int:
        """Jobs waiting for the tenant's next batch (for tests and metrics)."""
        queue = self._queue_for(tenant)
        with queue.ready:
            return len(queue.waiting)

    def _queue_for(self, tenant: str) -> _Queue:
        with self._queues_lock:
            return self._queues.setdefault(tenant, _Queue())

    def _wait_for_turn(self, queue: _Queue, job: Job[Any], tenant: str) -> list[Job[Any]]:
        """The batch this thread must commit, or [] once `job` has been answered."""
        with queue.ready:
            while not job.done:
                remaining = job.deadline - time.monotonic()
                if remaining <= 0:
                    _give_up(queue, job, tenant)
                if not queue.busy and queue.waiting[0] is job:  # oldest first: its deadline
                    return queue.take()  # is the earliest, so the batch keeps to it
                queue.ready.wait(remaining)
        return []

    def _lead(self, queue: _Queue, tenant: str, batch: list[Job[Any]]) -> None:
        """Commit `batch` by the earliest deadline in it, then hand the turn on.

        When that deadline passes first, the jobs with time left go back to the head of the
        queue rather than fail with it: one caller's short budget must not sink the others.
        Committing them again cannot apply a change twice: OutOfTime is raised only before
        a request is sent or after a refused write, so nothing of the batch was stored.
        """
        deadline = min(job.deadline for job in batch)
        retry: list[Job[Any]] = []
        try:
            self._commit(tenant, batch, deadline)
        except OutOfTime as error:
            retry = [job for job in batch if job.deadline > deadline]
            settle_all([job for job in batch if job not in retry], error)
        except Exception as error:
            settle_all(batch, error)
        finally:
            self._hand_on(queue, batch, retry)

    def _hand_on(self, queue: _Queue, batch: list[Job[Any]], retry: list[Job[Any]]) -> None:
        """Mark the batch answered, put `retry` back first in line, wake the next leader.

        Under the queue's lock, so a job put back still has a caller waiting for it: one
        whose deadline passed has given up (or will, on seeing it answered with nothing).
        """
        with queue.ready:
            now = time.monotonic()
            retry = [job for job in retry if job.deadline > now]
            for job in batch:
                job.done = job not in retry
            queue.waiting[:0] = retry
            queue.busy = False
            queue.ready.notify_all()


def _give_up(queue: _Queue, job: Job[Any], tenant: str) -> None:
    """Raise FactsUnavailable for a job out of time, withdrawing it if it is still queued."""
    if job in queue.waiting:
        queue.waiting.remove(job)
        queue.ready.notify_all()  # it may have been next in line
        raise FactsUnavailable(f"ledger for tenant {tenant!r} too contended; retry")
    raise FactsUnavailable(f"ledger for tenant {tenant!r} did not answer in time")
