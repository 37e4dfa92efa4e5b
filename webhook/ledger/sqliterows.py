"""The SQLite ledger's rows as read: decoded once, remembered per connection and tenant.

Each connection keeps a tenant's decoded rows with the `PRAGMA data_version` they were read
under (`TenantRows`). SQLite changes `data_version` whenever another connection commits
(another thread's, another process's, anything's) and never for the connection's own
commits. So a read that finds `data_version` unchanged answers from memory and is still
exact, and a write, holding the write lock (no other connection can commit then), starts
from remembered rows under an unchanged `data_version` and keeps what it wrote. Rows are
shared by later reads: nothing may change them (`accounting` builds new records and never
changes those it is given). A process has one connection (`SharedConnection`), so its
threads (greenlets) share one decoding of a tenant and one connection's file descriptors.
"""

from __future__ import annotations

import functools
import json
import sqlite3
import threading
from collections.abc import Mapping
from types import MappingProxyType
from typing import NamedTuple

from webhook.ledger import holdernames
from webhook.ledger.accounting import Record, Records
from webhook.ledger.tenantrecords import Rows
from webhook.types import processid

MAX_REMEMBERED_TENANTS = 256
"""Tenants whose decoded rows one connection keeps; past this it starts over."""


class Stamp(NamedTuple):
    """What a write transaction read before its rows: the connection's `data_version`."""

    version: int


class TenantRows:
    """One connection's decoded rows per tenant, with the connection's `PRAGMA data_version`
    they were read under.

    A read asks `data_version` (one read transaction, no rows) and answers from memory while
    it is where it was. It is read before the rows, so rows read after another connection's
    commit are kept under the older mark and read again next time: never stale, at worst
    read twice. The connection's own commits do not change `data_version`, so a write either
    forgets everything first (`forget`) or takes its tenant's rows out and puts back what it
    wrote (`locked`, `keep`).
    """

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db
        self._tenants: dict[str, tuple[int, Rows]] = {}

    def read(self, tenant: str) -> Rows:
        version = self._data_version()
        found = self._tenants.get(tenant)
        if found is not None and found[0] == version:
            return found[1]
        rows = Rows(records_of(self._db, tenant))
        self._remember(tenant, (version, rows))
        return rows

    def locked(self, tenant: str) -> tuple[Stamp, Rows]:
        """Inside a write transaction: the mark to `keep` the result under, and the tenant's
        rows exact as of now.

        No other connection can commit while this one holds the write lock, so rows
        remembered under the `data_version` read now are the stored rows; others are read."""
        stamp = Stamp(self._data_version())
        found = self._tenants.pop(tenant, None)  # `keep` puts the rows written back
        if found is not None and found[0] == stamp.version:
            return stamp, found[1]
        return stamp, Rows(records_of(self._db, tenant))

    def keep(self, tenant: str, stamp: Stamp, rows: Rows) -> None:
        """After this connection committed `rows` for `tenant` under the write lock `stamp`
        was read under: its own commit leaves `data_version` as it was, and any other
        connection's commit moves it, so `rows` stay exact until then."""
        self._remember(tenant, (stamp.version, rows))

    def _remember(self, tenant: str, entry: tuple[int, Rows]) -> None:
        if len(self._tenants) >= MAX_REMEMBERED_TENANTS:
            self._tenants.clear()
        self._tenants[tenant] = entry

    def _data_version(self) -> int:
        return int(self._db.execute("PRAGMA data_version").fetchone()[0])

    def forget(self) -> None:
        self._tenants.clear()

    def remembered(self) -> int:
        """How many tenants' rows are kept now (tests check the bound)."""
        return len(self._tenants)


class SharedConnection:
    """This process's connection to the file and the rows decoded through it, used by one
    thread (greenlet) at a time: a statement, or a transaction from BEGIN to COMMIT, holds
    `lock`. Between two statements of a read nobody else's transaction is open on it, so a
    read never sees a write not yet committed."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db
        self.rows = TenantRows(db)
        self.pid = processid.current()
        self.lock = threading.RLock()

    def read(self, tenant: str) -> Rows:
        with self.lock:
            return self.rows.read(tenant)

    def begin(self, *, forget: bool) -> None:
        """Hold the connection and take SQLite's write lock, or let go and raise."""
        self.lock.acquire()
        try:
            if forget:
                self.rows.forget()
            self.db.execute("BEGIN IMMEDIATE")
        except BaseException:
            self.lock.release()
            raise

    def end(self, *, commit: bool) -> None:
        """COMMIT (or ROLLBACK) and let the connection go; rows kept in a transaction that
        does not commit are forgotten."""
        try:
            if commit:
                self.db.execute("COMMIT")
            else:
                self.db.execute("ROLLBACK")
        except BaseException:
            commit = False
            if self.db.in_transaction:
                self.db.execute("ROLLBACK")
            raise
        finally:
            if not commit:
                self.rows.forget()
            self.lock.release()


def _record(devices: str, expires_at: float | None) -> Record:
    if holdernames.MARK not in devices:
        return Record(_devices(devices), expires_at)
    plain, name = holdernames.split(_devices(devices))
    return Record(plain, expires_at, name)


@functools.lru_cache(maxsize=1024)
def _devices(text: str) -> Mapping[str, int]:
    """A row's devices, decoded once per distinct text: a tenant's thousands of holders
    mostly hold the same few (`{"gpu.nvidia.com": 1}`), and a read decodes every row.
    Shared between records, so read-only: `accounting` never changes a record's devices."""
    parsed = json.loads(text)
    return MappingProxyType({str(c): int(n) for c, n in parsed.items()})


def records_of(db: sqlite3.Connection, tenant: str) -> Records:
    rows = db.execute("SELECT holder, devices, expires_at FROM holders WHERE tenant = ?", (tenant,))
    return {holder: _record(devices, expires) for holder, devices, expires in rows}


def all_records(db: sqlite3.Connection) -> dict[str, Records]:
    stored: dict[str, Records] = {}
    for tenant, holder, devices, expires in db.execute(
        "SELECT tenant, holder, devices, expires_at FROM holders"
    ):
        stored.setdefault(tenant, {})[holder] = _record(devices, expires)
    return stored
