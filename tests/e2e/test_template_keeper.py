"""TemplateKeeper against the real kube-apiserver: managed templates come back, others do not."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from webhook.kube.caches import KubeState
from webhook.kube.templates import TemplateKeeper
from webhook.types import (
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    LabelSelector,
    Object,
    PolicySet,
    Tenant,
)

from .cluster import Cluster
from .processes import wait_for

pytestmark = pytest.mark.e2e

TENANT_LABEL = "dragate.io/tenant"
POLICIES = PolicySet(
    tenants=(
        Tenant("listed", namespaces=frozenset({"tk-listed"})),
        Tenant("selected", namespace_selector=LabelSelector({TENANT_LABEL: "team-a"})),
    )
)
SEEN: dict[str, Any] = {"timeout": 10, "what": "the watch cache caught up"}
SPEC = {
    "spec": {
        "devices": {
            "requests": [
                {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 2}}
            ]
        }
    }
}


def template(namespace: str, name: str, *, managed: bool = True) -> dict[str, Any]:
    labels = {MANAGED_BY_LABEL: MANAGED_BY_VALUE} if managed else {"team": "a"}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": labels,
            "annotations": {"dragate.io/source": "e2e"},
        },
        "spec": SPEC,
    }


@pytest.fixture
def keeper(cluster: Cluster) -> Iterator[TemplateKeeper]:
    """A KubeState whose template listener feeds a started keeper, as the Lease holder runs
    them (no `leading` given: it always leads)."""

    def template_event(kind: str, obj: Object) -> None:
        running.observe(kind, obj)

    state = KubeState.from_kubeconfig(
        str(cluster.kubeconfig), watch_seconds=30, template_listener=template_event
    )
    running = TemplateKeeper(state, lambda: POLICIES, interval=60.0, max_delay=1.0)
    state.start()
    assert state.wait_synced(20), state.health()
    running.start()
    yield running
    running.stop(timeout=1)
    state.stop(timeout=0)


def test_deleted_managed_template_reappears_with_the_same_content(
    cluster: Cluster, keeper: TemplateKeeper
) -> None:
    _namespace(cluster, "tk-selected", team="a")
    _create(cluster, template("tk-selected", "gpu-2"))
    before = _wait_seen_then_get(cluster, keeper, "tk-selected", "gpu-2")

    cluster.kubectl("delete", "resourceclaimtemplate", "-n", "tk-selected", "gpu-2")
    after = _wait_present(cluster, "tk-selected", "gpu-2", timeout=5)
    assert after["metadata"]["uid"] != before["metadata"]["uid"]  # made again, not kept
    assert after["spec"] == before["spec"]  # as stored, with the server's defaults
    assert after["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] == 2
    assert after["metadata"]["labels"] == {MANAGED_BY_LABEL: MANAGED_BY_VALUE}
    assert after["metadata"]["annotations"] == {"dragate.io/source": "e2e"}
    assert keeper.restored >= 1


def test_listed_namespace_also_kept_and_again_after_a_second_delete(
    cluster: Cluster, keeper: TemplateKeeper
) -> None:
    _namespace(cluster, "tk-listed")
    _create(cluster, template("tk-listed", "gpu-2"))
    _wait_seen_then_get(cluster, keeper, "tk-listed", "gpu-2")
    for _ in range(2):
        cluster.kubectl("delete", "resourceclaimtemplate", "-n", "tk-listed", "gpu-2")
        _wait_present(cluster, "tk-listed", "gpu-2", timeout=5)


def test_unmanaged_template_stays_deleted(cluster: Cluster, keeper: TemplateKeeper) -> None:
    _namespace(cluster, "tk-unmanaged", team="a")
    _create(cluster, template("tk-unmanaged", "mine", managed=False))
    wait_for(lambda: _known(keeper, "tk-unmanaged", "mine") is False, **SEEN)
    cluster.kubectl("delete", "resourceclaimtemplate", "-n", "tk-unmanaged", "mine")
    _assert_stays_absent(cluster, keeper, "tk-unmanaged", "mine")


def test_namespace_without_tenant_is_left_alone(cluster: Cluster, keeper: TemplateKeeper) -> None:
    _namespace(cluster, "tk-no-tenant")
    _create(cluster, template("tk-no-tenant", "gpu-2"))
    _wait_seen_then_get(cluster, keeper, "tk-no-tenant", "gpu-2")
    cluster.kubectl("delete", "resourceclaimtemplate", "-n", "tk-no-tenant", "gpu-2")
    _assert_stays_absent(cluster, keeper, "tk-no-tenant", "gpu-2")
    assert keeper.sweep() == 0  # the periodic pass does not bring it back either


def test_namespace_deletion_is_not_fought(cluster: Cluster, keeper: TemplateKeeper) -> None:
    _namespace(cluster, "tk-doomed", team="a")
    _create(cluster, template("tk-doomed", "gpu-2"))
    _wait_seen_then_get(cluster, keeper, "tk-doomed", "gpu-2")
    restored = keeper.restored
    cluster.kubectl("delete", "namespace", "tk-doomed", "--wait=false")
    gone = "namespace deleted by the namespace controller"
    wait_for(lambda: not _exists(cluster, "namespace", "tk-doomed"), timeout=60, what=gone)
    wait_for(lambda: keeper.store.namespace("tk-doomed") is None, **SEEN)
    assert keeper.restored == restored
    assert keeper.sweep() == 0
    assert _known(keeper, "tk-doomed", "gpu-2") is None  # forgotten with its namespace


def test_sweep_restores_a_template_whose_delete_event_was_missed(cluster: Cluster) -> None:
    """A deletion no listener reported (e.g. lost in a relist) is caught by the periodic pass."""
    state = KubeState.from_kubeconfig(str(cluster.kubeconfig), watch_seconds=30).start()
    try:
        assert state.wait_synced(20), state.health()
        quiet = TemplateKeeper(state, lambda: POLICIES)  # not started, hears no events
        _namespace(cluster, "tk-missed", team="a")
        _create(cluster, template("tk-missed", "gpu-2"))
        wait_for(lambda: state.template("tk-missed", "gpu-2") is not None, **SEEN)
        before = _get(cluster, "resourceclaimtemplate", "-n", "tk-missed", "gpu-2")
        assert quiet.sweep() == 0  # remembered from the cache; nothing missing
        cluster.kubectl("delete", "resourceclaimtemplate", "-n", "tk-missed", "gpu-2")
        wait_for(lambda: state.template("tk-missed", "gpu-2") is None, **SEEN)
        assert quiet.sweep() == 1
        quiet.restore_due()
        assert quiet.pending() == 0
        got = _get(cluster, "resourceclaimtemplate", "-n", "tk-missed", "gpu-2")
        assert got["spec"] == before["spec"]
        assert got["metadata"]["uid"] != before["metadata"]["uid"]
    finally:
        state.stop(timeout=0)


# ----------------------------------------------------------------- helpers


def _namespace(cluster: Cluster, name: str, team: str | None = None) -> None:
    cluster.kubectl("create", "namespace", name)
    if team is not None:
        cluster.kubectl("label", "namespace", name, f"{TENANT_LABEL}=team-{team}")


def _known(keeper: TemplateKeeper, namespace: str, name: str) -> bool | None:
    """True: remembered as managed; False: in the cache but not remembered; None: neither."""
    if (namespace, name) in keeper._known:
        return True
    return False if keeper.store.template(namespace, name) is not None else None


def _wait_seen_then_get(
    cluster: Cluster, keeper: TemplateKeeper, namespace: str, name: str
) -> dict[str, Any]:
    wait_for(lambda: _known(keeper, namespace, name) is True, timeout=10, what=f"{name} remembered")
    return _get(cluster, "resourceclaimtemplate", "-n", namespace, name)


def _wait_present(cluster: Cluster, namespace: str, name: str, timeout: float) -> dict[str, Any]:
    started = time.monotonic()
    args = ("resourceclaimtemplate", "-n", namespace, name)
    wait_for(lambda: _exists(cluster, *args), timeout=timeout, what=f"{name} re-created")
    print(f"{namespace}/{name} back after {time.monotonic() - started:.2f}s")
    return _get(cluster, *args)


def _assert_stays_absent(
    cluster: Cluster, keeper: TemplateKeeper, namespace: str, name: str
) -> None:
    wait_for(lambda: keeper.store.template(namespace, name) is None, timeout=10, what="delete seen")
    wait_for(lambda: keeper.pending() == 0, timeout=5, what="keeper idle")
    time.sleep(1.5)
    assert not _exists(cluster, "resourceclaimtemplate", "-n", namespace, name)


def _create(cluster: Cluster, obj: dict[str, Any]) -> None:
    """`kubectl create`, not apply: apply would add its last-applied annotation."""
    cluster.kubectl("create", "-f", "-", input=json.dumps(obj))


def _exists(cluster: Cluster, *args: str) -> bool:
    return cluster.kubectl("get", *args, "-o", "name", check=False).returncode == 0


def _get(cluster: Cluster, *args: str) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(cluster.kubectl("get", *args, "-o", "json").stdout)
    return result
