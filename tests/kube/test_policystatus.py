"""Policy objects' Ready condition: written from the set served, for the generation it judged,
only when it differs, keeping the transition time while the status stays the same."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import pytest

from webhook.kube.api import ApiError, KubeApi
from webhook.kube.policystatus import PolicyStatusWriter, QuotaRow, status_patch, usage_status
from webhook.kube.policywatch import PolicyObjects
from webhook.types import (
    ClassUsage,
    FactsUnavailable,
    ObjectVerdict,
    PolicySet,
    QuotaLimit,
    Tenant,
)

NOW = "2026-12-04T10:00:00Z"
EARLIER = "2026-12-01T10:00:00Z"
BAD = 'spec.quotas: unknown field (did you mean "quota"?)'


def tenant(name: str, generation: int, *conditions: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "Tenant", "metadata": {"name": name, "generation": generation},
            "status": {"conditions": list(conditions)}}  # fmt: skip


def ready(status: str, reason: str, message: str, generation: int) -> dict[str, Any]:
    return {"type": "Ready", "status": status, "reason": reason, "message": message,
            "observedGeneration": generation, "lastTransitionTime": EARLIER}  # fmt: skip


ENFORCED = ObjectVerdict("Tenant", "a", 2)
LEFT_OUT = ObjectVerdict("Tenant", "a", 2, BAD)


@pytest.mark.parametrize(
    ("obj", "verdict", "written"),
    [
        pytest.param(tenant("a", 2), ENFORCED, ("True", "Enforced", NOW), id="first-status"),
        pytest.param(tenant("a", 2, ready("True", "Enforced", "enforced", 2)), ENFORCED, None,
                     id="unchanged-is-not-written"),
        pytest.param(tenant("a", 2, ready("True", "Enforced", "enforced", 1)), ENFORCED,
                     ("True", "Enforced", EARLIER), id="new-generation-keeps-transition-time"),
        pytest.param(tenant("a", 2, ready("True", "Enforced", "enforced", 1)), LEFT_OUT,
                     ("False", "Invalid", NOW), id="turning-invalid-is-a-transition"),
    ],
)  # fmt: skip
def test_status_patch(
    obj: dict[str, Any], verdict: ObjectVerdict, written: tuple[str, str, str] | None
) -> None:
    patch = status_patch(obj, verdict, NOW)
    if written is None:
        assert patch is None
        return
    assert patch is not None
    (condition,) = patch["status"]["conditions"]
    assert (condition["status"], condition["reason"], condition["lastTransitionTime"]) == written
    assert condition["observedGeneration"] == patch["status"]["observedGeneration"] == 2
    assert condition["message"] == (BAD if verdict.message else "enforced")


class Objects:
    def __init__(self, objects: Sequence[dict[str, Any]] | None) -> None:
        self.listed = objects

    def objects(self) -> Sequence[dict[str, Any]]:
        if self.listed is None:
            raise FactsUnavailable("not listed")
        return self.listed


class Api:
    def __init__(self, missing: str = "") -> None:
        self.patches: list[tuple[str, dict[str, Any], str]] = []
        self.missing = missing

    def request(self, method: str, path: str, *, body: Any = None, content_type: str = "",
                **_: Any) -> dict[str, Any]:  # fmt: skip
        assert method == "PATCH"
        if self.missing and self.missing in path:
            raise ApiError(404, "not found")
        self.patches.append((path, body, content_type))
        return {}


def writer(api: Api, objects: Objects, served: PolicySet | None) -> PolicyStatusWriter:
    return PolicyStatusWriter(cast(KubeApi, api), cast(PolicyObjects, objects), lambda: served)


def test_only_the_generation_the_served_set_judged_is_written() -> None:
    api = Api()
    served = PolicySet(objects=(ENFORCED, ObjectVerdict("Tenant", "b", 1, BAD)))
    listed = [tenant("a", 2), tenant("b", 2), tenant("c", 1)]  # b edited, c new: not judged yet
    assert writer(api, Objects(listed), served).write_once() == 1
    ((path, body, content_type),) = api.patches
    assert path == "/apis/dragate.io/v1alpha1/tenants/a/status"
    assert content_type == "application/merge-patch+json"
    assert body["status"]["conditions"][0]["status"] == "True"


@pytest.mark.parametrize(
    ("objects", "served", "api"),
    [
        pytest.param(Objects(None), PolicySet(objects=(ENFORCED,)), Api(), id="not-listed"),
        pytest.param(Objects([tenant("a", 2)]), None, Api(), id="nothing-served"),
        pytest.param(Objects([tenant("a", 2)]), PolicySet(objects=(ENFORCED,)), Api("/a/"),
                     id="deleted-meanwhile"),
    ],
)  # fmt: skip
def test_nothing_is_written_without_both_sides(
    objects: Objects, served: PolicySet | None, api: Api
) -> None:
    assert writer(api, objects, served).write_once() == 0


TEAM = Tenant(
    "team-a",
    quota=(QuotaLimit("gpu.nvidia.com", max_devices=4), QuotaLimit("mig.nvidia.com")),
)


@pytest.mark.parametrize(
    ("usage", "rows", "summary"),
    [
        pytest.param({}, [("gpu.nvidia.com", 0, 4), ("mig.nvidia.com", 0, None)],
                     "gpu.nvidia.com=0/4,mig.nvidia.com=0", id="nothing-held"),
        pytest.param({"gpu.nvidia.com": ClassUsage(3), "x.example.com": ClassUsage(2)},
                     [("gpu.nvidia.com", 3, 4), ("mig.nvidia.com", 0, None),
                      ("x.example.com", 2, None)],
                     "gpu.nvidia.com=3/4,mig.nvidia.com=0,x.example.com=2",
                     id="held-outside-quota"),
    ],
)  # fmt: skip
def test_usage_status(
    usage: dict[str, ClassUsage], rows: list[tuple[str, int, int | None]], summary: str
) -> None:
    status = usage_status(TEAM, usage)
    found = [(r["deviceClassName"], r["used"], r.get("limit")) for r in status["usage"]]
    assert (found, status["usageSummary"]) == (rows, summary)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_leader_writes_usage_coalesced_and_conditions_at_once() -> None:
    api, clock, leading = Api(), Clock(), [False]
    held = {"gpu.nvidia.com": ClassUsage(3)}
    served = PolicySet(tenants=(TEAM,), objects=(ObjectVerdict("Tenant", "team-a", 1),))
    stored = tenant("team-a", 1)
    status_writer = PolicyStatusWriter(
        cast(KubeApi, api), cast(PolicyObjects, Objects([stored])), lambda: served,
        usage=lambda name: held, leading=lambda: leading[0], clock=clock,
    )  # fmt: skip
    assert status_writer.write_once() == 0  # a follower writes nothing
    leading[0] = True
    assert status_writer.write_once() == 1
    written = api.patches[-1][1]["status"]
    assert written["usageSummary"] == "gpu.nvidia.com=3/4,mig.nvidia.com=0"
    stored["status"] = written
    held = {"gpu.nvidia.com": ClassUsage(4)}
    assert status_writer.write_once() == 0  # usage alone, within min_interval
    clock.now += 5
    assert status_writer.write_once() == 1
    assert api.patches[-1][1]["status"]["usage"] == [
        {"deviceClassName": "gpu.nvidia.com", "used": 4, "limit": 4},
        {"deviceClassName": "mig.nvidia.com", "used": 0},
    ]
    stored["status"] = api.patches[-1][1]["status"]
    assert status_writer.write_once() == 0
    served = PolicySet(tenants=(TEAM,), objects=(ObjectVerdict("Tenant", "team-a", 1, BAD),))
    assert status_writer.write_once() == 1  # a condition change is not held back
    assert "usage" not in api.patches[-1][1]["status"]


def test_the_leader_keeps_the_quota_rows_it_wrote_for_the_metrics() -> None:
    """The rows behind `status.usage`, with the pending devices: what /metrics exports."""
    api, leading = Api(), [True]
    held = {"gpu.nvidia.com": ClassUsage(3, pending=1)}
    served = PolicySet(tenants=(TEAM,), objects=(ObjectVerdict("Tenant", "team-a", 1),))
    status_writer = PolicyStatusWriter(
        cast(KubeApi, api), cast(PolicyObjects, Objects([tenant("team-a", 1)])), lambda: served,
        usage=lambda name: held, leading=lambda: leading[0],
    )  # fmt: skip
    assert status_writer.quota_rows() == ()
    status_writer.write_once()
    assert status_writer.quota_rows() == (
        QuotaRow("team-a", "gpu.nvidia.com", 4, 3, 1),
        QuotaRow("team-a", "mig.nvidia.com", None, 0, 0),
    )
    leading[0] = False
    assert status_writer.quota_rows() == ()  # a follower's rows would go stale
    leading[0] = True
    served = PolicySet(objects=())
    status_writer.write_once()
    assert status_writer.quota_rows() == ()  # the Tenant is gone
