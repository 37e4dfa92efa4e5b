"""KubeLedger and the Reconciler against the real kube-apiserver and the TenantUsage CRD."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from ledger_contract import CONTRACT, EXPIRY_CONTRACT, GPU, MakeTimedLedger

from webhook.kube.caches import KubeState
from webhook.kube.informer import Informer, Resource
from webhook.ledger import recordtext, wants
from webhook.ledger.accounting import PENDING_SECONDS
from webhook.ledger.kube import KubeLedger
from webhook.ledger.memory import MemoryLedger
from webhook.ledger.reconciler import Reconcilable, Reconciler, claims_truth
from webhook.ledger.tenantusage import COLLECTION, TOTALS_KEY, object_name, records_of
from webhook.ledger.wantwatch import WANTED
from webhook.policy.loading import parse_policies

from .cluster import Cluster
from .ledger_support import race, stored
from .processes import wait_for

pytestmark = pytest.mark.e2e

HOARDER = textwrap.dedent(
    """
    import itertools, sys
    from webhook.ledger.kube import KubeLedger
    ledger = KubeLedger.from_kubeconfig(sys.argv[1], pending_seconds=2.0)
    for n in itertools.count():
        ledger.reserve("crash", {f"claim:crash/c{n % 50}": {"gpu.nvidia.com": 1}}, {})
        print(n, flush=True)
    """
)


@pytest.mark.parametrize("case", CONTRACT, ids=[c.__name__ for c in CONTRACT])
def test_contract(case: Callable[[Callable[[], KubeLedger]], None], fresh: Any) -> None:
    case(fresh)


@pytest.mark.parametrize("case", EXPIRY_CONTRACT, ids=[c.__name__ for c in EXPIRY_CONTRACT])
def test_expiry_contract(case: Callable[[MakeTimedLedger], None], fresh: Any) -> None:
    case(lambda clock: fresh(clock=clock))


def test_racing_replicas_never_overcommit(crd: Cluster, fresh: Any) -> None:
    """2 processes (replicas) x 8 threads race for one tenant's 5 GPUs: they meet only at
    the API server, and exactly 5 are granted."""
    fresh()
    quota, threads = 5, 8
    answers = race(crd, "racers", quota, processes=2, threads=threads)
    assert sum(a["answered"] for a in answers) == 2 * threads
    assert sum(len(a["granted"]) for a in answers) == quota
    holders = stored(crd, "racers")
    assert len(holders) == quota
    assert sum(h["devices"][GPU] for h in holders.values()) == quota


def test_killed_process_leaks_nothing_after_the_pending_bound(crd: Cluster, fresh: Any) -> None:
    ledger = fresh(drop_grace=0.0)
    hoarder = subprocess.Popen(
        [sys.executable, "-c", HOARDER, str(crd.kubeconfig)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert hoarder.stdout is not None
        written = [hoarder.stdout.readline() for _ in range(20)]  # then kill it mid-write
        assert all(written), "the hoarder died on its own"
    finally:
        os.kill(hoarder.pid, signal.SIGKILL)
        hoarder.wait()
    assert ledger.usage("crash")[GPU].used > 0
    ledger.reconcile({})  # within the bound: pending holders stay
    assert ledger.usage("crash")[GPU].used > 0

    def reconciled_away() -> bool:
        ledger.reconcile({})
        return ledger.usage("crash") == {}

    wait_for(reconciled_away, timeout=10, what="the pending holders dropped after their bound")
    assert stored(crd, "crash") == {}


POLICIES = """
apiVersion: dragate.io/v1alpha1
kind: Tenant
metadata: {name: recon}
spec:
  namespaces: [recon]
  quota: [{deviceClassName: gpu.nvidia.com, maxDevices: 8}]
