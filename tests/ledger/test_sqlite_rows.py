"""The SQLite ledger's remembered rows never answer for a file another connection changed.

Each connection keeps a tenant's decoded rows under `PRAGMA data_version`; these tests change
the file from another process, another thread, another connection outside dragate and the
connection itself, and check that every answer is the one the rows in the file give. A
randomized run of two ledgers on one file is compared with the reference ledger given the
same operations (the same arithmetic worked out from all the records, no SQLite).
"""

from __future__ import annotations

import json
import multiprocessing
import random
import sqlite3
import threading
from typing import Any

import pytest
from ledger_contract import GPU, MIG, Clock, ReferenceLedger, apply_operation, random_operation

from webhook.ledger import accounting, sqliterows
from webhook.ledger.accounting import PENDING_SECONDS, live, usage_of
from webhook.ledger.sqlite import SqliteLedger
from webhook.ledger.sqliterows import records_of
from webhook.types import ClassUsage


@pytest.fixture
def db_path(tmp_path: Any) -> str:
    path = str(tmp_path / "ledger.sqlite")
    SqliteLedger(path)  # the schema, made once as `serve` does at start
    return path


def in_file(path: str, tenant: str, now: float) -> dict[str, ClassUsage]:
    """The tenant's usage as the file holds it, read on a connection of its own."""
    db = sqlite3.connect(path)
    try:
        return usage_of(live(records_of(db, tenant), now=now))
    finally:
        db.close()


def _in_another_process(path: str, operation: str, holder: str, devices: int) -> None:
    ledger = SqliteLedger(path)
    if operation == "release":
        ledger.release("t", holder)
    else:
        ledger.reserve("t", {holder: {GPU: devices}}, {})


def run_in_another_process(*args: Any) -> None:
    process = multiprocessing.get_context("spawn").Process(target=_in_another_process, args=args)
    process.start()
    process.join(60)
    assert process.exitcode == 0


@pytest.mark.parametrize(
    ("operation", "devices", "used_between"),
    [("reserve", 2, 2), ("release", 0, None)],
    ids=["changed-elsewhere", "released-elsewhere"],
)
def test_a_holder_another_process_changed_is_written_again(
    db_path: str, operation: str, devices: int, used_between: int | None
) -> None:
    ledger = SqliteLedger(db_path)
    assert ledger.reserve("t", {"pod:u/gpu": {GPU: 1}}, {}).granted
    assert ledger.reserve("t", {"pod:u/gpu": {GPU: 1}}, {}).granted  # remembered now
    run_in_another_process(db_path, operation, "pod:u/gpu", devices)
    between = ledger.usage("t").get(GPU)
    assert (between.used if between else None) == used_between
    assert ledger.reserve("t", {"pod:u/gpu": {GPU: 1}}, {}).granted
    assert in_file(db_path, "t", 0)[GPU].used == 1
    assert ledger.usage("t") == in_file(db_path, "t", 0)


def test_another_process_filling_the_quota_refuses_a_new_holder(db_path: str) -> None:
    ledger = SqliteLedger(db_path)
    ledger.reserve("t", {"pod:u/gpu": {GPU: 1}}, {GPU: 4})
    ledger.usage("t")
    run_in_another_process(db_path, "reserve", "pod:other/gpu", 3)
    refused = ledger.reserve("t", {"pod:new/gpu": {GPU: 1}}, {GPU: 4})
    assert not refused.granted
    assert refused.usage[GPU].used == 4


def test_another_thread_s_change_is_seen(db_path: str) -> None:
    ledger = SqliteLedger(db_path)
    ledger.reserve("t", {"pod:u/gpu": {GPU: 1}}, {})
    ledger.usage("t")
    worker = threading.Thread(target=lambda: ledger.release("t", "pod:u/gpu"))
    worker.start()
    worker.join()
    assert ledger.usage("t") == {}
    assert ledger.reserve("t", {"pod:u/gpu": {GPU: 1}}, {}).granted
    assert in_file(db_path, "t", 0)[GPU].used == 1


