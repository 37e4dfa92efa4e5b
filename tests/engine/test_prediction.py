"""Workload prediction: Pods that will not fit are announced at the workload's apply."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.engine.prediction import demand, fit_warnings
from webhook.types import ClassUsage, QuotaLimit, Tenant

GPU = "gpu.nvidia.com"
TWO_GPUS = {GPU: 2}


def pod_template() -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "c"}]}}


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        ({"kind": "Deployment", "spec": {"replicas": 3, "template": pod_template()}}, 6),
        ({"kind": "Deployment", "spec": {"template": pod_template()}}, 2),
        ({"kind": "StatefulSet", "spec": {"replicas": 4, "template": pod_template()}}, 8),
        ({"kind": "Job", "spec": {"parallelism": 5, "template": pod_template()}}, 10),
        (
            {
                "kind": "JobSet",
                "spec": {
                    "replicatedJobs": [
                        {
                            "replicas": 2,
                            "template": {"spec": {"parallelism": 3, "template": pod_template()}},
                        },
                        {"template": {"spec": {"template": pod_template()}}},
                    ]
                },
            },
            14,
        ),
    ],
    ids=["deployment", "default-replicas", "statefulset", "job", "jobset"],
)
def test_demand(obj: dict[str, Any], expected: int) -> None:
    assert demand(obj, lambda spec: TWO_GPUS) == {GPU: expected}


def test_warns_only_when_pods_do_not_fit() -> None:
    tenant = Tenant("t", quota=(QuotaLimit(GPU, max_devices=8),))
    usage = {GPU: ClassUsage(used=4)}
    assert list(fit_warnings("Deployment a/b", {GPU: 4}, tenant, usage)) == []
    (warning,) = fit_warnings("Deployment a/b", {GPU: 6}, tenant, usage)
    assert warning == (
        "Deployment a/b: its pods need 6 gpu.nvidia.com devices, but tenant 't' has 4 of 8 left; "
        "some pods will be denied"
    )
