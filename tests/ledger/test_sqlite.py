"""The SQLite ledger keeps the ledger contract, the pending lifecycle, and counts exactly when
several processes reserve at once; a locked or foreign file fails clearly instead of hanging."""

from __future__ import annotations

import json
import multiprocessing
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ledger_contract import CONTRACT, EXPIRY_CONTRACT, GPU, MakeTimedLedger

from webhook.ledger.sqlite import (
    BUSY_TIMEOUT_MS,
    SCHEMA_VERSION,
    LedgerFileError,
    LedgerUnavailable,
    SqliteLedger,
)
from webhook.types import Deadline


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def db_path(tmp_path: Path) -> str:
    return str(tmp_path / "ledger.sqlite")


@pytest.mark.parametrize("case", CONTRACT, ids=[c.__name__ for c in CONTRACT])
def test_contract(case: Callable[[Callable[[], SqliteLedger]], None], tmp_path: Path) -> None:
    files = iter(range(100))
    case(lambda: SqliteLedger(str(tmp_path / f"l{next(files)}.sqlite")))


def test_pending_holder_is_released_after_its_bound_unless_its_object_appears(
    db_path: str,
) -> None:
    clock = Clock()
    ledger = SqliteLedger(db_path, clock=clock)
    ledger.reserve("t", {"claim:a/seen": {GPU: 1}, "claim:a/lost": {GPU: 1}}, {})
    clock.now += 60
    ledger.reconcile({"t": {"claim:a/seen": {GPU: 1}}})
    assert ledger.usage("t")[GPU].used == 2
    clock.now += 61
    ledger.reconcile({"t": {"claim:a/seen": {GPU: 1}}})
    assert [h.key for h in ledger.usage("t")[GPU].holders] == ["claim:a/seen"]


def test_pending_bound_is_configurable(db_path: str) -> None:
    clock = Clock()
    ledger = SqliteLedger(db_path, clock=clock, pending_seconds=5)
    ledger.reserve("t", {"claim:a/lost": {GPU: 1}}, {})
    clock.now += 6
    ledger.reconcile({})
    assert ledger.usage("t") == {}


def test_confirmed_holder_is_dropped_when_its_object_is_gone(db_path: str) -> None:
    ledger = SqliteLedger(db_path)
    ledger.seed({"t": {"claim:a/x": {GPU: 2}}})
    ledger.reconcile({"t": {}})
    assert ledger.usage("t") == {}


def test_seed_replaces_confirmed_truth_and_keeps_pending(db_path: str) -> None:
    ledger = SqliteLedger(db_path)
    ledger.seed({"t": {"claim:a/old": {GPU: 2}}})
    ledger.reserve("t", {"pod:u/gpu": {GPU: 1}}, {})
    ledger.seed({"t": {"claim:a/new": {GPU: 3}}})
    assert {h.key: h.devices for h in ledger.usage("t")[GPU].holders} == {
        "claim:a/new": 3,
        "pod:u/gpu": 1,
    }
    assert not ledger.reserve("t", {"claim:a/y": {GPU: 1}}, {GPU: 4}).granted


def test_state_survives_reopening(db_path: str) -> None:
    SqliteLedger(db_path).reserve("t", {"claim:a/x": {GPU: 3}}, {GPU: 4})
    assert SqliteLedger(db_path).usage("t")[GPU].used == 3


def test_a_pods_name_is_stored_among_its_devices_and_rows_before_have_none(
    db_path: str,
) -> None:
    """The name rides in the `devices` column as an entry of no devices: the schema stays,
    and a file written here is read by the version before (as a class holding 0)."""
    named = {"pod:u-1/gpu": "team-a/train-0"}
    SqliteLedger(db_path).reserve("t", {"pod:u-1/gpu": {GPU: 2}}, {}, names=named)
    with sqlite3.connect(db_path) as db:
        db.execute(  # a row as the version before wrote it
            "INSERT INTO holders VALUES ('t', 'pod:u-2/gpu', ?, NULL)", (json.dumps({GPU: 1}),)
        )
        stored = dict(db.execute("SELECT holder, devices FROM holders WHERE tenant = 't'"))
    assert json.loads(stored["pod:u-1/gpu"]) == {"@team-a/train-0": 0, GPU: 2}
    usage = SqliteLedger(db_path).usage("t")[GPU]
    assert usage.used == 3
    assert {h.key: h.name for h in usage.holders} == {
        "pod:u-1/gpu": "team-a/train-0",
        "pod:u-2/gpu": "",
    }


