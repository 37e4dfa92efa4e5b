"""Sustained load against TWO `dragate serve` processes sharing one SQLite ledger, with chaos.

Clients (threads, keep-alive, a new connection every 20 requests) send a mix of claim
creates, dry runs, Pods and legacy-GPU Pods to /validate and /mutate. A client that meets a
connection error retries the same review on the other process, as the apiserver reaches
another endpoint through the Service. Meanwhile:
  (a) the serving certificate is renewed (same CA), later the CA is rotated (bundle first);
  (b) the policies are reloaded with a valid change (every quota raised by a third);
  (c) process B is stopped with SIGTERM and started again on the same port.
Outcome: zero failed admissions (a failure = a 5xx, or no answer from either process) and
zero overcommit (admitted devices <= quota per tenant, and the ledger holds exactly the
admitted claims). `DRAGATE_CHAOS_SECONDS` sets the length (default 12 s; the documented run
used 60 s).
"""

from __future__ import annotations

import http.client
import itertools
import json
import os
import random
import shutil
import signal
import ssl
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reliability.reliability_support import (
    claim,
    eventually,
    ledger_usage,
    pod,
    review,
    start,
    tls_context,
    write_policies,
)

from webhook import certificates

SECONDS = float(os.environ.get("DRAGATE_CHAOS_SECONDS", "12"))
TENANTS = ("t0", "t1", "t2", "t3")
QUOTA_BEFORE, QUOTA_AFTER = int(12 * SECONDS), int(16 * SECONDS)  # full late in the run
CLIENTS = 6
RECONNECT_EVERY = 20
CONNECTION_ERRORS = (OSError, ssl.SSLError, http.client.HTTPException)


@dataclass
class Tally:
    lock: threading.Lock = field(default_factory=threading.Lock)
    requests: int = 0
    retried_connection_errors: int = 0
    failed: int = 0
    server_errors: int = 0
    new_connections: int = 0
    allowed: int = 0
    denied: int = 0
    latencies: list[float] = field(default_factory=list)
    admitted: dict[str, dict[str, int]] = field(default_factory=lambda: {t: {} for t in TENANTS})
    failures: list[str] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        ordered = sorted(self.latencies) or [0.0]
        return {
            "seconds": SECONDS,
            "requests": self.requests,
            "per_second": round(self.requests / SECONDS, 1),
            "new_connections": self.new_connections,
            "retried_connection_errors": self.retried_connection_errors,
            "failed": self.failed,
            "5xx": self.server_errors,
            "allowed": self.allowed,
            "denied": self.denied,
            "p50_ms": round(statistics.median(ordered) * 1000, 1),
            "p99_ms": round(ordered[int(len(ordered) * 0.99) - 1] * 1000, 1),
            "max_ms": round(ordered[-1] * 1000, 1),
            "admitted_devices": {t: sum(a.values()) for t, a in self.admitted.items()},
        }


class Client:
    """One apiserver-like client: a keep-alive connection to its home process, failover."""

    def __init__(self, n: int, ports: list[int], trust: Path, tally: Tally) -> None:
        self.n, self.ports, self.trust, self.tally = n, ports, trust, tally
        self.home = n % 2
        self.conn: http.client.HTTPSConnection | None = None
        self.used = 0
        self.answered = 0
        self.rng = random.Random(n)

    def connect(self, index: int) -> http.client.HTTPSConnection:
        if self.conn is None or self.used >= RECONNECT_EVERY:
            self.close()
            context = tls_context(self.trust)  # re-read: picks up a published CA bundle
            self.conn = http.client.HTTPSConnection(
                "127.0.0.1", self.ports[index], context=context, timeout=15
            )
            self.used = 0
            with self.tally.lock:
                self.tally.new_connections += 1
        self.used += 1
        return self.conn

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def send(self, path: str, body: dict[str, Any]) -> dict[str, Any] | None:
        """The response of the first process that answers; None when neither does."""
        data = json.dumps(body).encode()
        index = self.home
        for attempt in range(12):
            started = time.monotonic()
            try:
                conn = self.connect(index)
                conn.request("POST", path, body=data, headers={"Content-Type": "application/json"})
                reply = conn.getresponse()
                raw = reply.read()
                if reply.getheader("Connection", "").lower() == "close":
                    self.close()
            except CONNECTION_ERRORS:
                self.close()
                with self.tally.lock:
                    self.tally.retried_connection_errors += 1
                index = 1 - index  # the other endpoint behind the Service
                time.sleep(0.02 * attempt)
                continue
            self.answered += 1
            with self.tally.lock:
                self.tally.requests += 1
                self.tally.latencies.append(time.monotonic() - started)
                if reply.status >= 500:
                    self.tally.server_errors += 1
                    self.tally.failed += 1
                    self.tally.failures.append(f"{reply.status} {raw[:200]!r}")
                    return None
            answer: dict[str, Any] = json.loads(raw)["response"]
            assert answer["uid"] == body["request"]["uid"]
            return answer
        with self.tally.lock:
            self.tally.failed += 1
            self.tally.failures.append(f"no answer for {body['request']['uid']}")
        return None

    def run(self, stop: threading.Event) -> None:
        i = 0
        while not stop.is_set():
            i += 1
            name = f"c{self.n}-{i}"
            tenant = self.rng.choice(TENANTS)
            roll = self.rng.random()
            if roll < 0.1:  # a claim that reserves devices
                count = self.rng.choice((1, 1, 2))
                answer = self.send("/validate", review(claim(name, tenant, count), f"u-{name}"))
                if answer is not None:
                    self.record(answer, tenant, f"claim:{tenant}/{name}", count)
            elif roll < 0.4:
                self.send("/validate", review(claim(name, tenant), f"u-{name}", dry_run=True))
            elif roll < 0.85:
                self.send("/validate", review(pod(name, tenant), f"u-{name}"))
            else:
                gpu = [{"name": "c", "image": "i", "resources": {"limits": {"nvidia.com/gpu": 1}}}]
                legacy = pod(name, tenant, containers=gpu)
                answer = self.send("/mutate", review(legacy, f"u-{name}"))
                assert answer is None or answer["allowed"] is True
        self.close()

    def record(self, answer: dict[str, Any], tenant: str, holder: str, count: int) -> None:
        with self.tally.lock:
            if answer["allowed"]:
                self.tally.allowed += 1
                self.tally.admitted[tenant][holder] = count
            else:
                self.tally.denied += 1