def test_the_connection_s_own_writes_are_seen(db_path: str) -> None:
    """A connection's own commits leave its data_version as it was."""
    ledger = SqliteLedger(db_path)
    ledger.reserve("t", {"pod:u/gpu": {GPU: 1}}, {})
    ledger.usage("t")
    ledger.release("t", "pod:u/gpu")
    assert ledger.usage("t") == {}
    ledger.reserve("t", {"pod:u/gpu": {GPU: 1}}, {})
    ledger.reconcile({"t": {"pod:u/gpu": {GPU: 3}}})
    assert ledger.usage("t")[GPU].used == 3
    ledger.seed({})
    assert ledger.usage("t") == {}


def test_a_holder_past_its_bound_counts_until_a_reconcile_drops_it(db_path: str) -> None:
    """Re-admitted past its bound, a pending holder is neither renewed nor forgotten: only a
    reconcile whose truth lacks it drops it."""
    clock = Clock()
    ledger = SqliteLedger(db_path, clock=clock)
    ledger.reserve("t", {"pod:u/gpu": {GPU: 1}}, {GPU: 1})
    clock.now += PENDING_SECONDS + 1
    assert ledger.usage("t")[GPU].used == 1
    assert ledger.reserve("t", {"pod:u/gpu": {GPU: 1}}, {GPU: 1}).granted  # kept as it is
    assert in_file(db_path, "t", clock.now)[GPU].used == 1
    ledger.reconcile({})
    assert ledger.usage("t") == {}


def test_readmitting_beside_a_holder_past_its_bound_counts_both(db_path: str) -> None:
    clock = Clock()
    ledger = SqliteLedger(db_path, clock=clock)
    ledger.reserve("t", {"pod:old/gpu": {GPU: 2}}, {})
    clock.now += PENDING_SECONDS / 2
    ledger.reserve("t", {"pod:new/gpu": {GPU: 1}}, {})
    clock.now += PENDING_SECONDS / 2 + 1  # the first holder is past its bound, the second not
    again = ledger.reserve("t", {"pod:new/gpu": {GPU: 1}}, {})
    assert again.granted and again.usage[GPU].used == 3
    ledger.reconcile({})
    assert in_file(db_path, "t", 0)[GPU].used == 1  # the first one's row is gone


def _counting_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The tenants whose rows are decoded from the file, in order."""
    reads: list[str] = []
    decode = sqliterows.records_of

    def counted(db: sqlite3.Connection, tenant: str) -> Any:
        reads.append(tenant)
        return decode(db, tenant)

    monkeypatch.setattr(sqliterows, "records_of", counted)
    return reads


def test_a_connection_s_next_write_decodes_no_row(
    db_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A controller creating Pods one after another: each new holder is written from the
    rows the last write left, not from every holder of the tenant decoded again."""
    ledger = SqliteLedger(db_path)
    ledger.reserve("t", {"pod:0/gpu": {GPU: 1}}, {GPU: 100})
    reads = _counting_reads(monkeypatch)
    for i in range(1, 20):
        assert ledger.reserve("t", {f"pod:{i}/gpu": {GPU: 1}}, {GPU: 100}).granted
    assert reads == []
    assert in_file(db_path, "t", 0)[GPU].used == 20
    assert ledger.usage("t") == in_file(db_path, "t", 0)