def test_threads_of_one_process_never_overcommit(db_path: str) -> None:
    ledger = SqliteLedger(db_path)
    granted: list[bool] = []

    def work(worker: int) -> None:
        for i in range(10):
            result = ledger.reserve("t", {f"claim:w{worker}/{i}": {GPU: 1}}, {GPU: 23})
            granted.append(result.granted)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert granted.count(True) == 23
    assert ledger.usage("t")[GPU].used == 23


def _reserve_many(path: str, worker: int, barrier: threading.Barrier) -> int:
    """One process: 25 reservations of one device each; returns how many were granted."""
    ledger = SqliteLedger(path, busy_timeout_ms=30_000)
    barrier.wait()
    return sum(
        ledger.reserve("t", {f"claim:p{worker}/{i}": {GPU: 1}}, {GPU: 37}).granted
        for i in range(25)
    )


def test_processes_reserving_at_once_grant_exactly_the_quota(db_path: str) -> None:
    SqliteLedger(db_path)  # create the schema once, as `serve` does at start
    context = multiprocessing.get_context("spawn")
    barrier = context.Manager().Barrier(4)
    with context.Pool(4) as pool:
        granted = pool.starmap(_reserve_many, [(db_path, w, barrier) for w in range(4)])
    assert sum(granted) == 37
    assert SqliteLedger(db_path).usage("t")[GPU].used == 37


def _in_forked_child(ledger: SqliteLedger) -> None:
    inherited = ledger._shared.db if ledger._shared else None  # as the fork copied it
    assert ledger.reserve("t", {"claim:child/x": {GPU: 1}}, {GPU: 4}).granted
    assert ledger._connection().db is not inherited  # the parent's is never used here
    assert ledger.usage("t")[GPU].used == 2


def test_a_forked_child_opens_its_own_connection(db_path: str) -> None:
    """A child forked from the process that made the ledger opens a connection of its own
    at its first use; its commit is seen by the parent's next read (data_version)."""
    ledger = SqliteLedger(db_path)
    assert ledger.reserve("t", {"claim:parent/x": {GPU: 1}}, {GPU: 4}).granted
    child = multiprocessing.get_context("fork").Process(target=_in_forked_child, args=(ledger,))
    child.start()
    child.join(60)
    assert child.exitcode == 0
    assert ledger.usage("t")[GPU].used == 2  # the child's write seen


