"""Denials name the Pods that hold quota by `namespace/name`, not by the uid their holders
are keyed by, with every ledger kind; a Pod recorded without a name shows its uid."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from builders import claim, exact, pod, request, template

from webhook.assembly import offline_context
from webhook.kube.snapshot import SnapshotState
from webhook.ledger.memory import MemoryLedger
from webhook.ledger.sqlite import SqliteLedger
from webhook.pipeline import Context, request_from_object, review
from webhook.policy.loading import parse_policies
from webhook.types import Ledger

POLICIES = parse_policies(
    """
apiVersion: dragate.io/v1alpha1
kind: Tenant
metadata: {name: team-a}
spec:
  namespaces: [team-a]
  quota:
  - {deviceClassName: gpu.nvidia.com, maxDevices: 4}
""",
    "inline.yaml",
)
GPU = "gpu.nvidia.com"
LEDGERS: dict[str, Callable[[Path], Ledger]] = {
    "memory": lambda _: MemoryLedger(),
    "sqlite": lambda tmp: SqliteLedger(str(tmp / "ledger.sqlite")),
}


def judged(ledger: Ledger, *pods: dict[str, Any]) -> list[Any]:
    state = SnapshotState([template(request(exact(count=3)), name="three")])
    context = Context(policies=lambda: POLICIES, state=state, ledger=ledger)
    return [review(request_from_object(p), context) for p in pods]


def train(name: str, uid: str) -> dict[str, Any]:
    return pod(name, claims={"gpu": "three"}, uid=uid)


@pytest.mark.parametrize("kind", sorted(LEDGERS))
def test_a_denial_names_the_holding_pod_by_namespace_and_name(kind: str, tmp_path: Path) -> None:
    ledger = LEDGERS[kind](tmp_path)
    first, second = judged(ledger, train("train-0", "uid-0"), train("train-1", "uid-1"))
    assert first.allowed and not second.allowed
    (reason,) = second.decision.reasons
    assert reason.holders == ("pod:team-a/train-0/gpu (3)",)
    assert "held by pod:team-a/train-0/gpu (3)" in reason.message
    assert "uid-0" not in reason.message
    (holder,) = ledger.usage("team-a")["gpu.nvidia.com"].holders
    assert (holder.key, holder.name) == ("pod:uid-0/gpu", "team-a/train-0")


@pytest.mark.parametrize("kind", sorted(LEDGERS))
def test_a_pod_recorded_without_a_name_is_shown_by_its_uid(kind: str, tmp_path: Path) -> None:
    """An AdmissionReview without a name (a Pod only `generateName`d, as the mutating side
    sees it) leaves the holder nameless: shown by its key."""
    ledger = LEDGERS[kind](tmp_path)
    nameless = train("", "uid-0")
    del nameless["metadata"]["name"]
    nameless["metadata"]["generateName"] = "train-"
    first, second = judged(ledger, nameless, train("train-1", "uid-1"))
    assert first.allowed and not second.allowed
    assert second.decision.reasons[0].holders == ("pod:uid-0/gpu (3)",)


def test_the_generated_claim_names_its_pod_from_its_owner_reference(tmp_path: Path) -> None:
    ledger = MemoryLedger()
    nameless = train("", "uid-0")
    del nameless["metadata"]["name"]
    generated = claim(request(exact(count=3)), name="train-abc-gpu-x1")
    generated["metadata"]["annotations"] = {"resource.kubernetes.io/pod-claim-name": "gpu"}
    generated["metadata"]["ownerReferences"] = [
        {"kind": "Pod", "uid": "uid-0", "name": "train-abc"}
    ]
    context = Context(
        policies=lambda: POLICIES,
        state=SnapshotState([template(request(exact(count=3)), name="three")]),
        ledger=ledger,
    )
    assert review(request_from_object(nameless), context).allowed
    assert review(request_from_object(generated), context).allowed
    (holder,) = ledger.usage("team-a")["gpu.nvidia.com"].holders
    assert (holder.key, holder.name) == ("pod:uid-0/gpu", "team-a/train-abc")


def test_a_ledger_started_from_the_claims_names_the_pods_they_were_made_for() -> None:
    """`dragate check --state` and `serve`'s seed: the generated claims' owners name them."""
    generated = claim(request(exact(count=3)), name="train-0-gpu-x1")
    generated["metadata"]["annotations"] = {"resource.kubernetes.io/pod-claim-name": "gpu"}
    generated["metadata"]["ownerReferences"] = [{"kind": "Pod", "uid": "uid-0", "name": "train-0"}]
    state = SnapshotState([generated, template(request(exact(count=3)), name="three")])
    context = offline_context(lambda: POLICIES, state)
    denied = review(request_from_object(train("train-1", "uid-1")), context)
    assert denied.decision.reasons[0].holders == ("pod:team-a/train-0/gpu (3)",)


def test_a_seeded_sqlite_ledger_keeps_the_names(tmp_path: Path) -> None:
    ledger = SqliteLedger(str(tmp_path / "ledger.sqlite"))
    ledger.seed({"team-a": {"pod:uid-0/gpu": {GPU: 3}}}, {"pod:uid-0/gpu": "team-a/train-0"})
    (holder,) = ledger.usage("team-a")[GPU].holders
    assert holder.name == "team-a/train-0"
