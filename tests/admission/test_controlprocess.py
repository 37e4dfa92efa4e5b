"""The controller process's probes: /readyz and /metrics say whether it holds the Lease,
why it could not, and when its reconciler and audit last succeeded (the webhook role shows
none of it)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from webhook.admission import metrics
from webhook.admission.controlprocess import readiness
from webhook.admission.reload import PolicyHolder
from webhook.assembly import ControllerState
from webhook.kube.policystatus import QuotaRow
from webhook.types import PolicySet

NOW = time.time()


def quota_sample(name: str, device_class: str) -> str:
    return f'{name}{{device_class="{device_class}",tenant="team-a"}}'


@pytest.mark.parametrize(
    ("state", "controller", "samples"),
    [
        pytest.param(
            ControllerState(False, None, NOW - 300, "create: 403 Forbidden"),
            {"leading": False, "lastReconcile": None, "leaseFailure": "create: 403 Forbidden"},
            {"dragate_leader": 0.0},
            id="never-leading-never-reconciled",
        ),
        pytest.param(
            ControllerState(True, NOW - 5, NOW - 300, ""),
            {"leading": True, "lastReconcile": NOW - 5, "leaseFailure": ""},
            {"dragate_leader": 1.0, "dragate_reconcile_last_success_timestamp_seconds": NOW - 5},
            id="leading-and-reconciling",
        ),
        pytest.param(
            ControllerState(
                True,
                NOW - 5,
                NOW - 300,
                "",
                last_audit=NOW - 30,
                audit_seconds=1.5,
                quota=(
                    QuotaRow("team-a", "gpu.nvidia.com", 4, 3, 1),
                    QuotaRow("team-a", "mig.nvidia.com", None, 0, 0),
                ),
            ),
            {"leading": True},
            {
                "dragate_audit_last_success_timestamp_seconds": NOW - 30,
                "dragate_audit_duration_seconds": 1.5,
                quota_sample("dragate_tenant_quota_limit_devices", "gpu.nvidia.com"): 4,
                quota_sample("dragate_tenant_used_devices", "gpu.nvidia.com"): 3,
                quota_sample("dragate_tenant_pending_devices", "gpu.nvidia.com"): 1,
                quota_sample("dragate_tenant_used_devices", "mig.nvidia.com"): 0,
            },
            id="leader-exports-audit-and-quota",
        ),
    ],
)
def test_readiness_and_metrics_say_whether_the_controller_leads(
    state: ControllerState, controller: dict[str, Any], samples: dict[str, float]
) -> None:
    """A controller that never gets the Lease stays ready (it is the standby) but says so: no
    reconciler here for N s, and why the Lease could not be held."""
    holder = PolicyHolder([], lambda _paths: PolicySet())
    holder.get()
    waited = time.time() - (state.last_reconcile or state.waiting_since)  # up to now
    ok, body = readiness(holder, [lambda: (True, "caches")], lambda: state)
    assert ok and body["role"] == "controller"
    shown = body["controller"]
    assert {k: shown[k] for k in controller} == controller
    assert round(waited, 3) <= shown["secondsWithoutReconcile"] < waited + 60
    text = metrics.exposition(None, lambda: state)[0].decode()
    found = {
        name: float(value)
        for name, value in (line.split(" ") for line in text.splitlines() if line[:1] != "#")
        if name in samples or name == "dragate_reconcile_seconds_without_success"
    }
    assert {k: found[k] for k in samples} == pytest.approx(samples)
    assert waited <= found["dragate_reconcile_seconds_without_success"] < waited + 60
    limitless = quota_sample("dragate_tenant_quota_limit_devices", "mig.nvidia.com")
    assert limitless not in text  # no quota for the class: no limit to graph against