def test_a_lock_held_past_the_busy_timeout_raises_instead_of_hanging(db_path: str) -> None:
    ledger = SqliteLedger(db_path, busy_timeout_ms=200)
    blocker = sqlite3.connect(db_path, isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")
    try:
        started = time.monotonic()
        with pytest.raises(LedgerUnavailable, match="locked by another writer for more than 200"):
            ledger.reserve("t", {"claim:a/x": {GPU: 1}}, {GPU: 4})
        assert time.monotonic() - started < 2.0
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert ledger.reserve("t", {"claim:a/x": {GPU: 1}}, {GPU: 4}).granted


def _hold_write_lock(path: str, holding: Any, release: Any) -> None:
    """In another process: take SQLite's write lock on the ledger and keep it until told."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("BEGIN IMMEDIATE")
    holding.set()
    release.wait(30)


def test_a_write_lock_held_by_another_process_raises_instead_of_hanging(db_path: str) -> None:
    context = multiprocessing.get_context("spawn")
    holding, release = context.Event(), context.Event()
    ledger = SqliteLedger(db_path, busy_timeout_ms=200)
    holder = context.Process(target=_hold_write_lock, args=(db_path, holding, release))
    holder.start()
    try:
        assert holding.wait(30)
        with pytest.raises(LedgerUnavailable, match="locked by another writer for more than 200"):
            ledger.reserve("t", {"claim:a/x": {GPU: 1}}, {GPU: 4})
    finally:
        release.set()
        holder.join(30)
    assert SqliteLedger(db_path).reserve("t", {"claim:a/x": {GPU: 1}}, {GPU: 4}).granted


def test_a_dead_writer_never_blocks_the_ledger(db_path: str) -> None:
    """The kernel drops the SQLite lock of a process killed while holding it."""
    context = multiprocessing.get_context("spawn")
    holding, release = context.Event(), context.Event()
    holder = context.Process(target=_hold_write_lock, args=(db_path, holding, release))
    holder.start()
    assert holding.wait(30)
    holder.kill()
    holder.join(30)
    assert SqliteLedger(db_path, busy_timeout_ms=200).reserve("t", {"c": {GPU: 1}}, {}).granted


def test_a_refused_or_failed_reservation_leaves_no_open_transaction(db_path: str) -> None:
    ledger = SqliteLedger(db_path)
    ledger.reserve("t", {"claim:a/x": {GPU: 4}}, {GPU: 4})
    assert not ledger.reserve("t", {"claim:a/y": {GPU: 1}}, {GPU: 4}).granted
    with pytest.raises(TypeError):
        ledger.reserve("t", {"claim:a/z": {GPU: "many"}}, {GPU: 9})  # type: ignore[dict-item]
    other = SqliteLedger(db_path, busy_timeout_ms=100)
    other.release("t", "claim:a/x")
    assert ledger.usage("t") == {}


@pytest.mark.parametrize(
    "content",
    [b"this is not a database, just some text\n" * 100, b"SQLite format 3\x00" + b"\xff" * 4080],
    ids=["text-file", "corrupt-header"],
)
def test_a_file_that_is_not_a_ledger_gives_a_clear_error(db_path: str, content: bytes) -> None:
    Path(db_path).write_bytes(content)
    with pytest.raises(LedgerFileError, match="is not a usable dragate ledger"):
        SqliteLedger(db_path)


def test_a_newer_schema_is_refused(db_path: str) -> None:
    with sqlite3.connect(db_path) as db:
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(LedgerFileError, match="schema version 2, this dragate reads up to 1"):
        SqliteLedger(db_path)


def test_an_unreachable_path_is_unavailable(tmp_path: Path) -> None:
    with pytest.raises(LedgerUnavailable, match="unable to open"):
        SqliteLedger(str(tmp_path / "missing-dir" / "ledger.sqlite"))


@pytest.mark.parametrize("case", EXPIRY_CONTRACT, ids=[c.__name__ for c in EXPIRY_CONTRACT])
def test_expiry_contract(case: Callable[[MakeTimedLedger], None], tmp_path: Path) -> None:
    case(lambda clock: SqliteLedger(str(tmp_path / "expiry.sqlite"), clock=clock))


def test_readmitting_an_unchanged_pending_holder_does_not_write(db_path: str) -> None:
    """Proof that it takes no write lock: another connection holds it, and the re-admission is
    answered anyway, while a change waits for the lock and gives up."""
    clock = Clock()
    ledger = SqliteLedger(db_path, clock=clock, busy_timeout_ms=200)
    ledger.reserve("t", {"pod:u/gpu": {GPU: 2}}, {GPU: 4})
    clock.now += 30
    writer = sqlite3.connect(db_path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    try:
        again = ledger.reserve("t", {"pod:u/gpu": {GPU: 2}}, {GPU: 4})
        assert again.granted and again.usage[GPU].used == 2
        with pytest.raises(LedgerUnavailable):
            ledger.reserve("t", {"pod:u/gpu": {GPU: 3}}, {GPU: 4})
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    clock.now += 91  # the first admission's bound, not the re-admission's: 30 + 91 > 120
    ledger.reconcile({})
    assert ledger.usage("t") == {}


def test_a_lock_wait_ends_at_the_review_deadline(db_path: str) -> None:
    """The busy timeout is 2 s; a review with 0.1 s left does not wait 2 s for the lock."""
    ledger = SqliteLedger(db_path)
    writer = sqlite3.connect(db_path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    try:
        started = time.monotonic()
        with pytest.raises(LedgerUnavailable):
            ledger.reserve("t", {"claim:a/x": {GPU: 1}}, {}, Deadline.after(0.1))
        waited = time.monotonic() - started
    finally:
        writer.execute("ROLLBACK")
        writer.close()
    assert waited < BUSY_TIMEOUT_MS / 1000, waited
    assert ledger.usage("t") == {}


def test_threads_share_one_connection_and_one_decoding_of_a_tenant(db_path: str) -> None:
    """Under gevent a thread is a greenlet per HTTP connection: a connection and a decoded
    copy of the tenant each would grow with the clients."""
    ledger = SqliteLedger(db_path)
    assert ledger.reserve("t", {"claim:a/x": {GPU: 1}}, {GPU: 4}).granted
    seen: list[tuple[int, int]] = []

    def read() -> None:
        seen.append((id(ledger._connection().db), id(ledger._read("t"))))

    threads = [threading.Thread(target=read) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(seen) == 8 and len(set(seen)) == 1


def test_sqlite_itself_never_waits_for_a_lock(db_path: str) -> None:
    """SQLite's busy handler sleeps in C, where gevent cannot switch to another greenlet:
    the ledger waits in its own cooperative sleeps instead."""
    ledger = SqliteLedger(db_path)
    assert ledger._connection().db.execute("PRAGMA busy_timeout").fetchone()[0] == 0
