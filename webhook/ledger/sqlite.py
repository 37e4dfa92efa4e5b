"""A ledger in a SQLite file: the offline webhook's quota state (`dragate serve --ledger FILE`).

One serving process admits on several threads, so the check-and-reserve must be one database
transaction: `BEGIN IMMEDIATE` takes SQLite's write lock before the tenant's rows are read, so
two threads can never both read "36 of 37 used" and both add one. The arithmetic itself is
`accounting.reserve`, shared with the memory and Kubernetes ledgers so that all three agree on
what fits.

WAL mode lets readers (`usage`) run while a writer holds the lock. A process has one
connection (`SharedConnection`), used by one thread or greenlet at a time, with one set of
decoded rows: under `dragate serve`'s gevent worker `threading.local` is per greenlet, that is
per HTTP connection, and a connection of its own per client would be a SQLite connection and a
decoded copy of the tenant per client. A connection made before a fork is never reused in the
child.

SQLite's own busy handler sleeps in C, where gevent cannot switch: the whole process would
stop while another process holds the write lock. So SQLite never waits here (busy timeout 0):
a statement that finds the file locked lets the connection go, sleeps with `time.sleep`
(cooperative under gevent's patching, a plain sleep otherwise) and tries again, until the
busy timeout or the review's deadline, whichever comes first, and then raises
`LedgerUnavailable` rather than hanging the admission request past its deadline.

Whether remembered rows are still the stored ones is SQLite's own `PRAGMA data_version`,
asked on every read (`sqliterows.TenantRows`): it moves for every commit of any other
connection, whether another thread of this process or another process on the same file (a
second `dragate serve`, the sqlite3 shell), so nothing outside SQLite has to be kept in step
and no writer can be missed. A write counter kept by this process could skip that call (one
read transaction, no rows) only by trusting that no other process writes the file. A write
starts from the rows the connection's last write left when no other connection has committed
since, so a controller creating Pods one after another in a tenant does not decode every
holder for each one. The rows also keep their totals and first expiry, so a new holder is
checked and stored without walking the others (`Rows.planned`): a new Pod's cost grows little
with the tenant's holders (`tests/bench/holders.py`; docs/benchmarks.md).
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from collections.abc import Set as AbstractSet
from contextlib import contextmanager
from typing import TypeVar

from webhook.ledger import accounting, holdernames
from webhook.ledger.accounting import PENDING_SECONDS, Holds, Record
from webhook.ledger.sqliterows import SharedConnection, TenantRows, all_records
from webhook.ledger.tenantrecords import Plan, Rows, UsageOf
from webhook.types import (
    ClassUsage,
    Deadline,
    DragateError,
    FactsUnavailable,
    Reservation,
    processid,
)

T = TypeVar("T")
SCHEMA_VERSION = 1
"""Stored in `PRAGMA user_version`; a file with a newer version is refused, never rewritten."""
BUSY_TIMEOUT_MS = 2000
"""How long a transaction waits for another connection's write lock; well inside the webhook's
admission deadline so that a stuck lock gives a clear error, not an apiserver timeout."""
FIRST_PAUSE = 0.001
LONGEST_PAUSE = 0.02
"""The sleeps between two tries for a locked file: doubling from the first to the longest, so
a short lock costs little and a long one a try per `LONGEST_PAUSE`."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS holders (
    tenant     TEXT NOT NULL,
    holder     TEXT NOT NULL,
    devices    TEXT NOT NULL,      -- JSON: device class -> devices
    expires_at REAL,               -- NULL once confirmed; pending holders expire
    PRIMARY KEY (tenant, holder)
) WITHOUT ROWID
"""
_LOCKED = ("database is locked", "database is busy", "database table is locked")


class LedgerUnavailable(FactsUnavailable):
    """The ledger cannot be read or written now (locked past the busy timeout, I/O error).

    A FactsUnavailable, so the pipeline gives the explicit `whenStateUnavailable` outcome.
    """


class LedgerFileError(DragateError):
    """The file is not a ledger this version can use: not SQLite, corrupt, or a newer schema."""


class WriterGate:
    """Lets one of this process's threads (greenlets) at a time reach SQLite's write lock.

    A writer waiting here is let in as soon as the last one commits, rather than polling the
    file in growing sleeps. Another process writing the same file is waited for by polling
    (`SqliteLedger._waiting`); the kernel drops a dead process's SQLite lock.
    """

    def __init__(self, path: str, timeout: float) -> None:
        self._path = path
        self._timeout = timeout
        self._thread_lock = threading.Lock()

    @contextmanager
    def held(self, review: Deadline | None = None) -> Iterator[None]:
        wait = review.bound(self._timeout) if review is not None else self._timeout
        if not self._thread_lock.acquire(timeout=wait):
            raise LedgerUnavailable(f"{self._path}: another thread kept the ledger too long")
        try:
            yield
        finally:
            self._thread_lock.release()


class SqliteLedger:
    """Per tenant: holder -> record, in one SQLite table; safe across threads (and processes)."""

    def __init__(
        self,
        path: str,
        *,
        clock: Callable[[], float] = time.time,
        pending_seconds: float = PENDING_SECONDS,
        busy_timeout_ms: int = BUSY_TIMEOUT_MS,
    ) -> None:
        self.path = path
        self._clock = clock
        self._pending_seconds = pending_seconds
        self._busy_timeout_ms = busy_timeout_ms
        self._shared: SharedConnection | None = None
        self._gate = WriterGate(path, busy_timeout_ms / 1000)
        with self._errors():  # fail at startup, not at the first admission
            self._waiting(self._open, None).close()

    # ------------------------------------------------------------------ Ledger protocol

    def usage(self, tenant: str, deadline: Deadline | None = None) -> Mapping[str, ClassUsage]:
        """A WAL read: it never waits for a writer; `deadline` bounds the rare waits for a
        file another connection is opening, checkpointing or recovering."""
        return self._read(tenant, deadline).usage_at(self._clock())

    def reserve(
        self,
        tenant: str,
        holds: Mapping[str, Mapping[str, int]],
        limits: Mapping[str, int],
        deadline: Deadline | None = None,
        names: Mapping[str, str] | None = None,
    ) -> Reservation:
        """Read the tenant's holders, check, write the difference: one IMMEDIATE transaction.

        A reservation that would change nothing (the same holder re-admitted, or a refusal)
        is answered from a plain read, without taking the write lock: it is exact as of that
        read, as a written one is as of its commit. The wait for the lock is bounded by
        `deadline`, and the deadline is checked again under the lock, before any write.
        """
        read = self._read(tenant, deadline)
        now = self._clock()
        if read.all_live(now) and accounting.readmitted(read.records, holds, now, names):
            return Reservation(True, UsageOf(read))  # what the plan would grant, unwritten
        plan = self._plan(read, holds, limits, names)
        if not plan.writes:
            return plan.reservation()
        with self._transaction(deadline, only=tenant) as db:
            rows = self._rows()
            stamp, current = rows.locked(tenant)
            # the rows read are still the stored ones: the plan made on them holds
            plan = plan if current is read else self._plan(current, holds, limits, names)
            if plan.writes:
                if deadline is not None:
                    deadline.check("storing the reservation")
                _write(db, tenant, plan)
            # kept before COMMIT, under the connection's lock: a failed commit forgets them
            rows.keep(tenant, stamp, plan.after)  # a refusal leaves the rows as stored
        return plan.reservation()

    def _plan(
        self,
        rows: Rows,
        holds: Mapping[str, Mapping[str, int]],
        limits: Mapping[str, int],
        names: Mapping[str, str] | None,
    ) -> Plan:
        return rows.planned(
            holds, limits, now=self._clock(), pending_seconds=self._pending_seconds, names=names
        )

    def release(self, tenant: str, holder: str) -> None:
        with self._transaction() as db:
            db.execute("DELETE FROM holders WHERE tenant = ? AND holder = ?", (tenant, holder))

    # ------------------------------------------------------------------ lifecycle

    def reconcile(
        self,
        truth: Mapping[str, Holds],
        names: Mapping[str, str] | None = None,
        *,
        seen_at: float | None = None,
        gone: AbstractSet[str] = frozenset(),
    ) -> None:
        """Confirm, keep or drop holders given the holds of existing objects per tenant, seen
        at `seen_at` (now when not given), the names of the Pods behind holders keyed by uid,
        and the holders whose objects were seen deleted before (`accounting.reconcile`)."""
        with self._transaction() as db:
            now = self._clock() if seen_at is None else seen_at
            stored = all_records(db)
            for tenant in set(stored) | set(truth):
                current = stored.get(tenant, {})
                updated = accounting.reconcile(
                    current, truth.get(tenant, {}), now=now, names=names, gone=gone
                )
                _write_diff(db, tenant, current, updated)

    def seed(
        self, holds_by_tenant: Mapping[str, Holds], names: Mapping[str, str] | None = None
    ) -> None:
        """Replace all confirmed holders with `holds_by_tenant` (the cluster's truth at startup),
        named by `names` (a Pod's holders, from the claims generated for it).

        Pending holders stay: they were admitted and their objects may not exist yet.
        """
        with self._transaction() as db:
            db.execute("DELETE FROM holders WHERE expires_at IS NULL")
            for tenant, holds in holds_by_tenant.items():
                for key, record in accounting.confirmed(holds, names).items():
                    _put(db, tenant, key, record)

    def close(self) -> None:
        """Close this process's connection (the next use opens another)."""
        shared, self._shared = self._shared, None
        if shared is not None and shared.pid == processid.current():
            with shared.lock:
                shared.db.close()

    # ------------------------------------------------------------------ connections

    def _connection(self) -> SharedConnection:
        """This process's connection; a new one after a fork (a parent's must not be reused).
        Two threads of a new child may both open one at first: each is correct alone, and
        the one kept last is used from then on."""
        shared = self._shared
        if shared is None or shared.pid != processid.current():
            with self._errors():
                shared = SharedConnection(self._waiting(self._open, None))
            self._shared = shared
        return shared

    def _rows(self) -> TenantRows:
        """The remembered rows of this process's connection (made with the connection)."""
        return self._connection().rows

    def _read(self, tenant: str, deadline: Deadline | None = None) -> Rows:
        """The tenant's rows outside a transaction; errors translated as `_errors` does (a
        plain try: this is every review's read, and a context manager costs more)."""
        try:
            shared = self._connection()
            return self._waiting(lambda: shared.read(tenant), deadline)
        except sqlite3.DatabaseError as error:
            raise self._translated(error) from error

    def _waiting(self, attempt: Callable[[], T], deadline: Deadline | None) -> T:
        """`attempt()`, tried again after a cooperative sleep while the file is locked, until
        the busy timeout or `deadline`; then the lock error is raised."""
        budget = self._busy_timeout_ms / 1000
        give_up = time.monotonic() + (budget if deadline is None else deadline.bound(budget))
        pause = FIRST_PAUSE
        while True:
            try:
                return attempt()
            except sqlite3.OperationalError as error:
                left = give_up - time.monotonic()
                if left <= 0 or not _locked(error):
                    raise
                time.sleep(min(pause, left))
                pause = min(pause * 2, LONGEST_PAUSE)

    def _open(self) -> sqlite3.Connection:
        """A connection on which SQLite never waits for a lock (`_waiting` does), usable from
        any thread (`SharedConnection` lets one at a time use it)."""
        db = sqlite3.connect(self.path, timeout=0, isolation_level=None, check_same_thread=False)
        try:
            db.execute("PRAGMA busy_timeout = 0")
            db.execute("PRAGMA journal_mode = WAL")
            db.execute("PRAGMA synchronous = NORMAL")
            _migrate(db, self.path)
        except BaseException:
            db.close()
            raise
        return db

    @contextmanager
    def _transaction(
        self, deadline: Deadline | None = None, *, only: str | None = None
    ) -> Iterator[sqlite3.Connection]:
        """BEGIN IMMEDIATE ... COMMIT, rolled back on any error; sqlite errors translated.

        The wait for the write lock ends at `deadline` when that comes before the busy timeout;
        while it waits, the connection serves reads. This connection's own commits do not
        change its data_version, so the rows it keeps are forgotten first; a transaction that
        writes `only` one tenant's rows leaves the others, and takes that tenant's itself
        (`TenantRows.locked`).
        """
        with self._gate.held(deadline), self._errors():
            shared = self._connection()
            self._waiting(lambda: shared.begin(forget=only is None), deadline)
            try:
                yield shared.db
            except BaseException:
                shared.end(commit=False)
                raise
            shared.end(commit=True)

    @contextmanager
    def _errors(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.DatabaseError as error:
            raise self._translated(error) from error

    def _translated(self, error: sqlite3.DatabaseError) -> DragateError:
        """A locked or failing file is unavailable (for now); anything else is not a ledger."""
        if isinstance(error, sqlite3.OperationalError):
            if _locked(error):
                return LedgerUnavailable(
                    f"ledger {self.path} is locked by another writer for more than "
                    f"{self._busy_timeout_ms} ms ({error})"
                )
            return LedgerUnavailable(f"ledger {self.path}: {error}")
        return LedgerFileError(f"{self.path} is not a usable dragate ledger: {error}")


# ---------------------------------------------------------------------- schema and writes


def _locked(error: sqlite3.OperationalError) -> bool:
    return any(text in str(error) for text in _LOCKED)


def _migrate(db: sqlite3.Connection, path: str) -> None:
    """Create the schema on an empty file; refuse a file written by a newer dragate."""
    version = int(db.execute("PRAGMA user_version").fetchone()[0])
    if version > SCHEMA_VERSION:
        raise LedgerFileError(
            f"{path} has ledger schema version {version}, this dragate reads up to "
            f"{SCHEMA_VERSION}; upgrade dragate or point --state at another file"
        )
    if version == SCHEMA_VERSION:
        return
    db.execute("BEGIN IMMEDIATE")
    try:
        db.execute(_SCHEMA)
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def _put(db: sqlite3.Connection, tenant: str, holder: str, record: Record) -> None:
    db.execute(
        "INSERT OR REPLACE INTO holders (tenant, holder, devices, expires_at) VALUES (?,?,?,?)",
        (tenant, holder, _stored_devices(record), record.expires_at),
    )


def _stored_devices(record: Record) -> str:
    """The `devices` column: the devices, and the holder's name as an entry of none
    (`holdernames`), so a file written here is still read by the version before."""
    return json.dumps(holdernames.with_name(record.devices, record.name), sort_keys=True)


def _write(db: sqlite3.Connection, tenant: str, plan: Plan) -> None:
    for holder in plan.deletes:
        db.execute("DELETE FROM holders WHERE tenant = ? AND holder = ?", (tenant, holder))
    for holder, record in plan.puts.items():
        _put(db, tenant, holder, record)


def _write_diff(
    db: sqlite3.Connection, tenant: str, before: Mapping[str, Record], after: Mapping[str, Record]
) -> None:
    """Write only the holders that changed, so a transaction stays as short as it can."""
    for holder in before.keys() - after.keys():
        db.execute("DELETE FROM holders WHERE tenant = ? AND holder = ?", (tenant, holder))
    for holder, record in after.items():
        known = before.get(holder)
        if known is not record and known != record:  # most are the very records read
            _put(db, tenant, holder, record)
