"""/mutate through the pipeline: the patch and the warnings are the general rewrite's.

The pipeline takes a Pod's rewrite from `rewrite.podedits` (remembered edits applied copy on
write) and its patch from the edits themselves; over the corpus that must equal
`rewrite_object` and `make_patch` of the two objects, and applying the patch (jsonpatch) to the
Pod that was sent must give the patched Pod.
"""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import pytest
from pod_corpus import corpus_pods

from webhook.kube.snapshot import SnapshotState
from webhook.ledger.memory import MemoryLedger
from webhook.pipeline import Context, request_from_object, review
from webhook.policy.loading import parse_policies
from webhook.rewrite import rewrite_object
from webhook.rewrite.patch import make_patch

POLICIES = parse_policies(
    """
apiVersion: dragate.io/v1alpha1
kind: Tenant
metadata: {name: team-a}
spec:
  namespaces: [team-a]
  quota:
  - {deviceClassName: gpu.nvidia.com, maxDevices: 64}
  - {deviceClassName: mig.nvidia.com, maxDevices: 64}
""",
    "inline.yaml",
)
PODS = corpus_pods()


def mutated(pod: dict[str, Any]) -> Any:
    ctx = Context(policies=lambda: POLICIES, state=SnapshotState([]), ledger=MemoryLedger())
    return review(request_from_object(pod), ctx, mutate=True)


@pytest.mark.parametrize("where", [w for w, _ in PODS])
def test_the_patch_is_the_general_rewrites_patch(where: str) -> None:
    pod = dict(PODS)[where]
    sent = copy.deepcopy(pod)
    verdict = mutated(pod)
    assert pod == sent, "the request's object is never changed"
    if not verdict.allowed:
        assert not verdict.patch and verdict.patched is None
        return
    expected = rewrite_object(sent, POLICIES.mappings, namespace="team-a")
    assert verdict.decision.warnings == expected.notes
    if not expected.changed:
        assert not verdict.patch and verdict.patched is None
        return
    assert repr(verdict.patched) == repr(expected.object)
    assert repr(list(verdict.patch)) == repr(make_patch(sent, dict(expected.object)))
    assert jsonpatch.apply_patch(sent, list(verdict.patch)) == verdict.patched


def test_pods_of_one_workload_get_one_patch_but_their_own_objects() -> None:
    def pod(name: str) -> dict[str, Any]:
        meta = {"name": name, "namespace": "team-a", "uid": f"uid-{name}"}
        limits = {"nvidia.com/gpu": 1}
        spec = {"containers": [{"name": "c", "image": "x", "resources": {"limits": limits}}]}
        return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}

    one, two = mutated(pod("w-abcde")), mutated(pod("w-fghij"))
    assert one.patch == two.patch and one.decision.warnings == two.decision.warnings
    assert one.patched["metadata"]["name"] == "w-abcde"
    assert two.patched["metadata"]["name"] == "w-fghij"
    assert one.patched["spec"] is not two.patched["spec"]
