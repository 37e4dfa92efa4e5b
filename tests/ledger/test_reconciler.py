"""The reconciler names the holders it confirms after the Pods their claims were made for."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from builders import claim, exact, request
from ledger_contract import GPU

from webhook.kube.snapshot import SnapshotState
from webhook.ledger.memory import MemoryLedger
from webhook.ledger.reconciler import Reconciler, claims_names, claims_truth
from webhook.ledger.sqlite import SqliteLedger
from webhook.policy.loading import parse_policies

POLICIES = parse_policies(
    "apiVersion: dragate.io/v1alpha1\nkind: Tenant\nmetadata: {name: team-a}\n"
    "spec: {namespaces: [team-a]}\n",
    "inline.yaml",
)
LEDGERS: dict[str, Callable[[Path], Any]] = {
    "memory": lambda _: MemoryLedger(),
    "sqlite": lambda tmp: SqliteLedger(str(tmp / "ledger.sqlite")),
}


def generated(pod: str, uid: str) -> dict[str, Any]:
    made = claim(request(exact(count=2)), name=f"{pod}-gpu-x1")
    made["metadata"]["annotations"] = {"resource.kubernetes.io/pod-claim-name": "gpu"}
    made["metadata"]["ownerReferences"] = [{"kind": "Pod", "uid": uid, "name": pod}]
    return made


@pytest.mark.parametrize("kind", sorted(LEDGERS))
@pytest.mark.parametrize(
    ("names", "expected"),
    [(True, "team-a/train-0"), (False, "")],
    ids=["with-names", "without-names-the-key-is-shown"],
)
def test_a_holder_first_seen_by_the_reconciler_is_named(
    kind: str, names: bool, expected: str, tmp_path: Path
) -> None:
    ledger = LEDGERS[kind](tmp_path)
    state = SnapshotState([generated("train-0", "uid-0"), claim(request(exact()), name="plain")])
    reconciler = Reconciler(
        ledger,
        claims_truth(lambda: POLICIES, state),
        names=claims_names(state) if names else None,
    )
    assert reconciler.run_once()
    shown = {h.key: h.name for h in ledger.usage("team-a")[GPU].holders}
    assert shown == {"pod:uid-0/gpu": expected, "claim:team-a/plain": ""}


def test_a_stored_name_is_kept_over_the_claims() -> None:
    ledger = MemoryLedger()
    ledger.reserve("team-a", {"pod:uid-0/gpu": {GPU: 2}}, {}, names={"pod:uid-0/gpu": "team-a/a"})
    ledger.reconcile({"team-a": {"pod:uid-0/gpu": {GPU: 2}}}, {"pod:uid-0/gpu": "team-a/b"})
    (holder,) = ledger.usage("team-a")[GPU].holders
    assert (holder.name, holder.devices) == ("team-a/a", 2)
