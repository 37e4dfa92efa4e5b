"""The truth a ledger is rebuilt from: each existing claim counted for its namespace's tenant."""

from __future__ import annotations

from typing import Any

import pytest
from builders import claim, exact, namespace, request

from webhook.kube.snapshot import SnapshotState
from webhook.ledger.usage import existing_holds, holds_by_tenant
from webhook.policy.loading import parse_policies

POLICIES = parse_policies(
    """
apiVersion: dragate.io/v1alpha1
kind: Tenant
metadata: {name: team-a}
spec:
  namespaces: [team-a]
---
apiVersion: dragate.io/v1alpha1
kind: Tenant
metadata: {name: labelled}
spec:
  namespaceSelector: {matchLabels: {tenant: labelled}}
"""
)
GPU = "gpu.nvidia.com"
UNREADABLE = {**claim(name="odd"), "spec": {"devices": {"requests": "not a list"}}}


def gpus(count: int, name: str, ns: str) -> dict[str, Any]:
    return claim(request(exact("gpu", GPU, count)), name=name, namespace=ns)


@pytest.mark.parametrize(
    ("claims", "namespaces", "holds", "notes"),
    [
        pytest.param([gpus(2, "a", "team-a")], {}, {"team-a": {"claim:team-a/a": {GPU: 2}}}, 0,
                     id="named-namespace"),
        pytest.param([gpus(1, "b", "ml")], {"ml": namespace("ml", tenant="labelled")},
                     {"labelled": {"claim:ml/b": {GPU: 1}}}, 0, id="selected-by-label"),
        pytest.param([gpus(1, "c", "nobody")], {}, {}, 0, id="no-tenant-not-counted"),
        pytest.param([UNREADABLE], {}, {}, 1, id="unreadable-claim-noted"),
    ],
)  # fmt: skip
def test_holds_by_tenant(
    claims: list[dict[str, Any]],
    namespaces: dict[str, dict[str, Any]],
    holds: dict[str, Any],
    notes: int,
) -> None:
    found, problems = holds_by_tenant(POLICIES, claims, namespaces)
    assert found == holds
    assert len(problems) == notes


def test_existing_holds_reads_the_state_namespaces_and_claims() -> None:
    state = SnapshotState(
        [namespace("ml", tenant="labelled"), gpus(3, "d", "ml"), gpus(1, "e", "team-a")]
    )
    assert existing_holds(POLICIES, state) == {
        "labelled": {"claim:ml/d": {GPU: 3}},
        "team-a": {"claim:team-a/e": {GPU: 1}},
    }
