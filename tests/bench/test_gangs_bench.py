"""The gangs section measures what it says: members draw the gang, ordinary Pods do not."""

from __future__ import annotations

import gangs_bench
import pytest

from webhook.ledger.memory import MemoryLedger


def test_member_pods_draw_the_whole_gang_and_ordinary_pods_fill_the_quota(tmp_path) -> None:  # type: ignore[no-untyped-def]
    row = gangs_bench.measure(MemoryLedger, tmp_path, size=gangs_bench.WARMUP + 5, repetitions=2)
    assert row["gang"]["samples"] == 2
    assert row["member_pod"]["samples"] == row["ordinary_pod"]["samples"] == 5
    assert row["member_over_ordinary_p50"] > 0


@pytest.mark.parametrize("owner", [None, "train"], ids=["ordinary", "member"])
def test_the_pod_asks_for_one_gpu_and_names_its_job(owner: str | None) -> None:
    pod = gangs_bench.one_gpu_pod("p", owner)
    assert pod["spec"]["resourceClaims"] == [
        {"name": "gpu-trainer", "resourceClaimTemplateName": "gpu-1"}
    ]
    owners = [o["name"] for o in pod["metadata"].get("ownerReferences", [])]
    assert owners == ([owner] if owner else [])
