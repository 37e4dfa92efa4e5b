"""The apiserver benchmark's audit load: TENANTS Tenants and CLAIMS ResourceClaims spread
over them, in the cluster before dragate starts, so the controller role audits them while
the creates are measured.

The Tenants are a policy file in the policy directory both roles read (the chart's default
`policies.source: files`): the audit walks the served policy set's tenants, whichever source
they come from, and the file costs the API server nothing. Each tenant owns one namespace
(`audit-<n>`, not labelled for any variant, so no admission of the bench is called on its
claims); claim j is tenant j mod TENANTS's, one GPU, never allocated (no scheduler runs).
Every OVER_QUOTA_EVERY-th tenant's quota is below what its claims hold, so a pass finds
failures beside passes, as the audit section's does.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from apiserver_objects import CLASS, claim, path

NAMESPACE_PREFIX = "audit-"
OVER_QUOTA_EVERY = 10
POPULATE_CONNECTIONS = 8
FILE_NAME = "audit-tenants.yaml"


@dataclass(frozen=True)
class AuditLoad:
    """How many Tenants and ResourceClaims the cluster holds before measuring."""

    tenants: int
    claims: int

    @property
    def empty(self) -> bool:
        return self.tenants == 0


def parse_audit_load(text: str) -> AuditLoad:
    """`TENANTS,CLAIMS` (`0,0` or `none`: no audit load); claims need a tenant to belong to."""
    if text.strip().lower() == "none":
        return AuditLoad(0, 0)
    parts = [p.strip().replace("_", "") for p in text.split(",")]
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        raise ValueError(f"--audit-load is TENANTS,CLAIMS (two whole numbers), not {text!r}")
    tenants, claims = int(parts[0]), int(parts[1])
    if claims and not tenants:
        raise ValueError(f"--audit-load {text!r}: claims need at least one tenant")
    return AuditLoad(tenants, claims)


def namespace_of(index: int) -> str:
    return f"{NAMESPACE_PREFIX}{index:05d}"


def tenant(index: int, claims: int) -> dict[str, Any]:
    """Tenant `index`: its namespace, the bench's class, a quota its claims fit (or, every
    OVER_QUOTA_EVERY-th, one they break)."""
    broken = index % OVER_QUOTA_EVERY == 0 and claims > 1
    limit = claims // 2 if broken else claims + 100
    ns = namespace_of(index)
    return {
        "apiVersion": "dragate.io/v1alpha1",
        "kind": "Tenant",
        "metadata": {"name": ns},
        "spec": {
            "namespaces": [ns],
            "allowedDeviceClasses": [CLASS],
            "quota": [{"deviceClassName": CLASS, "maxDevices": limit, "maxDevicesPerClaim": 8}],
        },
    }


def claims_of(load: AuditLoad, index: int) -> int:
    """How many claims tenant `index` holds (claim j goes to tenant j mod tenants)."""
    return load.claims // load.tenants + (index < load.claims % load.tenants)


def write_tenants(directory: Path, load: AuditLoad) -> Path | None:
    """The load's Tenants as one policy file in `directory` (None for no load)."""
    if load.empty:
        return None
    documents = (json.dumps(tenant(i, claims_of(load, i))) for i in range(load.tenants))
    target = directory / FILE_NAME
    target.write_text("\n---\n".join(documents) + "\n")
    return target


def creates(load: AuditLoad) -> tuple[list[tuple[str, dict[str, Any]]], list[tuple[str, Any]]]:
    """(namespaces, claims) to create, as (URL, object): every namespace before any claim."""
    namespaces = [
        ("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                "metadata": {"name": namespace_of(i)}})
        for i in range(load.tenants)
    ]  # fmt: skip
    claims = [
        (path("claim", namespace_of(j % load.tenants)), claim(f"held-{j:06d}"))
        for j in range(load.claims)
    ]
    return namespaces, claims


def populate(connect: Callable[[], Any], load: AuditLoad) -> dict[str, Any]:
    """Every namespace, then every claim, over POPULATE_CONNECTIONS keep-alive connections;
    what was created and how long it took."""
    namespaces, claims = creates(load)
    started = time.perf_counter()
    made = _bulk(connect, namespaces) + _bulk(connect, claims)
    seconds = time.perf_counter() - started
    return {
        "tenants": load.tenants,
        "claims": load.claims,
        "created": made,
        "populate_s": round(seconds, 1),
        "creates_per_s": round(made / seconds, 1) if seconds else 0.0,
    }


def _bulk(connect: Callable[[], Any], items: list[tuple[str, Any]]) -> int:
    """Create `items` over several connections; an existing object (409) counts as made."""
    lock, made, failures = threading.Lock(), [0], list[str]()

    def work(share: Iterator[tuple[str, Any]]) -> None:
        client, own = connect(), 0
        try:
            for url, obj in share:
                status, body = client.create(url, obj)
                if status in (201, 409):
                    own += 1
                elif not failures:
                    failures.append(f"{url}: {status} {str(body)[:300]}")
        finally:
            client.close()
        with lock:
            made[0] += own

    workers = min(POPULATE_CONNECTIONS, max(1, len(items)))
    threads = [
        threading.Thread(target=work, args=(iter(items[w::workers]),)) for w in range(workers)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise RuntimeError(f"populating the audit load failed: {failures[0]}")
    return made[0]
