"""One tenant's holders: a new Pod's review as the tenant already holds 0 to 6,000 claims.

What a controller creating 1,000 Pods in one namespace feels: each new Pod's claims are
reserved in the SQLite ledger (`dragate serve`'s default), on top of every claim the tenant
already holds. `pipeline.review` of /validate for Pods never seen before (the bench Pod
under a new uid each time), and of one Pod re-admitted unchanged, at each level; the ratio
is each level's new-Pod p50 against the same review with no holder, in the same run. The
tenant's quota is raised out of the way: the figure is the cost, not a refusal.

Beside each review, the same level's grant write as a cluster replica's flusher makes it:
a holder admitted from the process's grant (`webhook.ledger.grants`), then
`KubeLedger.flush` against a stand-in for the API server's side of the one TenantUsage,
which encodes each write's body as JSON, as the client does, and answers it with a new
resourceVersion. That is the CPU a flush holds the webhook's serving loop for, without the
HTTP round trip. It grows with the holders (one string of every holder is written), so its
ratio is against the first level.
"""

from __future__ import annotations

import copy
import itertools
import json
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import workload
from timing import sample, summarize, timed

from webhook import pipeline
from webhook.admission.review import parse_review
from webhook.assembly import offline_context
from webhook.kube.api import KubeApi
from webhook.kube.snapshot import load_state
from webhook.ledger.accounting import Record
from webhook.ledger.grants import GrantBook
from webhook.ledger.kube import KubeLedger
from webhook.ledger.sqlite import SqliteLedger
from webhook.ledger.tenantusage import tenant_usage
from webhook.policy.loading import load_policies
from webhook.types import AdmissionRequest, PolicySet

SEED_BATCH = 500
CLASS = "gpu.nvidia.com"


def unlimited(policies: PolicySet) -> PolicySet:
    """Every tenant's device limits raised far past any level measured here."""
    tenants = tuple(
        replace(t, quota=tuple(replace(q, max_devices=10**9) for q in t.quota))
        for t in policies.tenants
    )
    return replace(policies, tenants=tenants)


def new_pod_requests(count: int, start: int) -> list[AdmissionRequest]:
    """The bench Pod under `count` uids never used: each review reserves new holders."""
    review = workload.admission_review(workload.dra_pod())
    requests = []
    for i in range(start, start + count):
        each = copy.deepcopy(review)
        each["request"]["uid"] = f"holders-{i}"
        each["request"]["object"]["metadata"].update(uid=f"pod-uid-{i}", name=f"pod-{i}")
        requests.append(parse_review(json.dumps(each).encode(), "application/json"))
    return requests


def _seed(ledger: SqliteLedger, tenant: str, holders: int, level: int) -> None:
    """`holders` more one-GPU claims, named for the level so no earlier one is re-admitted."""
    for first in range(0, holders, SEED_BATCH):
        batch = range(first, min(first + SEED_BATCH, holders))
        holds = {f"claim:seed/l{level}-{i}": {CLASS: 1} for i in batch}
        assert ledger.reserve(tenant, holds, {}).granted


def _held(ledger: SqliteLedger, tenant: str) -> int:
    return sum(len(usage.holders) for usage in ledger.usage(tenant).values())


def curve(levels: tuple[int, ...], iterations: int) -> list[dict[str, Any]]:
    """Per level (holders seeded): new-Pod and re-admission summaries and the ratio."""
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        policies = unlimited(load_policies([str(workload.write_policies(Path(tmp, "p")))]))
        state = load_state(str(workload.write_state(Path(tmp, "state.json"))))
        ledger = SqliteLedger(str(Path(tmp, "ledger.sqlite3")))
        context = offline_context(lambda: policies, state, ledger)
        tenant = _tenant(context)
        used = 1  # pod 0 is `_tenant`'s, re-admitted at every level
        for level in levels:
            missing = level - _held(ledger, tenant)
            if missing > 0:
                _seed(ledger, tenant, missing, level)
            rows.append(_measure(context, ledger, tenant, used, iterations))
            used += iterations * 2
        ledger.close()
    base, write_base = rows[0]["new_pod"]["p50_us"], rows[0]["grant_write"]["p50_us"]
    for row in rows:
        row["new_pod_p50_ratio"] = round(row["new_pod"]["p50_us"] / base, 2)
        row["grant_write_p50_ratio"] = round(row["grant_write"]["p50_us"] / write_base, 2)
    return rows


class TenantUsageServer:
    """The API server's side of one tenant's TenantUsage, as far as a flush needs it: the
    object as first read (the seeded holders), and each write's body encoded as the client
    sends it (JSON) and answered with the next resourceVersion."""

    def __init__(self, seeded: dict[str, Any]) -> None:
        self.seeded, self.version = seeded, 1

    def request(self, method: str, path: str, *, body: Any = None, **_: Any) -> dict[str, Any]:
        if method == "GET":
            return self.seeded
        json.dumps(body)
        self.version += 1
        return {"metadata": {"resourceVersion": str(self.version), "uid": "bench"}}


def grant_write(holders: int, iterations: int, warmup: int = 20) -> dict[str, Any]:
    """`KubeLedger.flush` of one holder admitted from the grant, as the tenant holds
    `holders` one-GPU claims (and one more after each write). Writes are a pause apart, as
    the flusher's are (at most two a second per tenant): a write right after another would
    read the object first, which the flusher never has to."""
    limits = {CLASS: 10**9}
    seeded = tenant_usage(
        "bench", {f"claim:seed/c-{i}": Record({CLASS: 1}) for i in range(holders)}, "1"
    )
    seeded["metadata"]["uid"] = "bench"
    book = GrantBook("bench/1-000000")
    ledger = KubeLedger(cast(KubeApi, TenantUsageServer(seeded)), grants=book)
    samples, count, last = [], itertools.count(), 0.0
    for _ in range(warmup + iterations):
        holds = {f"claim:new/c-{next(count)}": {CLASS: 1}}
        if not book.admit("bench", holds, limits):  # the first, and once the grant is used
            book.note("bench", holds, limits)
        time.sleep(0.001 + last)
        last = timed(lambda: ledger.flush("bench"))
        samples.append(last * 1e6)
    return summarize(samples[warmup:])


def _tenant(context: Any) -> str:
    """The bench Pod's tenant, as a review names it (reserving pod 0's holders)."""
    (request,) = new_pod_requests(1, 0)
    verdict = pipeline.review(request, context, mutate=False)
    assert verdict.allowed, verdict.decision.reasons
    return verdict.decision.tenant


def _measure(
    context: Any, ledger: SqliteLedger, tenant: str, start: int, iterations: int
) -> dict[str, Any]:
    holders = _held(ledger, tenant)
    fresh = iter(new_pod_requests(iterations * 2, start))  # the warm-up takes its own
    (again,) = new_pod_requests(1, 0)  # admitted already by `_tenant`
    new_pod = sample(lambda: pipeline.review(next(fresh), context, mutate=False), iterations)
    readmit = sample(lambda: pipeline.review(again, context, mutate=False), iterations)
    return {
        "holders": holders,
        "new_pod": summarize(new_pod),
        "readmitted": summarize(readmit),
        "grant_write": grant_write(holders, iterations),
    }