"""


def claim_manifest(name: str, count: int) -> str:
    request = {"name": "gpu", "exactly": {"deviceClassName": GPU, "count": count}}
    return json.dumps(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "recon"},
            "spec": {"devices": {"requests": [request]}},
        }
    )


@pytest.fixture(scope="module")
def live_state(crd: Cluster) -> Iterator[KubeState]:
    state = KubeState.from_kubeconfig(str(crd.kubeconfig)).start()
    assert state.wait_synced(20)
    crd.kubectl("create", "namespace", "recon")
    yield state
    state.stop(timeout=0)


class Clock:
    """Wall time, shifted by the test to pass the pending bound without waiting for it."""

    def __init__(self) -> None:
        self.shift = 0.0

    def __call__(self) -> float:
        return time.time() + self.shift


@pytest.mark.parametrize("kind", ["kube", "memory"])
def test_reconciler_confirms_and_drops_holders(
    crd: Cluster, fresh: Any, live_state: KubeState, kind: str
) -> None:
    """Pending -> confirmed when the claim appears; gone with the claim; unseen -> released."""
    clock = Clock()
    ledger: Any = (
        fresh(drop_grace=0.0, clock=clock) if kind == "kube" else MemoryLedger(clock=clock)
    )
    name = f"held-{kind}"
    reconciler = Reconciler(
        ledger, claims_truth(lambda: parse_policies(POLICIES), live_state), clock=clock
    )
    holds = {f"claim:recon/{name}": {GPU: 2}, f"claim:recon/ghost-{kind}": {GPU: 1}}
    assert ledger.reserve("recon", holds, {GPU: 8}).granted
    crd.apply(claim_manifest(name, 3))
    wait_for(lambda: _has_claim(live_state, name), timeout=10, what="claim in cache")
    assert reconciler.run_once()
    assert _holders(ledger) == {f"claim:recon/{name}": 3, f"claim:recon/ghost-{kind}": 1}
    crd.kubectl("delete", "resourceclaim", "-n", "recon", name, "--wait=true")
    wait_for(lambda: not _has_claim(live_state, name), timeout=10, what="claim gone")
    assert reconciler.run_once()
    assert _holders(ledger) == {f"claim:recon/ghost-{kind}": 1}  # pending, within its bound
    clock.shift += PENDING_SECONDS + 1
    assert reconciler.run_once()
    assert _holders(ledger) == {}


def test_a_claim_deleted_before_it_was_confirmed_frees_its_quota_within_seconds(
    crd: Cluster, fresh: Any, live_state: KubeState
) -> None:
    """The claim informer's deletion names the holder and pokes the reconciler, whose next
    pass drops it; a pending holder whose claim is not created yet stays. (`live_state`
    made the namespace.)"""
    ledger = fresh(drop_grace=0.0)
    loops: list[Reconciler] = []

    def claim_event(kind: str, claim: Any) -> None:
        if kind == "DELETED":
            loops[0].claim_deleted(claim)

    state = KubeState.from_kubeconfig(str(crd.kubeconfig), claim_listener=claim_event)
    truth = claims_truth(lambda: parse_policies(POLICIES), state)
    loops.append(Reconciler(ledger, truth, interval=600.0))
    holds = {"claim:recon/brief": {GPU: 2}, "claim:recon/coming": {GPU: 2}}
    assert ledger.reserve("recon", holds, {GPU: 8}).granted
    state.start()
    try:
        assert state.wait_synced(20)
        loops[0].start()
        wait_for(lambda: loops[0].runs == 1, timeout=10, what="the first pass")
        assert _holders(ledger) == {"claim:recon/brief": 2, "claim:recon/coming": 2}
        crd.apply(claim_manifest("brief", 2))
        wait_for(lambda: _has_claim(state, "brief"), timeout=10, what="claim in cache")
        crd.kubectl("delete", "resourceclaim", "-n", "recon", "brief", "--wait=true")
        wait_for(
            lambda: _holders(ledger) == {"claim:recon/coming": 2},
            timeout=5, what="the deleted claim's holder released",
        )  # fmt: skip
        assert loops[0].runs == 2
    finally:
        loops[0].stop()
        state.stop(timeout=0)


def test_reconcile_names_a_pods_holder_and_keeps_the_name_it_has(fresh: Any) -> None:
    ledger = fresh()
    named = {"pod:uid-a/gpu": "recon/stored"}
    assert ledger.reserve("names", {"pod:uid-a/gpu": {GPU: 1}}, {}, names=named).granted
    truth = {"names": {"pod:uid-a/gpu": {GPU: 1}, "pod:uid-b/gpu": {GPU: 2}}}
    ledger.reconcile(truth, {"pod:uid-a/gpu": "recon/other", "pod:uid-b/gpu": "recon/b"})
    shown = {h.key: h.name for h in ledger.usage("names")[GPU].holders}
    assert shown == {"pod:uid-a/gpu": "recon/stored", "pod:uid-b/gpu": "recon/b"}


def test_reconciler_skips_while_facts_are_unavailable(fresh: Any) -> None:
    ledger = fresh()
    ledger.reserve("t", {"claim:a/x": {GPU: 1}}, {})
    never_synced = KubeState(ledger.api)  # not started: every lookup raises
    reconciler = Reconciler(ledger, claims_truth(lambda: parse_policies(POLICIES), never_synced))
    assert not reconciler.run_once()
    assert "not synced" in reconciler.last_error
    assert ledger.usage("t")[GPU].used == 1


def test_reconciler_thread_runs_at_start_and_when_poked(fresh: Any) -> None:
    ledger = fresh()
    reconciler = Reconciler(ledger, dict, interval=60)
    reconciler.start()
    try:
        wait_for(lambda: reconciler.runs == 1, timeout=5, what="first pass")
        reconciler.poke()
        wait_for(lambda: reconciler.runs == 2, timeout=5, what="poked pass")
    finally:
        reconciler.stop()


def test_informer_relists_after_410_gone(crd: Cluster, fresh: Any) -> None:
    """TenantUsage's watch cache began after the CRD was made: resourceVersion 1 is Gone."""
    api = fresh().api
    KubeLedger(api).reserve("before-gone", {"claim:g/x": {GPU: 1}}, {})
    informer = Informer(api, Resource("TenantUsage", COLLECTION))
    stop = threading.Event()
    thread = threading.Thread(target=informer.run, args=(stop,), daemon=True)
    thread.start()
    try:
        assert informer.synced.wait(10)
        wait_for(lambda: informer._stream is not None, timeout=5, what="watching")
        informer.restart_watch(from_version="1")
        wait_for(lambda: informer.relists >= 2, timeout=10, what="relist after 410 Gone")
        KubeLedger(api).reserve("after-gone", {"claim:g/x": {GPU: 1}}, {})
        wait_for(lambda: informer.get("", "after-gone") is not None, timeout=10, what="watched")
    finally:
        stop.set()
        informer.restart_watch()


