"""RewritePolicyKeeper against the real kube-apiserver (its MutatingAdmissionPolicy beta on):
what it applies, where it binds, what it repairs and removes, and that the API server then
rewrites legacy Pods itself. Each test drives passes by hand (`reconcile`), as the loop does."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from webhook.kube.caches import KubeState
from webhook.kube.policykeeper import BINDINGS, Foreign, RewritePolicyKeeper
from webhook.policy.loading import load_policies
from webhook.rewrite.admissionpolicy import NAME
from webhook.rewrite.shapes import REWRITTEN_LABEL
from webhook.types import MappingAction, PolicySet

from .cluster import Cluster
from .dragate_server import DragateServer, serve_command
from .processes import wait_for

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
TENANT = """
apiVersion: dragate.io/v1alpha1
kind: Tenant
metadata: {{name: pk}}
spec: {{namespaces: [{0}, {1}], allowedDeviceClasses: [gpu.nvidia.com, mig.nvidia.com]}}
"""
SEEN: dict[str, Any] = {"timeout": 10, "what": "the watch cache caught up"}


class Served:
    """The policy set being served; a test swaps it as a reload would."""

    def __init__(self, policies: PolicySet) -> None:
        self.policies = policies

    def __call__(self) -> PolicySet:
        return self.policies


@pytest.fixture
def names(request: pytest.FixtureRequest) -> tuple[str, str]:
    """(a tenant namespace that exists, one that does not yet): fresh for every test, since
    a deleted namespace lingers while it terminates."""
    index = [i.nodeid for i in request.session.items].index(request.node.nodeid)
    return f"pk{index}-here", f"pk{index}-later"


@pytest.fixture
def policies(tmp_path: Path, names: tuple[str, str]) -> PolicySet:
    (tmp_path / "legacy.yaml").write_text((REPO / "policies/legacy-mapping.yaml").read_text())
    (tmp_path / "tenants.yaml").write_text(TENANT.format(*names))
    return load_policies([str(tmp_path)])


@pytest.fixture
def keeper(
    cluster: Cluster, policies: PolicySet, names: tuple[str, str]
) -> Iterator[RewritePolicyKeeper]:
    """A keeper on synced caches, not started: each test runs its passes itself."""
    here = names[0]
    _namespace(cluster, here)
    state = KubeState.from_kubeconfig(str(cluster.kubeconfig), watch_seconds=30).start()
    assert state.wait_synced(20), state.health()
    wait_for(lambda: state.namespace(here) is not None, **SEEN)
    made = RewritePolicyKeeper(state, state.api, Served(policies))
    try:
        yield made
    finally:
        state.stop(timeout=0)
        for kind in ("mutatingadmissionpolicybinding", "mutatingadmissionpolicy"):
            cluster.kubectl("delete", kind, NAME, "--ignore-not-found", check=False)
        for namespace in names:
            cluster.kubectl("delete", "namespace", namespace, "--ignore-not-found",
                            "--wait=false", check=False)  # fmt: skip


def test_applies_where_namespaces_exist_and_the_api_server_rewrites(
    cluster: Cluster, keeper: RewritePolicyKeeper, names: tuple[str, str]
) -> None:
    here, _ = names
    assert keeper.reconcile() == "applied"
    assert _bound(cluster) == [here]  # the tenant's other namespace does not exist yet
    templates = _templates(cluster, here)
    assert keeper.applied is not None
    assert templates == {t["metadata"]["name"] for t in keeper.applied.templates}
    assert len(templates) == 8  # nvidia.com/gpu, 1..8 (the MIG slices are mapped by prefix)
    pod = _rewritten(cluster, here)
    assert pod["spec"]["resourceClaims"] == [
        {"name": "gpu-cuda", "resourceClaimTemplateName": "dragate-gpu-nvidia-com-2"}
    ]
    assert pod["metadata"]["labels"] == {REWRITTEN_LABEL: "true"}

    writes = keeper.writes
    assert keeper.reconcile() == "applied"
    assert keeper.writes == writes  # applying the same objects again writes nothing


def test_a_namespace_that_appears_is_bound_after_its_templates_exist(
    cluster: Cluster, keeper: RewritePolicyKeeper, names: tuple[str, str]
) -> None:
    here, later = names
    keeper.reconcile()
    assert _bound(cluster) == [here]
    _namespace(cluster, later)
    wait_for(lambda: keeper.store.namespace(later) is not None, **SEEN)

    assert keeper.reconcile(force=False) == "applied"  # the change alone triggers a pass
    assert _bound(cluster) == [here, later]
    assert _templates(cluster, later) == _templates(cluster, here)
    assert "resourceClaims" in _rewritten(cluster, later)["spec"]


def test_drift_is_repaired_by_the_forced_pass(
    cluster: Cluster, keeper: RewritePolicyKeeper, names: tuple[str, str]
) -> None:
    here, elsewhere = names[0], "pk-elsewhere"
    keeper.reconcile()
    patch = [{"op": "replace",
              "path": "/spec/matchResources/namespaceSelector/matchExpressions/0/values",
              "value": [elsewhere]}]  # fmt: skip
    cluster.kubectl("patch", "mutatingadmissionpolicybinding", NAME, "--type=json",
                    "-p", json.dumps(patch))  # fmt: skip
    assert _bound(cluster) == [elsewhere]
    assert keeper.reconcile(force=False) == "applied"  # nothing it applies changed: no pass
    assert _bound(cluster) == [elsewhere]
    keeper.reconcile()
    assert _bound(cluster) == [here]

    cluster.kubectl("delete", "mutatingadmissionpolicy", NAME)
    keeper.reconcile()
    assert cluster.get_json("mutatingadmissionpolicy", NAME)["metadata"]["name"] == NAME


def test_nothing_left_to_rewrite_deletes_binding_and_policy_and_keeps_templates(
    cluster: Cluster, keeper: RewritePolicyKeeper, policies: PolicySet, names: tuple[str, str]
) -> None:
    here = names[0]
    keeper.reconcile()
    templates = _templates(cluster, here)
    warned = tuple(replace(t, mapping_action=MappingAction.WARN) for t in policies.tenants)
    assert isinstance(keeper.policies, Served)
    keeper.policies.policies = replace(policies, tenants=warned)

    assert keeper.reconcile(force=False) == "absent"
    for kind in ("mutatingadmissionpolicybinding", "mutatingadmissionpolicy"):
        assert not _exists(cluster, kind, NAME)
    assert _templates(cluster, here) == templates  # Pods made earlier still name them
    unbound = "the policy's deletion reached admission"
    wait_for(lambda: "resourceClaims" not in _created(cluster, here)["spec"], timeout=30,
             what=unbound)  # fmt: skip
    writes = keeper.writes
    assert keeper.reconcile() == "absent"
    assert keeper.writes == writes


def test_an_object_of_its_name_that_is_not_dragates_is_left_alone(
    cluster: Cluster, keeper: RewritePolicyKeeper
) -> None:
    keeper.reconcile()
    foreign = cluster.get_json("mutatingadmissionpolicybinding", NAME)
    cluster.kubectl("label", "mutatingadmissionpolicybinding", NAME,
                    "app.kubernetes.io/managed-by=someone-else", "--overwrite")  # fmt: skip
    with pytest.raises(Foreign, match=f"{BINDINGS}/{NAME} exists without the label"):
        keeper.reconcile()
    after = cluster.get_json("mutatingadmissionpolicybinding", NAME)
    assert after["spec"] == foreign["spec"]
    assert after["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "someone-else"


# ----------------------------------------------------------------- helpers


def _namespace(cluster: Cluster, name: str) -> None:
    if not _exists(cluster, "namespace", name):
        cluster.kubectl("create", "namespace", name)


def _exists(cluster: Cluster, *args: str) -> bool:
    return cluster.kubectl("get", *args, "-o", "name", check=False).returncode == 0


def _bound(cluster: Cluster) -> list[str]:
    binding = cluster.get_json("mutatingadmissionpolicybinding", NAME)
    expressions = binding["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"]
    return list(expressions[0]["values"])


def _templates(cluster: Cluster, namespace: str) -> set[str]:
    listed = cluster.get_json("resourceclaimtemplates", "-n", namespace)
    return {t["metadata"]["name"] for t in listed["items"]}


def _created(cluster: Cluster, namespace: str) -> dict[str, Any]:
    """A legacy two-GPU Pod as the API server would store it (a dry run)."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "probe"},
        "spec": {"containers": [{"name": "cuda", "image": "cuda:12",
                                 "resources": {"limits": {"nvidia.com/gpu": "2"}}}]},
    }  # fmt: skip
    done = cluster.kubectl("create", "--dry-run=server", "-n", namespace, "-o", "json",
                           "-f", "-", input=json.dumps(pod))  # fmt: skip
    created: dict[str, Any] = json.loads(done.stdout)
    return created