def test_a_connection_s_next_new_holder_recounts_no_holder(
    db_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new holder among thousands: checked against the totals the last write left, and
    stored as one row; neither the tenant's totals, its usage nor its live holders are
    worked out again from every holder (`tests/bench/holders.py` measures the cost)."""
    ledger = SqliteLedger(db_path)
    ledger.reserve("t", {f"seed:{i}": {GPU: 1} for i in range(50)}, {GPU: 100})
    assert ledger.reserve("t", {"pod:0/gpu": {GPU: 1}}, {GPU: 100}).granted
    walked: list[str] = []
    for name in ("totals", "usage_of", "live", "reserve"):
        original = getattr(accounting, name)
        monkeypatch.setattr(accounting, name, _noting(walked, name, original))
    for i in range(1, 20):
        assert ledger.reserve("t", {f"pod:{i}/gpu": {GPU: 1}}, {GPU: 100}).granted
    assert walked == []
    refused = ledger.reserve("t", {"pod:big/gpu": {GPU: 40}}, {GPU: 100})
    assert not refused.granted and walked == ["usage_of"]  # the denial names the holders
    assert refused.usage[GPU].used == 70 == in_file(db_path, "t", 0)[GPU].used


def _noting(walked: list[str], name: str, original: Any) -> Any:
    def noted(*args: Any, **kwargs: Any) -> Any:
        walked.append(name)
        return original(*args, **kwargs)

    return noted


def _traced(ledger: SqliteLedger) -> list[str]:
    """Every SQL statement this thread's connection of `ledger` runs from now on."""
    statements: list[str] = []
    ledger._connection().db.set_trace_callback(statements.append)
    return statements


def test_an_unchanged_re_admission_asks_sqlite_only_its_data_version(db_path: str) -> None:
    """The most common review: answered from the remembered rows after one `PRAGMA
    data_version`, no rows read; once another connection writes, rows are read again."""
    ours, theirs = SqliteLedger(db_path), SqliteLedger(db_path)
    ours.reserve("t", {"pod:a/gpu": {GPU: 1}}, {GPU: 4})
    ours.reserve("u", {"pod:u/gpu": {GPU: 1}}, {GPU: 4})
    ours.usage("t")
    statements = _traced(ours)
    for _ in range(3):
        assert ours.reserve("t", {"pod:a/gpu": {GPU: 1}}, {GPU: 4}).granted
        assert ours.usage("t")[GPU].used == 1
    assert statements == ["PRAGMA data_version"] * 6
    theirs.reserve("t", {"pod:b/gpu": {GPU: 2}}, {GPU: 4})  # another connection writes
    statements.clear()
    assert ours.usage("t")[GPU].used == 3 and len(statements) == 2  # seen: read again
    ours.reserve("u", {"pod:v/gpu": {GPU: 1}}, {GPU: 4})  # our own write, to another tenant
    statements.clear()
    assert ours.usage("t")[GPU].used == 3
    assert statements == ["PRAGMA data_version"]  # t's rows checked, not decoded again


def _outside_dragate(path: str) -> None:
    """A row stored by a plain sqlite3 connection, as the sqlite3 shell would."""
    outside = sqlite3.connect(path, isolation_level=None)
    try:
        devices = json.dumps({GPU: 3})
        outside.execute("INSERT INTO holders VALUES ('t', 'pod:w/gpu', ?, NULL)", (devices,))
    finally:
        outside.close()


def _in_a_thread(write: Any) -> None:
    thread = threading.Thread(target=write)
    thread.start()
    thread.join()


def _reserve_three(ledger: SqliteLedger) -> None:
    ledger.reserve("t", {"pod:w/gpu": {GPU: 3}}, {})


WRITERS: dict[str, Any] = {
    "the-ledger-itself": lambda ours, path: _reserve_three(ours),
    "another-thread": lambda ours, path: _in_a_thread(lambda: _reserve_three(ours)),
    "another-ledger": lambda ours, path: _reserve_three(SqliteLedger(path)),
    "another-process": lambda ours, path: run_in_another_process(path, "reserve", "pod:w/gpu", 3),
    "outside-dragate": lambda ours, path: _outside_dragate(path),
}


@pytest.mark.parametrize("writer", list(WRITERS), ids=list(WRITERS))
def test_every_writer_s_change_is_seen_by_the_next_read_and_write(
    db_path: str, writer: str
) -> None:
    """Rows remembered by a read and by a write are never trusted past a commit, whoever
    made it: the next read counts it, and so does the next reservation."""
    ours = SqliteLedger(db_path)
    assert ours.reserve("t", {"pod:a/gpu": {GPU: 1}}, {GPU: 4}).granted
    assert ours.usage("t")[GPU].used == 1  # remembered now
    WRITERS[writer](ours, db_path)
    assert ours.usage("t")[GPU].used == 4 == in_file(db_path, "t", 0)[GPU].used
    refused = ours.reserve("t", {"pod:b/gpu": {GPU: 1}}, {GPU: 4})
    assert not refused.granted and refused.usage[GPU].used == 4


def test_another_connection_s_write_between_two_of_ours_is_counted(
    db_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ours, theirs = SqliteLedger(db_path), SqliteLedger(db_path)
    assert ours.reserve("t", {"pod:a/gpu": {GPU: 1}}, {GPU: 3}).granted
    assert theirs.reserve("t", {"pod:b/gpu": {GPU: 2}}, {GPU: 3}).granted
    reads = _counting_reads(monkeypatch)
    refused = ours.reserve("t", {"pod:c/gpu": {GPU: 1}}, {GPU: 3})
    assert not refused.granted and refused.usage[GPU].used == 3
    assert reads == ["t"]  # read again: the version moved
    assert ours.reserve("t", {"pod:c/gpu": {GPU: 0}}, {GPU: 3}).granted
    assert in_file(db_path, "t", 0)[GPU].used == 3


def test_a_write_on_one_tenant_keeps_what_is_known_of_another(
    db_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = SqliteLedger(db_path)
    ledger.reserve("u", {"pod:u/gpu": {GPU: 1}}, {})
    ledger.usage("u")
    reads = _counting_reads(monkeypatch)
    ledger.reserve("t", {"pod:t/gpu": {GPU: 1}}, {})
    assert ledger.usage("u")[GPU].used == 1
    assert reads == ["t"]


def test_a_refusal_keeps_the_rows_as_stored(db_path: str) -> None:
    """A refused write changes nothing in the file; a holder past its bound stays in it."""
    clock = Clock()
    ledger = SqliteLedger(db_path, clock=clock)
    ledger.reserve("t", {"pod:old/gpu": {GPU: 1}}, {GPU: 2})
    clock.now += PENDING_SECONDS + 1  # past its bound: it still counts
    ledger.reserve("t", {"pod:a/gpu": {GPU: 1}}, {GPU: 2})
    assert not ledger.reserve("t", {"pod:b/gpu": {GPU: 1}}, {GPU: 2}).granted
    assert ledger.reserve("t", {"pod:a/gpu": {GPU: 1}}, {GPU: 2}).granted
    db = sqlite3.connect(db_path)
    try:
        stored = {h for (h,) in db.execute("SELECT holder FROM holders WHERE tenant = 't'")}
    finally:
        db.close()
    assert stored == {"pod:old/gpu", "pod:a/gpu"}


def test_a_granted_reservation_s_usage_is_the_stored_usage(db_path: str) -> None:
    ledger = SqliteLedger(db_path)
    granted = ledger.reserve("t", {"pod:a/gpu": {GPU: 2}, "pod:b/gpu": {MIG: 1}}, {})
    assert dict(granted.usage) == in_file(db_path, "t", 0)
    assert granted.usage == in_file(db_path, "t", 0)
    assert sorted(granted.usage) == [GPU, MIG] and len(granted.usage) == 2


def test_decoded_devices_are_shared_read_only(db_path: str) -> None:
    ledger = SqliteLedger(db_path)
    ledger.reserve("t", {"pod:a/gpu": {GPU: 1}, "pod:b/gpu": {GPU: 1}}, {})
    db = sqlite3.connect(db_path)
    try:
        records = records_of(db, "t")
    finally:
        db.close()
    a, b = records["pod:a/gpu"].devices, records["pod:b/gpu"].devices
    assert a is b and a == {GPU: 1}
    with pytest.raises(TypeError):
        a[GPU] = 5  # type: ignore[index]


def test_remembered_tenants_stay_bounded(db_path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqliterows, "MAX_REMEMBERED_TENANTS", 4)
    ledger = SqliteLedger(db_path)
    for i in range(20):
        ledger.usage(f"t{i}")
        assert ledger._rows().remembered() <= 4


# ----------------------------------------------------------------------- randomized


@pytest.mark.parametrize("seed", range(3), ids=[f"seed-{s}" for s in range(3)])
def test_two_ledgers_on_one_file_answer_as_the_reference(db_path: str, seed: int) -> None:
    """Two SqliteLedgers are two connections: data_version tells each about the other's
    commits exactly as it would across processes."""
    rng, clock = random.Random(seed), Clock()
    ledgers = [SqliteLedger(db_path, clock=clock) for _ in range(2)]
    oracle = ReferenceLedger(clock)
    for step in range(400):
        operation = random_operation(rng)
        answer = apply_operation(rng.choice(ledgers), clock, operation)
        assert answer == apply_operation(oracle, clock, operation), (step, operation)
        for tenant in ("t", "u"):
            assert in_file(db_path, tenant, clock.now) == oracle.usage(tenant), (step, tenant)
