"""Background audit: one full pass over the cluster's claims as tenants and claims grow.

Each size runs in a fresh process, so its memory is its own (the leader's worker, Flask
included): growth.py's policies and SnapshotState (N generated tenants, half listed by
namespace, half selected by a namespace label, and M existing ResourceClaims spread evenly
across them), with every tenth tenant's quota lowered below what its claims hold, so a pass
finds failures beside passes. One pass runs as the leader's does (`assembly.audit_pass`, then
`PolicyReportWriter`): a MemoryLedger seeded from the claims (`existing_holds`), every claim
and template judged as a dry-run CREATE of itself (`audit`), and one PolicyReport per
namespace made from the results, one at a time as the writer makes each before writing it
(`report_of`). The figures: seconds per pass and per part, claims judged per second,
results by outcome, reports, and the process's resident memory with the state loaded and at
its peak.

Each size runs in two orders of the claims, each in its own process. `listed`: by namespace
and name, as the API server lists them into a fresh cache, so a tenant's claims come
together. `created`: one claim per tenant in turn, as watch events append claims created
across tenants over time, the order a long-running leader's cache drifts to. The order
decides how often a claim's rule findings are remembered from the tenant's previous claim
(the rules memo keeps the latest few thousand (request, tenant) pairs).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import growth
import workload
from timing import rss_mib

from webhook.assembly import offline_context
from webhook.kube.policyreports import by_namespace, report_of
from webhook.kube.snapshot import SnapshotState
from webhook.ledger.memory import MemoryLedger
from webhook.ledger.usage import existing_holds
from webhook.pipeline.audit import audit
from webhook.policy.loading import load_policies
from webhook.types import Object, PolicySet, QuotaLimit, Tenant

OVER_QUOTA_EVERY = 10
LOWERED_QUOTA = QuotaLimit("gpu.nvidia.com", 4, 8)
"""Below the claims a tenant holds at every size (M / N = 10 one-GPU claims)."""
OUTCOMES = ("fail", "warn", "pass")
ORDERS = ("listed", "created")


def lowered(tenant: Tenant, index: int) -> Tenant:
    """Every OVER_QUOTA_EVERY-th generated tenant with its quota lowered below its usage."""
    if index % OVER_QUOTA_EVERY:
        return tenant
    return replace(tenant, quota=(LOWERED_QUOTA,))


def audited_policies(base: PolicySet, tenants: int) -> PolicySet:
    grown = growth.grown_policies(base, tenants).tenants
    generated = [lowered(t, i) for i, t in enumerate(grown[:tenants])]
    return replace(base, tenants=(*generated, *grown[tenants:]))


def audited_objects(state: SnapshotState, order: str) -> list[Object]:
    """What the leader's pass reads, in its cache's order: the claims and templates (the
    state holds no Pods). growth.grown_state makes the claims in `created` order."""
    claims = list(state.claims())
    if order == "listed":
        claims.sort(key=lambda c: (c["metadata"]["namespace"], c["metadata"]["name"]))
    templates = [state.template(workload.NAMESPACE, name) for name in ("gpu-1", "gpu-2")]
    return [*claims, *(t for t in templates if t is not None)]


def one_pass(policies: PolicySet, state: SnapshotState, objects: list[Object]) -> dict[str, Any]:
    """Seconds of each part of one pass over `objects`, and what it found."""
    context = offline_context(lambda: policies, state, MemoryLedger())
    started = time.perf_counter()
    truth = MemoryLedger(existing_holds(policies, state))
    seeded = time.perf_counter()
    judged = replace(context, policies=lambda: policies, ledger=truth)
    results = list(audit(objects, judged))
    audited = time.perf_counter()
    grouped, seconds = by_namespace(results), int(time.time())
    for namespace, found in grouped.items():  # each made, then dropped, as the writer does
        report_of(namespace, found, seconds)
    done = time.perf_counter()
    return {
        "pass_s": round(done - started, 3),
        "seed_s": round(seeded - started, 3),
        "audit_s": round(audited - seeded, 3),
        "reports_s": round(done - audited, 3),
        "results": len(results),
        **{outcome: sum(1 for r in results if r.result == outcome) for outcome in OUTCOMES},
        "reports": len(grouped),
    }


def measure(tenants: int, claims: int, order: str) -> dict[str, Any]:
    from webhook.admission.app import settle_collector  # a worker's modules, for its memory

    with tempfile.TemporaryDirectory() as tmp:
        base = load_policies([str(workload.write_policies(Path(tmp, "policies")))])
    policies = audited_policies(base, tenants)
    state = growth.grown_state(tenants, claims)
    settle_collector()  # as the leader's worker does once its caches are listed
    loaded = rss_mib()["rss_mib"]
    objects = audited_objects(state, order)
    row: dict[str, Any] = {"tenants": tenants, "claims": claims, "order": order}
    row.update(one_pass(policies, state, objects))
    row["claims_per_s"] = round(len(state.claims()) / row["pass_s"])
    return {**row, "state_rss_mib": loaded, "peak_rss_mib": rss_mib()["peak_rss_mib"]}


def curve(sizes: tuple[tuple[int, int], ...]) -> list[dict[str, Any]]:
    """Per (tenants, claims) and order: one pass in a fresh process."""
    return [_one_process(t, c, order) for t, c in sizes for order in ORDERS]


def _one_process(tenants: int, claims: int, order: str) -> dict[str, Any]:
    command = [sys.executable, __file__, "--tenants", str(tenants), "--claims", str(claims)]
    command += ["--order", order]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tenants", type=int, required=True)
    parser.add_argument("--claims", type=int, required=True)
    parser.add_argument("--order", choices=ORDERS, default="listed")
    args = parser.parse_args()
    print(json.dumps(measure(args.tenants, args.claims, args.order)))


if __name__ == "__main__":
    main()