def test_the_wanted_tenant_usages_alone_are_listed_and_watched(crd: Cluster, fresh: Any) -> None:
    """The wanted label: set by a write while a live want is among the records, dropped by
    the write that drops the want; a watch with the selector sees the object arrive and
    leave, and never sees the others."""
    ledger = fresh()
    ledger.reserve("quiet", {"claim:q/x": {GPU: 1}}, {})
    informer = Informer(ledger.api, WANTED)
    stop = threading.Event()
    thread = threading.Thread(target=informer.run, args=(stop,), daemon=True)
    thread.start()

    def want(records: Any) -> tuple[Any, None]:
        return wants.with_want(records, "b/2-bbb", time.time()), None

    def unwant(records: Any) -> tuple[Any, None]:
        return {k: r for k, r in records.items() if not k.startswith(wants.WANT_PREFIX)}, None

    try:
        assert informer.synced.wait(10)
        ledger.update("asked", want, 5.0)
        wait_for(lambda: informer.get("", "asked") is not None, timeout=10, what="wanted")
        assert informer.get("", "quiet") is None
        ledger.update("asked", unwant, 5.0)
        wait_for(lambda: informer.get("", "asked") is None, timeout=10, what="no longer wanted")
        ledger.update("quiet", want, 5.0)
        wait_for(lambda: informer.get("", "quiet") is not None, timeout=10, what="wanted")
    finally:
        stop.set()
        informer.restart_watch()


def _has_claim(state: KubeState, name: str) -> bool:
    return any(c["metadata"]["name"] == name for c in state.claims_in("recon"))


