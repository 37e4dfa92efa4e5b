"""Faults while serving, each with a defined outcome (real `dragate serve`, real pipeline).

| fault                                   | outcome                                              |
|-----------------------------------------|------------------------------------------------------|
| SQLite ledger locked by another process | quota reviews denied inside the deadline, naming the |
|                                         | ledger (Settings.whenStateUnavailable: Deny); admits |
|                                         | again once the lock goes                             |
| policy directory deleted                | last good set kept, /readyz 200 "stale" + the error; |
|                                         | a new valid set is picked up when files come back    |
| certificate files missing mid-rotation  | new connections served with the last good cert, also |
|                                         | by a worker started while they are missing           |
| the worker killed with SIGKILL in load  | gunicorn respawns it; clients retrying on connection |
|                                         | errors all get answers; no 5xx; ledger == admitted   |
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from net_support import serving_serial
from reliability.reliability_support import (
    Serve,
    claim,
    eventually,
    ledger_usage,
    request,
    review,
    start,
    write_policies,
)

from webhook import certificates
from webhook.assembly import offline_context
from webhook.kube.snapshot import SnapshotState
from webhook.ledger.sqlite import LedgerUnavailable, SqliteLedger
from webhook.pipeline import request_from_object
from webhook.pipeline import review as pipeline_review
from webhook.policy.loading import load_policies
from webhook.types import FactsUnavailable

LOCKER = """
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN EXCLUSIVE")
db.execute("INSERT OR REPLACE INTO holders VALUES ('x', 'locker', '{}', NULL)")
print("locked", flush=True)
time.sleep(120)
"""


Locker = Callable[[Path], None]


@pytest.fixture
def locked() -> Iterator[Locker]:
    """Holds an exclusive write lock on a ledger file from another process until the test ends."""
    holders: list[subprocess.Popen[str]] = []

    def lock(path: Path) -> None:
        process = subprocess.Popen(
            [sys.executable, "-c", LOCKER, str(path)], stdout=subprocess.PIPE, text=True
        )
        holders.append(process)
        assert process.stdout is not None and process.stdout.readline().strip() == "locked"

    yield lock
    for process in holders:
        process.kill()
        process.wait()


def test_ledger_unavailable_is_facts_unavailable() -> None:
    """So the pipeline applies Settings.whenStateUnavailable instead of answering 500."""
    assert issubclass(LedgerUnavailable, FactsUnavailable)


def test_locked_ledger_denies_in_the_pipeline(tmp_path: Path, locked: Locker) -> None:
    policies = write_policies(tmp_path / "policies", {"team-a": 4})
    ledger = SqliteLedger(str(tmp_path / "ledger.db"), busy_timeout_ms=300)
    context = offline_context(lambda: load_policies([policies]), SnapshotState(), ledger)
    locked(tmp_path / "ledger.db")
    started = time.monotonic()
    verdict = pipeline_review(request_from_object(claim("c", "team-a")), context)
    assert time.monotonic() - started < 1.5
    assert not verdict.allowed
    reason = verdict.decision.reasons[0]
    assert reason.policy == "Settings/whenStateUnavailable" and "locked" in reason.message


def test_locked_ledger_over_https(tmp_path: Path, locked: Locker) -> None:
    """Default busy timeout (2 s) inside a 5 s deadline: an explicit denial after ~2 s; with a
    1 s deadline the deadline answers first (also a denial). Reads still work; writes resume."""
    policies = write_policies(tmp_path / "policies", {"team-a": 4})
    ledger = tmp_path / "ledger.db"
    server = start(tmp_path, "a", policies=policies, cert_dir=tmp_path / "certs", ledger=ledger)
    trust = server.cert_dir / "ca.crt"
    try:
        locked(ledger)
        started = time.monotonic()
        status, body = request(server.port, trust, "POST", "/validate?timeout=5s",
                               review(claim("c1", "team-a"), "uid-1"))  # fmt: skip
        elapsed = time.monotonic() - started
        assert status == 200 and elapsed < 4.75, (status, elapsed)
        response = body["response"]
        assert response["uid"] == "uid-1" and response["allowed"] is False
        assert "Settings/whenStateUnavailable" in response["status"]["message"]
        assert "ledger" in response["status"]["message"]
        assert response["auditAnnotations"]["decision"] == "denied"

        started = time.monotonic()
        status, body = request(server.port, trust, "POST", "/validate?timeout=1s",
                               review(claim("c2", "team-a"), "uid-2"))  # fmt: skip
        assert status == 200 and time.monotonic() - started < 2.0  # before the busy timeout
        assert body["response"]["allowed"] is False

        dry = review(claim("c3", "team-a"), "uid-3", dry_run=True)  # dry run: reads only
        status, body = request(server.port, trust, "POST", "/validate", dry)
        assert status == 200 and body["response"]["allowed"] is True
    finally:
        assert server.stop() == 0, server.logs()
    assert "Traceback" not in server.logs()


def test_ledger_recovers_after_the_lock(tmp_path: Path) -> None:
    policies = write_policies(tmp_path / "policies", {"team-a": 4})
    ledger = tmp_path / "ledger.db"
    server = start(tmp_path, "a", policies=policies, cert_dir=tmp_path / "certs", ledger=ledger)
    trust = server.cert_dir / "ca.crt"
    locker = subprocess.Popen(
        [sys.executable, "-c", LOCKER, str(ledger)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert locker.stdout is not None and locker.stdout.readline().strip() == "locked"
        body_1 = review(claim("c", "team-a"), "u1")
        _, body = request(server.port, trust, "POST", "/validate", body_1)
        assert body["response"]["allowed"] is False
        locker.kill()
        locker.wait()
        body_2 = review(claim("c", "team-a"), "u2")
        _, body = request(server.port, trust, "POST", "/validate", body_2)
        assert body["response"]["allowed"] is True
        assert ledger_usage(ledger)["team-a"] == {"claim:team-a/c": 1}
    finally:
        locker.kill()
        assert server.stop() == 0, server.logs()


def test_policy_directory_deleted(tmp_path: Path) -> None:
    policies = write_policies(tmp_path / "policies", {"team-a": 2})
    server = start(tmp_path, "a", policies=policies, cert_dir=tmp_path / "certs")
    trust = server.cert_dir / "ca.crt"

    def allowed(count: int, uid: str) -> bool:
        body = review(claim(f"c-{uid}", "team-a", count), uid, dry_run=True)
        status, answer = request(server.port, trust, "POST", "/validate", body)
        assert status == 200
        return bool(answer["response"]["allowed"])

    def readyz() -> tuple[int, dict[str, object]]:
        status, body = request(server.port, trust, "GET", "/readyz")
        return status, body

    try:
        assert allowed(2, "a") and not allowed(3, "b")
        shutil.rmtree(policies)
        # the worker notices (each request is a new connection)
        eventually(lambda: all(readyz()[1]["policies"]["state"] == "stale" for _ in range(8)),
                   what="stale")  # fmt: skip
        status, body = readyz()
        assert status == 200 and "policies" in " ".join(body["policies"]["errors"])
        for i in range(8):  # the last good set still judges: quota 2
            assert allowed(2, f"c{i}") and not allowed(3, f"d{i}")
        # a worker restarted while the files are gone boots with the master's set (stale)
        old = set(server.workers())
        for pid in old:
            os.kill(pid, signal.SIGKILL)
        eventually(lambda: len(set(server.workers()) - old) == 1, what="worker respawned")
        eventually(lambda: _answers(server), what="respawned worker serving")
        for i in range(8):
            assert readyz()[1]["policies"]["state"] == "stale"
            assert allowed(2, f"f{i}") and not allowed(3, f"g{i}")
        assert server.process.poll() is None
        write_policies(policies, {"team-a": 3})  # files come back: picked up, current again
        eventually(lambda: all(readyz()[1]["policies"]["state"] == "current" for _ in range(8)),
                   what="current")  # fmt: skip
        eventually(lambda: all(allowed(3, f"e{i}") for i in range(8)), what="new quota")
    finally:
        assert server.stop() == 0, server.logs()


def _answers(server: Serve) -> bool:
    try:
        return request(server.port, server.cert_dir / "ca.crt", "GET", "/healthz")[0] == 200
    except (OSError, ssl.SSLError):
        return False


def _serial(port: int, trust: Path) -> int:
    """The serial of the certificate a new connection is served with (GET /healthz too)."""
    status, serial = serving_serial(port, trust)
    assert status == 200
    return serial


def test_certificate_files_missing(tmp_path: Path) -> None:
    policies = write_policies(tmp_path / "policies", {"team-a": 2})
    live = tmp_path / "certs"
    server = start(tmp_path, "a", policies=policies, cert_dir=live)
    trust = tmp_path / "trust.pem"
    shutil.copy(live / "ca.crt", trust)
    backup = tmp_path / "backup"
    backup.mkdir()
    try:
        first = _serial(server.port, trust)
        for name in ("tls.crt", "tls.key"):
            shutil.copy(live / name, backup / name)
            (live / name).unlink()
        serials = {_serial(server.port, trust) for _ in range(20)}
        assert serials == {first}
        # a worker started while the files are missing still has the last good certificate
        old = set(server.workers())
        for pid in old:
            os.kill(pid, signal.SIGKILL)
        eventually(lambda: len(set(server.workers()) - old) == 1, what="worker respawned")
        eventually(lambda: _serial_or_none(server.port, trust) == first, what="respawned serve")
        assert {_serial(server.port, trust) for _ in range(20)} == {first}
        status, body = request(server.port, trust, "POST", "/validate",
                               review(claim("c", "team-a"), "u"))  # fmt: skip
        assert status == 200 and body["response"]["allowed"] is True
        # half a pair (new key, no certificate yet), then the new pair: no failed connection
        staging = tmp_path / "staging"
        shutil.copytree(backup, staging)
        for name in ("ca.crt", "ca.key"):
            shutil.copy(live / name, staging / name)
        certificates.renew(staging)
        shutil.copy(staging / "tls.key", live / "tls.key")
        assert {_serial(server.port, trust) for _ in range(10)} == {first}
        shutil.copy(staging / "tls.crt", live / "tls.crt")
        new = certificates.read_certs(live / "tls.crt")[0].serial_number
        eventually(lambda: all(_serial(server.port, trust) == new for _ in range(6)),
                   what="new certificate served")  # fmt: skip
    finally:
        assert server.stop() == 0, server.logs()
    assert "Traceback" not in server.logs()


def _serial_or_none(port: int, trust: Path) -> int | None:
    try:
        return _serial(port, trust)
    except (OSError, ssl.SSLError, AssertionError):
        return None


def _claims_client(
    worker: int,
    port: int,
    *,
    trust: Path,
    stop: threading.Event,
    lock: threading.Lock,
    stats: dict[str, int],
    admitted: dict[str, set[str]],
) -> None:
    """Create claims one after another; retry each on connection errors until answered."""
    i = 0
    while not stop.is_set():
        tenant = "team-a" if i % 2 else "team-b"
        name = f"w{worker}-{i}"
        body = review(claim(name, tenant), f"uid-{name}")
        for _attempt in range(40):
            try:
                status, answer = request(port, trust, "POST", "/validate", body)
            except (OSError, http.client.HTTPException):  # reset, EOF, cut-off body
                with lock:
                    stats["retries"] += 1
                time.sleep(0.05)
                continue
            with lock:
                stats["requests"] += 1
                if status >= 500:
                    stats["5xx"] += 1
                elif answer["response"]["allowed"]:
                    admitted[tenant].add(f"claim:{tenant}/{name}")
                else:
                    stats["denied"] += 1
            break
        else:
            with lock:
                stats["unanswered"] += 1
        i += 1


def test_worker_killed_mid_load(tmp_path: Path) -> None:
    """SIGKILL the worker twice while 6 clients create claims; retries on connection errors.

    Every claim gets an answer, no answer is a 5xx, and the ledger holds exactly the admitted
    claims (a claim reserved by the killed worker but never answered is re-admitted by its
    retry under the same holder, never counted twice).
    """
    tenants = {"team-a": 40, "team-b": 1000}
    policies = write_policies(tmp_path / "policies", tenants)
    ledger = tmp_path / "ledger.db"
    server = start(tmp_path, "a", policies=policies, cert_dir=tmp_path / "certs", ledger=ledger)
    trust = server.cert_dir / "ca.crt"
    admitted: dict[str, set[str]] = {t: set() for t in tenants}
    lock = threading.Lock()
    stats = {"requests": 0, "retries": 0, "5xx": 0, "unanswered": 0, "denied": 0}
    stop = threading.Event()

    crashed: list[str] = []

    def guarded(worker: int) -> None:
        try:
            _claims_client(worker, server.port, trust=trust, stop=stop, lock=lock,
                           stats=stats, admitted=admitted)  # fmt: skip
        except Exception as err:  # a client that dies would hide its last claim
            crashed.append(repr(err))

    threads = [threading.Thread(target=guarded, args=(n,), daemon=True) for n in range(6)]
    try:
        for thread in threads:
            thread.start()
        for _ in range(2):
            time.sleep(1.5)
            victim = server.workers()[0]
            os.kill(victim, signal.SIGKILL)
            eventually(lambda v=victim: len(server.workers()) == 1 and v not in server.workers(),
                       what="worker respawned")  # fmt: skip
        time.sleep(1.5)
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
        code = server.stop()
    print(f"\nworker kill: {json.dumps(stats)}, admitted "
          f"{ {t: len(a) for t, a in admitted.items()} }")  # fmt: skip
    assert code == 0, server.logs()
    assert crashed == []
    assert stats["5xx"] == 0 and stats["unanswered"] == 0
    assert stats["requests"] > 50
    usage = ledger_usage(ledger)
    for tenant, quota in tenants.items():
        held = usage.get(tenant, {})
        assert set(held) == admitted[tenant], tenant
        assert sum(held.values()) == len(admitted[tenant]) <= quota
    assert len(admitted["team-a"]) == 40  # the quota was reached and held exactly
