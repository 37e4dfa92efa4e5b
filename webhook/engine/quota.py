"""Tenant quota: devices per claim, and devices held by all the tenant's claims together.

The numbers in a denial are the ones a person needs to act: what the tenant already holds,
its limit, what this object asks for, and which claims hold the quota (largest first), a
Pod's by its `namespace/name` when the ledger knows it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from webhook.engine.counting import holder_shown
from webhook.types import Action, ClassUsage, Reason, Tenant

HOLDERS_SHOWN = 5
NO_USAGE = ClassUsage()


def per_claim_reasons(tenant: Tenant, claim: str, charges: Mapping[str, int]) -> Iterator[Reason]:
    """Reasons a single claim exceeds `maxDevicesPerClaim`."""
    for device_class, devices in sorted(charges.items()):
        limit = tenant.limit_for(device_class)
        if limit is None or limit.max_devices_per_claim is None:
            continue
        if devices > limit.max_devices_per_claim:
            yield Reason(
                policy=f"Tenant/{tenant.name}",
                message=f"{claim} asks for {devices} {device_class} devices; tenant "
                f"{tenant.name!r} allows at most {limit.max_devices_per_claim} per claim",
                tenant=tenant.name,
                device_class=device_class,
                limit=limit.max_devices_per_claim,
                requested=devices,
                rule="maxDevicesPerClaim",
            )


def total_reasons(
    tenant: Tenant,
    charges: Mapping[str, int],
    usage: Mapping[str, ClassUsage],
    replaced: Mapping[str, int] | None = None,
    own: frozenset[str] = frozenset(),
) -> Iterator[Reason]:
    """Reasons the tenant's total would pass `maxDevices` for some class.

    `replaced` is what the same holders already hold (a re-admitted object), which the new
    charges replace rather than add to; `own`, those holders, which a denial does not name
    among what holds the quota.
    """
    for device_class, devices in sorted(charges.items()):
        limit = tenant.limit_for(device_class)
        if limit is None or limit.max_devices is None:
            continue
        class_usage = usage.get(device_class, NO_USAGE)
        used = class_usage.used - (replaced or {}).get(device_class, 0)
        if used + devices > limit.max_devices:
            yield _over_limit(
                tenant,
                device_class,
                used=used,
                limit=limit.max_devices,
                requested=devices,
                usage=class_usage,
                own=own,
            )


def _over_limit(
    tenant: Tenant,
    device_class: str,
    *,
    used: int,
    limit: int,
    requested: int,
    usage: ClassUsage,
    own: frozenset[str] = frozenset(),
) -> Reason:
    others = [h for h in usage.holders if h.key not in own]
    holders = tuple(
        f"{holder_shown(h.key, h.name)} ({h.devices})"
        for h in sorted(others, key=lambda h: (-h.devices, h.key))[:HOLDERS_SHOWN]
    )
    more = len(others) - len(holders)
    held_by = ", ".join(holders) + (f" and {more} more" if more > 0 else "")
    return Reason(
        policy=f"Tenant/{tenant.name}",
        message=f"tenant {tenant.name!r} quota for {device_class} exceeded: used {used} + "
        f"requested {requested} > limit {limit}" + (f"; held by {held_by}" if held_by else ""),
        tenant=tenant.name,
        device_class=device_class,
        used=used,
        limit=limit,
        requested=requested,
        holders=holders,
        rule="quota",
    )


def limits_of(tenant: Tenant) -> dict[str, int]:
    """Per class, the `maxDevices` the ledger must refuse to pass (atomically).

    None for a tenant in Warn or Audit: its objects are admitted over the limit and their
    devices recorded all the same (usage says what is really held); the engine judges the
    limit against the usage read before the reservation and warns or audits. This is the one
    place the mode reaches the ledger, which knows limits only, never modes.
    """
    if tenant.enforcement != Action.DENY:
        return {}
    return {q.device_class: q.max_devices for q in tenant.quota if q.max_devices is not None}