def _holders(ledger: Reconcilable) -> dict[str, int]:
    usage = ledger.usage("recon")  # type: ignore[attr-defined]
    return {h.key: h.devices for cls in usage.values() for h in cls.holders}


def test_an_object_in_the_format_before_is_read_and_migrated_by_the_next_write(
    crd: Cluster, fresh: Any
) -> None:
    """A TenantUsage written before `spec.records` (holders as a map) still counts."""
    ledger = fresh()
    old = {"claim:old/x": {"devices": {GPU: 2}, "expiresAt": time.time() + 60}}
    ledger.api.request("POST", COLLECTION, body=_old_replica_object("mig", old))
    assert ledger.reserve("mig", {"claim:new/y": {GPU: 1}}, {GPU: 3}).granted
    assert not ledger.reserve("mig", {"claim:new/z": {GPU: 1}}, {GPU: 3}).granted
    obj = ledger.api.request("GET", f"{COLLECTION}/{object_name('mig')}")
    assert obj["spec"]["holders"] == {TOTALS_KEY: {"devices": {GPU: 3}}}
    assert sorted(records_of(obj)) == ["claim:new/y", "claim:old/x"]


def test_an_older_replica_writing_over_the_records_keeps_within_the_quota(
    crd: Cluster, fresh: Any
) -> None:
    """During a rolling upgrade an older replica reads only `spec.holders`: the totals there
    keep it within the quota, and what it writes (dropping `records`) still counts after."""
    ledger = fresh()
    assert ledger.reserve("mixed", {"claim:new/a": {GPU: 2}}, {GPU: 4}).granted
    path = f"{COLLECTION}/{object_name('mixed')}"
    seen = ledger.api.request("GET", path)
    holders = dict(seen["spec"]["holders"])  # all an older replica sees: the totals
    assert sum(h["devices"][GPU] for h in holders.values()) == 2
    holders["claim:old/b"] = {"devices": {GPU: 1}, "expiresAt": time.time() + 60}
    body = _old_replica_object("mixed", holders, seen["metadata"]["resourceVersion"])
    ledger.api.request("PUT", path, body=body)
    assert ledger.reserve("mixed", {"claim:new/c": {GPU: 1}}, {GPU: 4}).granted
    assert not ledger.reserve("mixed", {"claim:new/d": {GPU: 1}}, {GPU: 4}).granted
    assert ledger.usage("mixed")[GPU].used == 4


def _old_replica_object(
    tenant: str, holders: dict[str, Any], resource_version: str | None = None
) -> dict[str, Any]:
    """A TenantUsage as a replica before `spec.records` wrote it: the holders map only."""
    metadata: dict[str, Any] = {"name": object_name(tenant)}
    if resource_version:
        metadata["resourceVersion"] = resource_version
    return {"apiVersion": "dragate.io/v1alpha1", "kind": "TenantUsage", "metadata": metadata,
            "spec": {"tenant": tenant, "holders": holders}}  # fmt: skip


def test_records_past_the_object_limit_are_refused_and_other_tenants_still_reconciled(
    crd: Cluster, fresh: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tenant whose holders no longer fit in one TenantUsage fails closed with a clear
    message, writes nothing, and does not stop the reconciler for the other tenants."""
    ledger = fresh()
    assert ledger.reserve("big", {"claim:big/a": {GPU: 1}}, {}).granted
    monkeypatch.setattr(recordtext, "MAX_BYTES", len(f"claim:big/a {GPU}=1 1.0\n") + 4)
    with pytest.raises(recordtext.Unstorable, match=r"'big': 2 holders need .* split the tenant"):
        ledger.reserve("big", {"claim:big/b": {GPU: 1}}, {})
    assert sorted(stored(crd, "big")) == ["claim:big/a"]
    truth = {"big": {"claim:big/a": {GPU: 1}, "claim:big/c": {GPU: 1}},
             "small": {"claim:small/x": {GPU: 2}}}  # fmt: skip
    with pytest.raises(recordtext.Unstorable):
        ledger.reconcile(truth)
    assert {h.key for h in ledger.usage("small")[GPU].holders} == {"claim:small/x"}
