"""The `map-patch` variant's MutatingAdmissionPolicy, judged by a real kube-apiserver: it
makes exactly dragate's patch of the bench's legacy Pod, under the chart's own mutating
conditions, and only in the variant's namespaces. Needs the e2e toolchain, else skipped."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonpatch
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from apiserver_objects import dragate_patch, legacy_pod, policies, rewriting_policy
from apiserver_setup import LABEL, chart_rewrite_conditions, connect
from kube_ledger_bench import toolchain

ABSENT = object()


@dataclass
class Scene:
    cluster: Any
    patch: list[dict[str, Any]]


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scene]:
    from e2e.cluster import running_cluster

    bin_dir = toolchain()
    if bin_dir is None or not (bin_dir / "helm").exists():
        pytest.skip("the e2e toolchain is not built: tests/e2e/toolchain/build.sh")
    patch = dragate_patch(policies(tmp_path_factory.mktemp("bench") / "policies"))
    with running_cluster(bin_dir, controller_manager=False, mutating_policies=True) as cluster:
        conditions = chart_rewrite_conditions(cluster)
        namespaces = [_namespace("in-scope", "map-patch"), _namespace("elsewhere", "none")]
        items = [*namespaces, *rewriting_policy(patch, conditions)]
        listed = {"apiVersion": "v1", "kind": "List", "items": items}
        cluster.kubectl("apply", "-f", "-", input=json.dumps(listed))
        _await_policy(cluster)
        yield Scene(cluster, patch)


def _namespace(name: str, variant: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": {LABEL: variant}}}  # fmt: skip


def _await_policy(cluster: Any) -> None:
    """A policy is compiled after it is stored: wait until a legacy Pod comes back labelled."""
    deadline = time.monotonic() + 60
    while "dragate.io/rewritten" not in _labels(_created(cluster, "in-scope", legacy_pod("p"))):
        assert time.monotonic() < deadline, "the MutatingAdmissionPolicy never took effect"
        time.sleep(0.2)


def _created(cluster: Any, ns: str, pod: dict[str, Any]) -> dict[str, Any]:
    """The Pod as the API server would store it (a dry run)."""
    client = connect(cluster)
    try:
        status, body = client.create(f"/api/v1/namespaces/{ns}/pods", pod, dry_run=True)
    finally:
        client.close()
    assert status == 201, body
    return dict(body)


def _labels(pod: dict[str, Any]) -> dict[str, str]:
    return dict(pod["metadata"].get("labels") or {})


def test_a_legacy_pod_is_patched_as_dragate_patches_it(scene: Scene) -> None:
    pod = _created(scene.cluster, "in-scope", legacy_pod("legacy"))
    for op in scene.patch:
        found = jsonpatch.JsonPointer(op["path"]).resolve(pod, ABSENT)
        assert found == (op["value"] if op["op"] == "add" else ABSENT), op


PLAIN_POD = {**legacy_pod("plain"), "spec": {"containers": [{"name": "c", "image": "i"}]}}


@pytest.mark.parametrize(
    ("ns", "pod"),
    [("in-scope", PLAIN_POD), ("elsewhere", legacy_pod("legacy"))],
    ids=["no-legacy-gpu", "namespace-out-of-scope"],
)
def test_other_pods_are_left_alone(scene: Scene, ns: str, pod: dict[str, Any]) -> None:
    created = _created(scene.cluster, ns, pod)
    assert "dragate.io/rewritten" not in _labels(created)
    assert "resourceClaims" not in created["spec"]
