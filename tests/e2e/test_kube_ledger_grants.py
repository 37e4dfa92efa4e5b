"""KubeLedger with grants (`webhook.ledger.grants`), against the real kube-apiserver.

Admissions answered from a process's grant must never let the stored holders and grants
pass the limit, must all reach the stored records, and must not wait for a write; a grant
that blocks another process must come back; a killed process's grant keeps counting until
its lease ends. Each test asserts which requests were made and what is stored, not timings.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from ledger_contract import CONTRACT, EXPIRY_CONTRACT, GPU, Clock, MakeTimedLedger

from webhook.kube.api import Unreachable
from webhook.ledger import grants, grantstate, wants
from webhook.ledger.grants import GrantBook
from webhook.ledger.grantstate import LEASE_SECONDS
from webhook.ledger.kube import KubeLedger
from webhook.types import FactsUnavailable

from .cluster import Cluster
from .ledger_support import race, started, stored
from .processes import wait_for

pytestmark = pytest.mark.e2e

Fresh = Callable[..., KubeLedger]


def granted(fresh: Fresh, owner: str = "", clock: Callable[[], float] | None = None,
            **options: Any) -> KubeLedger:  # fmt: skip
    """A fresh KubeLedger with a grant book of its own (sharing the ledger's clock)."""
    book = GrantBook(owner or grants.process_owner(), **({"clock": clock} if clock else {}))
    return fresh(grants=book, **({"clock": clock} if clock else {}), **options)


def settled(ledger: KubeLedger, cluster: Cluster, tenant: str) -> dict[str, Any]:
    """The stored records once the ledger has written everything it admitted."""
    assert ledger.grants is not None
    wait_for(lambda: ledger.grants is not None and ledger.grants.pending() == 0, timeout=10,
             what="the queued holders written")  # fmt: skip
    return stored(cluster, tenant)


def totals(records: dict[str, Any], *, grants_too: bool = True) -> int:
    return sum(
        r["devices"].get(GPU, 0)
        for key, r in records.items()
        if grants_too or not key.startswith(wants.GRANT_PREFIX)
    )


@pytest.mark.parametrize("case", CONTRACT, ids=[c.__name__ for c in CONTRACT])
def test_contract_with_grants(
    case: Callable[[Callable[[], KubeLedger]], None], fresh: Fresh
) -> None:
    case(lambda: granted(fresh))


@pytest.mark.parametrize("case", EXPIRY_CONTRACT, ids=[c.__name__ for c in EXPIRY_CONTRACT])
def test_expiry_contract_with_grants(case: Callable[[MakeTimedLedger], None], fresh: Fresh) -> None:
    case(lambda clock: granted(fresh, clock=clock))


def test_admissions_from_a_grant_make_no_request(crd: Cluster, fresh: Fresh) -> None:
    """A burst of 60 admissions writes only a few times in the caller's thread: the grant
    doubles with the demand; every holder is stored moments later, pending."""
    ledger = granted(fresh)
    caller, by_caller = threading.get_ident(), [0]
    original = ledger.api.request

    def counting(method: str, path: str, **options: Any) -> Any:
        by_caller[0] += threading.get_ident() == caller
        return original(method, path, **options)

    ledger.api.request = counting  # type: ignore[method-assign]
    for i in range(60):
        assert ledger.reserve("fast", {f"claim:fast/c{i}": {GPU: 1}}, {GPU: 1000}).granted
    assert by_caller[0] <= 12, f"{by_caller[0]} requests in the caller's thread for 60"
    records = settled(ledger, crd, "fast")
    claims = {k: r for k, r in records.items() if k.startswith("claim:")}
    assert set(claims) == {f"claim:fast/c{i}" for i in range(60)}
    assert all(r.get("expiresAt") for r in claims.values()), "a new holder is pending"
    assert totals(records) <= 1000


def test_racing_replicas_with_grants_grant_exactly_the_quota(crd: Cluster, fresh: Fresh) -> None:
    """2 processes (replicas) x 8 threads x 6 claims race for one tenant's 40 GPUs: exactly 40 are
    granted, every granted holder is stored, and no grant outlives the processes."""
    fresh()
    quota, threads, each = 40, 8, 6
    answers = race(crd, "grant-racers", quota, processes=2, threads=threads, each=each,
                   grants=True)  # fmt: skip
    assert sum(a["answered"] for a in answers) == 2 * threads * each
    granted_keys = {k for a in answers for k in a["granted"]}
    assert len(granted_keys) == quota
    records = stored(crd, "grant-racers")
    holders = {k for k in records if k.startswith("claim:")}
    assert holders == granted_keys, "a granted holder is missing from the stored records"
    assert totals(records) == quota
    assert not [k for k in records if k.startswith(wants.GRANT_PREFIX)], "a grant outlived"


def test_an_idle_grant_comes_back_to_a_process_that_needs_it(crd: Cluster, fresh: Fresh) -> None:
    """A holds a standing grant, idle, while B needs the capacity: B's request, refused only
    because of A's grant, leaves a want; A sees it on its watch of wanted TenantUsages and
    gives the grant back at once (it would keep it for STANDING_SECONDS otherwise), so B is
    granted within its budget."""
    first = granted(fresh, owner="replica-a/1-aaa")
    for name in ("a1", "a2"):  # the first write takes a grant, the second comes from it
        assert first.reserve("lend", {f"claim:lend/{name}": {GPU: 1}}, {GPU: 10}).granted
    book = first.grants
    assert book is not None
    wait_for(lambda: book.pending() == 0, timeout=5, what="A's holders written")
    lent = stored(crd, "lend")[grants.grant_key("replica-a/1-aaa")]["devices"][GPU]
    assert lent == 4  # twice the demand of the burst, half of the 8 left free
    assert grantstate.STANDING_SECONDS > 5.0 + 1, "B's budget must end before A would go idle"
    second = started(KubeLedger.from_kubeconfig(str(crd.kubeconfig), budget=5.0,
                                                grants=GrantBook("replica-b/2-bbb")))  # fmt: skip
    try:
        assert second.reserve("lend", {"claim:lend/b": {GPU: 8}}, {GPU: 10}).granted
    finally:
        second.close()
    records = stored(crd, "lend")
    assert grants.grant_key("replica-a/1-aaa") not in records
    assert wants.want_key("replica-b/2-bbb") in records, "B did not have to ask"
    assert records[wants.want_key("replica-b/2-bbb")]["devices"] == {}
    assert totals(records, grants_too=False) == 10
    assert totals(records) <= 10


def test_a_want_is_answered_by_an_active_process_too(crd: Cluster, fresh: Fresh) -> None:
    """A keeps admitting (its grant stays wanted by demand); B's want still makes A give it
    back at A's next write, so B is granted within its budget."""
    first = granted(fresh, owner="replica-a/1-act")
    limit = 20
    for i in range(4):
        assert first.reserve("busy", {f"claim:busy/a{i}": {GPU: 1}}, {GPU: limit}).granted
    stop = threading.Event()

    def keep_admitting() -> None:
        number = 4
        while not stop.is_set() and number < 8:
            first.reserve("busy", {f"claim:busy/a{number}": {GPU: 1}}, {GPU: limit})
            number += 1
            stop.wait(0.1)

    thread = threading.Thread(target=keep_admitting)
    thread.start()
    try:
        book = GrantBook("replica-b/2-act")
        second = started(KubeLedger.from_kubeconfig(str(crd.kubeconfig), budget=5.0, grants=book))
        answer = second.reserve("busy", {"claim:busy/b": {GPU: 10}}, {GPU: limit})
        second.close()
    finally:
        stop.set()
        thread.join()
    assert answer.granted, "A's 8 holders and B's 10 fit the limit of 20 once A gives back"
    records = settled(first, crd, "busy")
    assert records["claim:busy/b"]["devices"] == {GPU: 10}
    assert totals(records) <= limit


KILLED = textwrap.dedent(
    """
    import sys
    from webhook.ledger.grants import GrantBook
    from webhook.ledger.kube import KubeLedger
    ledger = KubeLedger.from_kubeconfig(sys.argv[1], grants=GrantBook("replica-k/9-dead"))
    ledger.loops.start()  # as the composer starts them
    # the write of the first admission takes a grant: twice its 2 devices
    ledger.reserve("killed", {"claim:killed/first": {"gpu.nvidia.com": 2}},
                   {"gpu.nvidia.com": 10})
    ledger.loops.flusher.flush = lambda tenant: None  # killed before its flush
    for n in range(2):
        answer = ledger.reserve("killed", {f"claim:killed/q{n}": {"gpu.nvidia.com": 1}},
                                {"gpu.nvidia.com": 10})
        print(answer.granted, flush=True)
    sys.stdin.read()
    """
)


def test_a_killed_process_grant_keeps_counting_until_its_lease_ends(
    crd: Cluster, fresh: Fresh
) -> None:
    """Its two admissions from the grant were never written; the stored grant still counts
    them (and more) until the lease ends, so no other process can overcommit meanwhile."""
    clock = Clock()
    clock.now = time.time()
    observer = granted(fresh, clock=clock)
    child = subprocess.Popen([sys.executable, "-c", KILLED, str(crd.kubeconfig)],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert child.stdout is not None
        assert [child.stdout.readline().strip() for _ in range(2)] == ["True", "True"]
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    records = stored(crd, "killed")
    assert "claim:killed/q0" not in records, "the test needs the admissions unwritten"
    dead = records[grants.grant_key("replica-k/9-dead")]
    assert dead["devices"][GPU] >= 2, "the dead process's grant does not cover what it admitted"
    assert dead["expiresAt"] >= time.time() + LEASE_SECONDS - 30, "a lease of LEASE_SECONDS"
    room = 10 - totals(records)
    clock.now = time.time()
    assert not observer.reserve("killed", {"claim:killed/other": {GPU: room + 1}}, {GPU: 10},
                                ).granted  # fmt: skip
    clock.now = dead["expiresAt"] + 0.001  # the lease has ended
    assert observer.reserve("killed", {"claim:killed/other": {GPU: room + 1}}, {GPU: 10}).granted


def test_a_lowered_limit_takes_the_grant_away(crd: Cluster, fresh: Fresh) -> None:
    ledger = granted(fresh)
    for i in range(3):
        assert ledger.reserve("lower", {f"claim:lower/c{i}": {GPU: 1}}, {GPU: 100}).granted
    assert settled(ledger, crd, "lower").get(grants.grant_key(ledger.grants.owner))  # type: ignore[union-attr]
    assert not ledger.reserve("lower", {"claim:lower/d": {GPU: 1}}, {GPU: 3}).granted
    records = settled(ledger, crd, "lower")
    assert grants.grant_key(ledger.grants.owner) not in records  # type: ignore[union-attr]
    assert totals(records) == 3


def test_closing_writes_everything_and_gives_the_grant_back(crd: Cluster, fresh: Fresh) -> None:
    ledger = granted(fresh)
    for i in range(5):
        assert ledger.reserve("close", {f"claim:close/c{i}": {GPU: 1}}, {GPU: 100}).granted
    ledger.close()
    records = stored(crd, "close")
    assert {k for k in records if k.startswith("claim:")} == {f"claim:close/c{i}" for i in range(5)}
    assert not [k for k in records if k.startswith(wants.GRANT_PREFIX)]


class LosingAnswers:
    """The real API, except that every `every`-th write lands and its answer is lost
    (Unreachable after the request): the ledger cannot know whether its grant changed."""

    def __init__(self, api: Any, every: int) -> None:
        self.api, self.every, self.writes = api, every, 0

    def request(self, method: str, path: str, **options: Any) -> Any:
        answer = self.api.request(method, path, **options)
        if method in ("PUT", "POST"):
            self.writes += 1
            if self.writes % self.every == 0:
                raise Unreachable(f"{method} {path}: answer lost (test)")
        return answer


def test_writes_whose_answer_is_lost_never_let_grants_overcommit(
    crd: Cluster, fresh: Fresh
) -> None:
    """Two processes admit 1-3 GPUs at a time against a limit of 30 while half of their
    writes land with the answer lost; what they granted never passes the limit, and every
    holder they granted is stored in the end."""
    first = granted(fresh, owner="replica-a/1-lost")
    second = started(
        KubeLedger.from_kubeconfig(str(crd.kubeconfig), grants=GrantBook("replica-b/2-lost"))
    )
    limit, admitted, lock = 30, [], threading.Lock()
    for ledger in (first, second):
        ledger.api = LosingAnswers(ledger.api, every=2)  # type: ignore[assignment]

    def admit(ledger: KubeLedger, name: str) -> None:
        for number in range(25):
            key, size = f"claim:lost/{name}{number}", 1 + number % 3
            try:
                answer = ledger.reserve("lost", {key: {GPU: size}}, {GPU: limit})
            except FactsUnavailable:
                continue  # a lost answer on the request path: refused, maybe stored pending
            if answer.granted:
                with lock:
                    admitted.append((key, size))

    threads = [threading.Thread(target=admit, args=(ledger, name))
               for ledger, name in ((first, "a"), (second, "b"))]  # fmt: skip
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    lost = sum(ledger.api.writes // 2 for ledger in (first, second))  # type: ignore[attr-defined]
    assert lost >= 2, f"only {lost} answers were lost"
    for ledger in (first, second):
        ledger.api = ledger.api.api  # type: ignore[attr-defined]
        ledger.close()
    assert sum(size for _, size in admitted) <= limit
    records = stored(crd, "lost")
    assert {key for key, _ in admitted} <= set(records), "a granted holder is not stored"
    assert totals(records) <= limit