def _rewritten(cluster: Cluster, namespace: str) -> dict[str, Any]:
    """The probe Pod once the API server rewrites it (a stored policy is compiled soon after)."""
    deadline = time.monotonic() + 60
    while "resourceClaims" not in (pod := _created(cluster, namespace))["spec"]:
        assert time.monotonic() < deadline, f"the policy never took effect in {namespace}"
        time.sleep(0.2)
    return pod


def test_dragate_serve_keeps_it_as_policies_and_namespaces_change(
    cluster: Cluster, tmp_path: Path, names: tuple[str, str]
) -> None:
    """`dragate serve --keep-rewrite-policy`: the keeper runs in the Lease holder and follows
    a namespace that appears and a policy file edited under it (hot reload), on its own."""
    here, later = names
    _namespace(cluster, here)
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "legacy.yaml").write_text((REPO / "policies/legacy-mapping.yaml").read_text())
    (policies / "tenants.yaml").write_text(TENANT.format(here, later))
    command = [*serve_command(cluster.kubeconfig, policies), "--keep-rewrite-policy"]
    server = DragateServer.launch(command, cluster.workdir, name="dragate-keeper")
    try:
        wait_for(lambda: _bound_or_none(cluster) == [here], timeout=20, what="binding applied")
        _namespace(cluster, later)
        wait_for(lambda: _bound_or_none(cluster) == [here, later], timeout=20,
                 what="the new namespace bound")  # fmt: skip
        assert _templates(cluster, later) == _templates(cluster, here)
        (policies / "tenants.yaml").write_text(
            TENANT.format(here, later).replace("spec: {", "spec: {legacyMappingAction: Warn, ")
        )
        wait_for(lambda: not _exists(cluster, "mutatingadmissionpolicy", NAME), timeout=20,
                 what="the policy deleted after the reload")  # fmt: skip
        assert not _exists(cluster, "mutatingadmissionpolicybinding", NAME)
        assert "rewrite policy: applied MutatingAdmissionPolicy" in server.log_tail(400)
    finally:
        server.stop()
        for kind in ("mutatingadmissionpolicybinding", "mutatingadmissionpolicy"):
            cluster.kubectl("delete", kind, NAME, "--ignore-not-found", check=False)
        for namespace in names:
            cluster.kubectl("delete", "namespace", namespace, "--ignore-not-found",
                            "--wait=false", check=False)  # fmt: skip


def _bound_or_none(cluster: Cluster) -> list[str] | None:
    if not _exists(cluster, "mutatingadmissionpolicybinding", NAME):
        return None
    return _bound(cluster)
