"""The quota ledger in a cluster: one TenantUsage object per tenant, changed by compare-and-swap.

Every webhook replica (one serving process each) applies the shared arithmetic
(`accounting.reserve`) to the tenant's records and writes them back with the resourceVersion
they were read at. The API server refuses a write based on a stale read with 409 Conflict, so
of two racing admissions exactly one wins and the other re-reads and re-checks: the quota can
never be overcommitted, whatever the number of replicas. Replicas meet only there.

Within a process, changes for a tenant are committed in batches (`batch.GroupCommit`): the
thread whose turn it is applies every queued change in arrival order and writes once. It
works from the records this process last wrote or read, without a GET (unless it wrote the
tenant back to back: `_busy`), and re-reads only after a 409 or 404; an answer is given only
once it is known to rest on the stored records, either because the compare-and-swap that
stored it succeeded, or, when nothing is written (a denial), because it was re-checked on a
fresh read. `usage()` and `records()` always read.

The records are stored as one string (`recordtext`, `spec.records`, see `tenantusage`): the
API server's cost per write then stays flat as holders accumulate.

With a `GrantBook` (`grants`, as `dragate serve` runs in a cluster), most admissions are
answered from this process's grant of the tenant's quota without waiting for a write, and a
`Flusher` thread writes their holders moments later; every write still goes through the same
batches and compare-and-swap, which keep grants and holders within the limit together. The
ledger makes that thread and the want watch (`loops`) but starts neither: the composer does
(`grantloops`), and until they run every admission waits for its write.

Admission must not hang on the API: each operation has a total time budget, and running out
raises FactsUnavailable, which the pipeline turns into a refusal (fail closed).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any, TypeVar

from webhook.kube.api import ApiError, KubeApi, Unreachable
from webhook.ledger import accounting, recordtext, wants
from webhook.ledger.accounting import Holds, Records
from webhook.ledger.batch import Answer, Change, GroupCommit, Job, OutOfTime, apply_in_order, settle
from webhook.ledger.flusher import Flusher
from webhook.ledger.grantloops import GrantLoops
from webhook.ledger.grants import GrantBook
from webhook.ledger.tenantrecords import Rows
from webhook.ledger.tenantusage import COLLECTION, Stored, object_name, stored_of, tenant_usage
from webhook.ledger.wantwatch import WantWatch
from webhook.types import ClassUsage, Deadline, FactsUnavailable, Reservation

T = TypeVar("T")


class KubeLedger:
    """A Ledger on TenantUsage objects; safe across threads and replicas."""

    def __init__(
        self,
        api: KubeApi,
        *,
        budget: float = 1.5,
        reconcile_budget: float = 10.0,
        pending_seconds: float = accounting.PENDING_SECONDS,
        drop_grace: float = 5.0,
        clock: Callable[[], float] = time.time,
        grants: GrantBook | None = None,
    ) -> None:
        self.api = api
        self.grants = grants  # this process's grants of quota; None: every admission writes
        self.budget = budget
        self.reconcile_budget = reconcile_budget
        self.pending_seconds = pending_seconds
        self.drop_grace = drop_grace
        self.clock = clock
        self._turns = GroupCommit(self._commit_batch)
        self._known: dict[str, Stored] = {}  # per tenant: as this process last read or wrote
        self._last_write: dict[str, tuple[float, float]] = {}  # per tenant: (ended, seconds)
        self.loops = _grant_loops(self, api, grants, clock)  # started by the composer

    @classmethod
    def from_kubeconfig(cls, path: str | None = None, **options: Any) -> KubeLedger:
        return cls(KubeApi.from_kubeconfig(path), **options)

    @classmethod
    def in_cluster(cls, **options: Any) -> KubeLedger:
        return cls(KubeApi.in_cluster(), **options)

    # ---------------------------------------------------------------- Ledger

    def usage(self, tenant: str, deadline: Deadline | None = None) -> Mapping[str, ClassUsage]:
        records = self.records(tenant, deadline)
        return accounting.usage_of(accounting.live(records, now=self.clock()))

    def records(self, tenant: str, deadline: Deadline | None = None) -> Records:
        """The tenant's records as stored, with what this process admitted and not yet wrote."""
        records = self._read(tenant, time.monotonic() + self._budget(deadline)).records
        return self.grants.overlay(tenant, records) if self.grants is not None else records

    def reserve(
        self,
        tenant: str,
        holds: Mapping[str, Mapping[str, int]],
        limits: Mapping[str, int],
        deadline: Deadline | None = None,
        names: Mapping[str, str] | None = None,
    ) -> Reservation:
        """Granted at once from this process's grant when it fits; otherwise one change in
        the tenant's next batch, withdrawn unwritten if `deadline` passes while it waits (a
        write already sent may land: it is pending and expires). Refused only for other
        processes' grants, it asks for them back and tries again (`wants`). The usage comes
        with a refusal only: listing every holder costs in proportion to the holders. A Pod
        drawing from its gang (`accounting.is_draw`) is always written: what it draws depends
        on the stored gang holder, which a grant's queue does not see."""
        drawing = any(accounting.is_draw(devices) for devices in holds.values())
        if not drawing and self._from_grant(tenant, holds, limits, deadline, names):
            return Reservation(True)
        ends = time.monotonic() + self._budget(deadline)
        pause = wants.WANT_PAUSE
        while True:
            change, blocked = self._reserving(holds, limits, names)
            answer = self.update(tenant, change, ends - time.monotonic())
            late = time.monotonic() + pause + wants.RETRY_ROOM > ends
            if answer.granted or not blocked() or late:
                return answer
            time.sleep(pause)
            pause = min(pause * 2, wants.MAX_WANT_PAUSE)

    def _from_grant(
        self,
        tenant: str,
        holds: Mapping[str, Mapping[str, int]],
        limits: Mapping[str, int],
        deadline: Deadline | None,
        names: Mapping[str, str] | None = None,
    ) -> bool:
        """Admitted from this process's grant, without a write now; otherwise counted as
        demand, so the write that decides it sizes the grant for what comes next."""
        book, loops = self.grants, self.loops
        if book is None or loops is None or not loops.running():
            return False  # nothing would write what a grant admitted
        if deadline is not None:
            deadline.check("reserving quota")
        if book.admit(tenant, holds, limits, names):
            return True
        book.note(tenant, holds, limits)
        return False

    def _reserving(
        self,
        holds: Mapping[str, Mapping[str, int]],
        limits: Mapping[str, int],
        names: Mapping[str, str] | None = None,
    ) -> tuple[Change[Reservation], Callable[[], bool]]:
        """The change that reserves `holds`, and whether its last refusal was only for other
        processes' grants (`wants.reserve_or_want`)."""
        blocked = [False]
        owner = self.grants.owner if self.grants is not None else None

        def change(records: Records) -> tuple[Records, Reservation]:
            kept, answer, blocked[0] = wants.reserve_or_want(
                records, holds, limits, now=self.clock(),
                pending_seconds=self.pending_seconds, owner=owner, names=names,
            )  # fmt: skip
            return kept, answer

        return change, lambda: blocked[0]

    def _budget(self, deadline: Deadline | None) -> float:
        return self.budget if deadline is None else deadline.bound(self.budget)

    def release(self, tenant: str, holder: str) -> None:
        def change(records: Records) -> tuple[Records, None]:
            return {k: r for k, r in records.items() if k != holder}, None

        self.update(tenant, change, self.budget)

    def reconcile(
        self,
        truth: Mapping[str, Holds],
        names: Mapping[str, str] | None = None,
        *,
        seen_at: float | None = None,
        gone: AbstractSet[str] = frozenset(),
    ) -> None:
        """Bring every tenant's records in line with the existing objects (`truth`, seen at
        `seen_at`, now when not given), naming the holders keyed by a Pod's uid that have no
        name yet from `names`, and dropping the holders in `gone` (their objects were seen
        deleted before the truth) that `truth` lacks (`accounting.reconcile`).

        A confirmed holder missing from `truth` becomes pending for `drop_grace` seconds
        before it is dropped: another replica's cache may lag this one's, and a claim it
        has not seen yet must not be forgotten on its word alone. A tenant whose records no
        longer fit in one object (`recordtext.Unstorable`) is skipped, not the tenants after
        it; the first such error is raised once the others are done.
        """
        tenants = set(self._stored_tenants()) | set(truth)
        unstorable: list[recordtext.Unstorable] = []
        for tenant in sorted(tenants):
            change = self._reconcile_with(truth.get(tenant, {}), names, seen_at, gone)
            try:
                self.update(tenant, change, self.reconcile_budget)
            except recordtext.Unstorable as error:
                unstorable.append(error)
        if unstorable:
            raise unstorable[0]

    def _reconcile_with(
        self,
        truth: Holds,
        names: Mapping[str, str] | None,
        seen_at: float | None,
        gone: AbstractSet[str],
    ) -> Change[None]:
        def change(records: Records) -> tuple[Records, None]:
            now = self.clock() if seen_at is None else seen_at
            kept = accounting.reconcile(
                records, truth, now=now, drop_grace=self.drop_grace, names=names, gone=gone
            )
            return kept, None

        return change

    # ------------------------------------------------------------------ CAS

    def update(self, tenant: str, change: Change[T], budget: float) -> T:
        """Apply `change` to the tenant's records with compare-and-swap, retrying conflicts.

        Raises FactsUnavailable when the API does not let the change through in `budget` s.
        Threads of one process queue per tenant and the first in line writes for all of them
        (`batch.GroupCommit`), so compare-and-swap races only happen between processes.
        """
        return self._turns.run(tenant, change, time.monotonic() + budget)

    def _commit_batch(self, tenant: str, jobs: Sequence[Job[Any]], deadline: float) -> None:
        """Apply `jobs` in order to the tenant's records and store the outcome in one write.

        Starts from the records this process last knew (no GET) unless it is `_busy`; on a
        conflict, or when the jobs would write nothing to records not read just now, reads
        them afresh and starts over, so no answer rests on a stale copy. With grants, every
        batch also writes the holders admitted from the grant and sizes the grant again.
        """
        known = None if self._busy(tenant) else self._known.get(tenant)
        stored, fresh = (known, False) if known else (self._reread(tenant, deadline), True)
        attempt = 0
        while True:
            rows, answers = self._plan(tenant, stored, jobs)
            if rows.records == stored.records:
                self._settle_flight(tenant, landed=False)
                if fresh:
                    settle(jobs, answers)
                    return
            elif self._write_if_current(tenant, rows, stored, deadline):
                settle(jobs, answers)
                return
            else:  # lost the race: back off before re-reading
                attempt += 1
                self._pause(attempt, deadline, tenant)
            stored, fresh = self._reread(tenant, deadline), True

    def _plan(
        self, tenant: str, stored: Stored, jobs: Sequence[Job[Any]]
    ) -> tuple[Rows, list[Answer]]:
        """The rows to store and each job's answer; with grants, the book's plan around
        the jobs (a write it registers as in flight until `_settle_flight`)."""
        if self.grants is not None:
            return self.grants.plan(tenant, stored.rows, lambda rows: apply_in_order(rows, jobs))
        records, answers = apply_in_order(stored.records, jobs)
        return (stored.rows if records is stored.records else Rows(records)), answers

    def _settle_flight(self, tenant: str, *, landed: bool | None) -> None:
        """Tell the book whether the planned write is stored (None: it may be)."""
        if self.grants is not None:
            self.grants.settle(tenant, landed)

    def flush(self, tenant: str) -> None:
        """Store what the grant admitted, and size the grant again (the Flusher's call)."""
        self.update(tenant, _unchanged, self.budget)

    def close(self, timeout: float = 2.0) -> None:
        """Write what the grants admitted and give every grant back (shutting down)."""
        if self.loops is not None:
            self.loops.stop(timeout)

    def _busy(self, tenant: str) -> bool:
        """True while this process wrote the tenant less than half a write's time ago.

        A process writing back to back from its remembered copy would leave another process
        that lost a race no window to re-read and write in between: that one would lose
        every race until its budget ran out (its p99 at the budget). Reading first gives
        it the window; a tenant not written back to back is written without the read. Back
        to back means a next change ready at once (a busy loop, a queue): one client
        creating claims one after another through the API server leaves more than half a
        write's time between writes, which needs no read (a bound of a whole write's time
        would make many of its admissions read).
        """
        ended, seconds = self._last_write.get(tenant, (0.0, 0.0))
        return time.monotonic() - ended < seconds / 2

    def _pause(self, attempt: int, deadline: float, tenant: str) -> None:
        """Jittered backoff after a lost race, so racing writers spread out."""
        delay = random.uniform(0, min(0.002 * 2**attempt, 0.1))
        if time.monotonic() + delay >= deadline:
            raise OutOfTime(f"ledger for tenant {tenant!r} too contended; retry")
        time.sleep(delay)

    def _reread(self, tenant: str, deadline: float) -> Stored:
        """The tenant's records as stored now, remembered as the base of the next write."""
        stored = self._read(tenant, deadline)
        self._known[tenant] = stored
        return stored

    def _read(self, tenant: str, deadline: float) -> Stored:
        try:
            obj = self.api.request(
                "GET", f"{COLLECTION}/{object_name(tenant)}", timeout=_left(deadline, tenant)
            )
        except ApiError as error:
            if error.status != 404:
                raise FactsUnavailable(f"ledger read for {tenant!r}: {error}") from error
            return Stored(Rows({}), None)
        except Unreachable as error:
            raise FactsUnavailable(f"ledger read for {tenant!r}: {error}") from error
        return stored_of(obj)

    def _write_if_current(self, tenant: str, rows: Rows, base: Stored, deadline: float) -> bool:
        """Write `rows` if the object is still at `base`'s version; False on a conflict.

        Whatever the outcome, the copy this process knows is replaced (by the written object)
        or dropped, so no later write starts from a version known to be stale; and the book
        learns whether the planned grant is stored.
        """
        self._known.pop(tenant, None)
        try:
            written = self._put(tenant, rows, base, deadline)
        except recordtext.Unstorable:
            self._settle_flight(tenant, landed=False)  # nothing was sent
            raise
        except BaseException:
            self._settle_flight(tenant, landed=None)  # it may have landed
            raise
        self._settle_flight(tenant, landed=written)
        return written

    def _put(self, tenant: str, rows: Rows, base: Stored, deadline: float) -> bool:
        lines = base.lines.copy()
        body = tenant_usage(
            tenant, rows.records, base.resource_version, lines, now=self.clock(), totals=rows.totals
        )
        if base.uid:
            body["metadata"]["uid"] = base.uid
        began = time.monotonic()
        try:
            if base.resource_version is None:
                written = self.api.request(
                    "POST", COLLECTION, body=body, timeout=_left(deadline, tenant)
                )
            else:
                path = f"{COLLECTION}/{object_name(tenant)}"
                written = self.api.request("PUT", path, body=body, timeout=_left(deadline, tenant))
        except ApiError as error:
            # Conflict (also for another uid: deleted and created again), AlreadyExists on
            if error.status in (404, 409):  # create, or deleted
                return False
            raise FactsUnavailable(f"ledger write for {tenant!r}: {error}") from error
        except Unreachable as error:
            # The write may have landed; if so, the pending bound releases it.
            raise FactsUnavailable(f"ledger write for {tenant!r}: {error}") from error
        # what was sent is what is stored (one string): no need to decode it back
        metadata = written["metadata"]
        self._known[tenant] = Stored(
            rows, str(metadata["resourceVersion"]), lines, str(metadata.get("uid", ""))
        )
        ended = time.monotonic()
        self._last_write[tenant] = (ended, ended - began)
        return True

    def _stored_tenants(self) -> list[str]:
        deadline = time.monotonic() + self.reconcile_budget
        try:
            listed = self.api.request("GET", COLLECTION, timeout=_left(deadline, "*"))
        except (ApiError, Unreachable) as error:
            raise FactsUnavailable(f"cannot list TenantUsages: {error}") from error
        return [str((o.get("spec") or {}).get("tenant", "")) for o in listed.get("items") or []]


def _left(deadline: float, tenant: str) -> float:
    remaining = deadline - time.monotonic()
    if remaining <= 0.01:
        raise OutOfTime(f"ledger for tenant {tenant!r} did not answer in time")
    return remaining


def _grant_loops(
    ledger: KubeLedger, api: KubeApi, grants: GrantBook | None, clock: Callable[[], float]
) -> GrantLoops | None:
    """The loops a ledger with grants needs, made and not started."""
    if grants is None:
        return None
    return GrantLoops(Flusher(grants, ledger.flush), WantWatch(api, grants, clock=clock))


def _unchanged(records: Records) -> tuple[Records, None]:
    return records, None
