"""Binding conditions (KEP-5007): why an allocated claim's Pod is still not bound.

kube-scheduler allocates a device with `bindingConditions`, reserves the claim for the Pod
and holds the Pod at PreBind until the driver reports every condition True in the claim's
`status.devices`; a `bindingFailureConditions` entry reported True makes it give up the
attempt, deallocate the claim and allocate again. The allocation result carries the
device's conditions; a result without them falls back to the published device's.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from webhook.cli.whyfindings import Finding, identity
from webhook.engine.devices import Device
from webhook.engine.occupancy import DeviceKey
from webhook.types import Object

HELD = ("kube-scheduler holds the Pod at PreBind until the driver reports them in the "
        "claim's status.devices")  # fmt: skip
RETRIED = "kube-scheduler deallocates the claim and allocates it again"


def binding_findings(claim: Object, devices: Mapping[DeviceKey, Device]) -> Iterator[Finding]:
    """Per allocated device: a binding failure reported, else the binding conditions not
    True yet; nothing for a device whose conditions all hold (or that has none)."""
    namespace, name = identity(claim)
    status = claim.get("status") or {}
    reported = _reported(status.get("devices") or [])
    for result in ((status.get("allocation") or {}).get("devices") or {}).get("results") or []:
        key = (str(result.get("driver")), f"{result.get('pool')}/{result.get('device')}")
        true = reported.get(key, set())
        failed = [c for c in result.get("bindingFailureConditions") or [] if c in true]
        pending = [c for c in _conditions(result, devices.get(key)) if c not in true]
        text = _text(failed, pending)
        if text:
            yield Finding("binding", f"ResourceClaim {namespace}/{name}", f"{'/'.join(key)}: "
                          f"{text}", blocking=True)  # fmt: skip


def _text(failed: list[str], pending: list[str]) -> str:
    if failed:
        return f"binding failed ({', '.join(failed)} True): {RETRIED}"
    if pending:
        return f"binding conditions not True yet: {', '.join(pending)}; {HELD}"
    return ""


def _conditions(result: Mapping[str, Any], device: Device | None) -> list[str]:
    found = result.get("bindingConditions")
    if found is None and device is not None:
        return list(device.binding_conditions)
    return [str(c) for c in found or []]


def _reported(entries: list[Mapping[str, Any]]) -> dict[DeviceKey, set[str]]:
    """The conditions the driver reports True, per device of `status.devices`."""
    return {
        (str(e.get("driver")), f"{e.get('pool')}/{e.get('device')}"): {
            str(c.get("type")) for c in e.get("conditions") or [] if c.get("status") == "True"
        }
        for e in entries
    }
