"""KubeLedger starts no thread of its own: its grant loops are the composer's to start
(`webhook.assembly`), and until they run it admits nothing from a grant (against an
unreachable API server). What every write stores beside the holders, their totals, is
checked against a stand-in for the API server's compare-and-swap; the stored side against a
real API server is tests/e2e/test_kube_ledger*.py."""

from __future__ import annotations

import copy
import random
import threading
from pathlib import Path
from typing import Any, cast

import pytest
from ledger_contract import nonzero

from webhook.kube.api import ApiError, KubeApi
from webhook.ledger import accounting
from webhook.ledger.accounting import Records
from webhook.ledger.batch import Change
from webhook.ledger.grants import GrantBook
from webhook.ledger.kube import KubeLedger
from webhook.ledger.tenantusage import TOTALS_KEY, records_of, tenant_usage
from webhook.types import FactsUnavailable, Reservation

GPU = "gpu.nvidia.com"
KUBECONFIG = """
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""


def unreachable(tmp_path: Path) -> KubeApi:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    return KubeApi.from_kubeconfig(str(kubeconfig))


@pytest.mark.parametrize("grants", [True, False], ids=["quota-grants", "no-quota-grants"])
def test_a_reservation_starts_no_thread(tmp_path: Path, grants: bool) -> None:
    """The first reservation writes (here: fails to), whether or not the ledger has grants:
    with grants, no loop was started that would write what a grant admitted."""
    before = set(threading.enumerate())
    book = GrantBook("replica-a/1") if grants else None
    ledger = KubeLedger(unreachable(tmp_path), budget=0.3, grants=book)
    with pytest.raises(FactsUnavailable):
        ledger.reserve("team-a", {"claim:team-a/c": {GPU: 1}}, {GPU: 4})
    assert {t.name for t in set(threading.enumerate()) - before} == set()
    assert (ledger.loops is not None) is grants
    assert ledger.loops is None or not ledger.loops.running()


def test_grant_loops_run_from_start_to_stop(tmp_path: Path) -> None:
    ledger = KubeLedger(unreachable(tmp_path), grants=GrantBook("replica-a/1"))
    assert ledger.loops is not None
    ledger.loops.start()
    try:
        names = {t.name for t in threading.enumerate()}
        assert {"ledger-flusher", "ledger-wants"} <= names
        assert ledger.loops.running()
    finally:
        ledger.close(timeout=1.0)
    alive = {t.name for t in threading.enumerate() if t.is_alive()}
    assert not {"ledger-flusher", "ledger-wants"} & alive


class TenantUsageStore:
    """The API server's side of TenantUsages as far as the ledger uses it: objects by name,
    compare-and-swap on resourceVersion (409 on a stale write, 404 for none), and another
    replica's writes between ours (`interfere`)."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.version = 0

    def request(self, method: str, path: str, *, body: Any = None, **_: Any) -> dict[str, Any]:
        name = path.rsplit("/", 1)[1]
        if method == "GET":
            if name not in self.objects:
                raise ApiError(404, "not found")
            return copy.deepcopy(self.objects[name])
        name = body["metadata"]["name"]
        known = self.objects.get(name)
        if (known or {}).get("metadata", {}).get("resourceVersion") != body["metadata"].get(
            "resourceVersion"
        ):
            raise ApiError(409, "conflict")
        return self._store(copy.deepcopy(body))

    def _store(self, body: dict[str, Any]) -> dict[str, Any]:
        self.version += 1
        body["metadata"]["resourceVersion"] = str(self.version)
        body["metadata"].setdefault("uid", "uid-1")
        self.objects[body["metadata"]["name"]] = body
        return copy.deepcopy(body)

    def interfere(self, tenant: str, rng: random.Random) -> None:
        """Another replica's write: one stored claim holder lowered or dropped."""
        stored = self.objects.get(tenant)
        if stored is None:
            return
        records = records_of(stored)
        claims = sorted(k for k in records if k.startswith("claim:"))
        if claims:
            victim = rng.choice(claims)
            if rng.random() < 0.5:
                del records[victim]
            else:
                records[victim] = accounting.Record({GPU: 0})
        rv = stored["metadata"]["resourceVersion"]
        self._store(tenant_usage(tenant, records, rv))


@pytest.mark.parametrize("seed", range(3), ids=[f"seed-{s}" for s in range(3)])
def test_every_write_stores_the_totals_of_the_holders_it_stores(seed: int) -> None:
    """The totals a grant write stores (the holder older replicas read) and sizes the next
    grant from are kept from write to write, never recounted: after admissions from the
    grant, admissions decided by a write, releases, other replicas' writes (conflicts,
    re-reads) and ended grant leases, the stored totals are always the recount of the
    stored holders, and never above the limit."""
    rng, now = random.Random(seed), [1_000_000.0]
    store, limit = TenantUsageStore(), 12
    book = GrantBook("replica-a/1", clock=lambda: now[0])
    ledger = KubeLedger(cast(KubeApi, store), grants=book, clock=lambda: now[0])
    for step in range(300):
        holder = f"claim:team-a/c-{rng.randrange(40)}"
        action = rng.random()
        if action < 0.4:
            if not book.admit("team-a", {holder: {GPU: 1}}, {GPU: limit}):
                book.note("team-a", {holder: {GPU: 1}}, {GPU: limit})
            ledger.flush("team-a")
        elif action < 0.7:
            ledger.update("team-a", _reserving(holder, limit, now[0]), ledger.budget)
        elif action < 0.8:
            ledger.release("team-a", holder)
        elif action < 0.9:
            store.interfere("team-a", rng)
        else:
            now[0] += rng.choice([1.0, 30.0, 70.0])  # a grant's lease may end
        stored = store.objects.get("team-a")
        if stored is None:
            continue
        kept = stored["spec"]["holders"][TOTALS_KEY]["devices"]
        counted = accounting.totals(records_of(stored))
        assert nonzero(kept) == nonzero(counted), f"step {step}"
        assert counted.get(GPU, 0) <= limit


def _reserving(holder: str, limit: int, now: float) -> Change[Reservation]:
    def change(records: Records) -> tuple[Records, Reservation]:
        outcome = accounting.reserve(records, {holder: {GPU: 1}}, {GPU: limit}, now=now)
        return outcome.records, Reservation(outcome.granted)

    return change