def at(fraction: float, begun: float, step: Callable[[], None], log: list[str]) -> None:
    time.sleep(max(0.0, begun + fraction * SECONDS - time.monotonic()))
    started = time.monotonic()
    step()
    log.append(f"{fraction:.2f}: {step.__name__} ({time.monotonic() - started:.2f}s)")


def test_load_with_chaos(tmp_path: Path) -> None:
    live = tmp_path / "certs"
    certificates.create(live, ["localhost", "127.0.0.1"])
    trust = tmp_path / "trust.pem"
    shutil.copy(live / "ca.crt", trust)
    policies = write_policies(tmp_path / "policies", dict.fromkeys(TENANTS, QUOTA_BEFORE))
    ledger = tmp_path / "ledger.db"
    servers = [
        start(tmp_path, name, policies=policies, cert_dir=live, ledger=ledger)
        for name in ("a", "b")
    ]
    tally = Tally()
    stop = threading.Event()
    clients = [Client(n, [s.port for s in servers], trust, tally) for n in range(CLIENTS)]
    threads = [threading.Thread(target=c.run, args=(stop,), daemon=True) for c in clients]
    timeline: list[str] = []
    answered: list[int] = []  # requests answered by the end of each step

    def renew_leaf() -> None:
        certificates.renew(live)

    def reload_policies() -> None:
        write_policies(policies, dict.fromkeys(TENANTS, QUOTA_AFTER))

    def rotate_ca() -> None:
        staging = tmp_path / "staging"
        shutil.copytree(live, staging)
        certificates.renew(staging, rotate_ca=True)
        shutil.copy(staging / "ca-bundle.crt", trust)  # publish old + new CA first...
        before = [c.answered for c in clients]  # (a connect under way reads the old trust)
        eventually(lambda: all(c.answered > n for c, n in zip(clients, before, strict=True)),
                   what="an answer to every client after the bundle was published")  # fmt: skip
        for name in ("ca.crt", "ca.key", "tls.key", "tls.crt"):  # ...then the new leaf
            certificates.write_file(live / name, (staging / name).read_bytes(), private=True)

    def restart_b() -> None:
        assert servers[1].stop(signal.SIGTERM) == 0
        servers[1].restart()

    begun = time.monotonic()
    try:
        for thread in threads:
            thread.start()
        for fraction, step in ((0.15, renew_leaf), (0.30, reload_policies), (0.45, rotate_ca),
                               (0.60, restart_b)):  # fmt: skip
            at(fraction, begun, step, timeline)
            answered.append(tally.requests)
        time.sleep(max(0.0, begun + SECONDS - time.monotonic()))
        eventually(lambda: tally.requests > answered[-1], what="answers after the last step")
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
        codes = [s.stop() for s in servers]
    summary = tally.summary()
    print(f"\nchaos timeline: {timeline}\nchaos figures: {json.dumps(summary)}")
    assert codes == [0, 0], [s.logs()[-3000:] for s in servers]
    assert tally.failed == 0, tally.failures[:10]
    assert all(b > a for a, b in itertools.pairwise([0, *answered])), f"a stall: {answered}"
    usage = ledger_usage(ledger)
    for tenant in TENANTS:
        held = usage.get(tenant, {})
        assert held == tally.admitted[tenant], tenant  # ledger == admitted, holder by holder
        assert sum(held.values()) <= QUOTA_AFTER  # never overcommitted
    for server in servers:
        assert "Traceback" not in server.logs()
