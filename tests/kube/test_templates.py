"""TemplateKeeper decisions against an in-memory TemplateStore (the real one: tests/e2e)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from webhook.kube.api import Unreachable
from webhook.kube.templates import TemplateKeeper, desired
from webhook.types import (
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    FactsUnavailable,
    Object,
    PolicySet,
    Tenant,
)

POLICIES = PolicySet(tenants=(Tenant("a", namespaces=frozenset({"team-a"})),))


class Store:
    """Caches and API in one dict each; `failures` POSTs fail before one succeeds."""

    def __init__(self) -> None:
        self.cached: dict[tuple[str, str], Object] = {}
        self.namespaces: dict[str, Object] = {"team-a": _ns("team-a"), "free": _ns("free")}
        self.posted: list[Object] = []
        self.failures = 0
        self.synced = True

    def template(self, namespace: str, name: str) -> Object | None:
        self._check()
        return self.cached.get((namespace, name))

    def templates(self) -> Sequence[Object]:
        self._check()
        return list(self.cached.values())

    def namespace(self, name: str) -> Object | None:
        self._check()
        return self.namespaces.get(name)

    def read_namespace(self, name: str, timeout: float) -> Object | None:
        return self.namespaces.get(name)

    def post_template(self, namespace: str, template: Object, timeout: float) -> None:
        if self.failures:
            self.failures -= 1
            raise Unreachable("connection refused")
        self.posted.append(template)
        self.cached[(namespace, template["metadata"]["name"])] = template

    def _check(self) -> None:
        if not self.synced:
            raise FactsUnavailable("not synced")


def _ns(name: str, **meta: Any) -> Object:
    return {"metadata": {"name": name, **meta}}


def _template(namespace: str, name: str = "gpu-1", managed: bool = True) -> dict[str, Any]:
    labels = {MANAGED_BY_LABEL: MANAGED_BY_VALUE} if managed else {}
    meta = {"name": name, "namespace": namespace, "labels": labels, "uid": "u1"}
    return {"metadata": {**meta, "resourceVersion": "7"}, "spec": {"spec": {}}}


@pytest.fixture
def store() -> Store:
    return Store()


def _keeper(store: Store) -> TemplateKeeper:
    return TemplateKeeper(store, lambda: POLICIES, max_delay=0.01)


def test_deleted_managed_template_is_posted_without_server_fields(store: Store) -> None:
    keeper = _keeper(store)
    keeper.observe("DELETED", _template("team-a"))
    keeper.restore_due()
    assert store.posted == [desired(_template("team-a"))]
    assert "uid" not in store.posted[0]["metadata"]
    assert "resourceVersion" not in store.posted[0]["metadata"]
    assert keeper.pending() == 0


def test_failures_are_retried_with_backoff(store: Store) -> None:
    keeper = _keeper(store)
    store.failures = 2
    keeper.observe("DELETED", _template("team-a"))
    keeper.restore_due()
    assert keeper.pending() == 1 and "Unreachable" in keeper.last_error
    for _ in range(50):
        if not keeper.pending():
            break
        keeper.restore_due()
        time.sleep(0.01)
    assert len(store.posted) == 1 and keeper.restored == 1


@pytest.mark.parametrize(
    "namespace",
    [
        _ns("team-a", deletionTimestamp="2025-01-01T00:00:00Z"),
        {**_ns("team-a"), "status": {"phase": "Terminating"}},
    ],
)
def test_terminating_namespace_is_not_fought(store: Store, namespace: Object) -> None:
    store.namespaces["team-a"] = namespace
    keeper = _keeper(store)
    keeper.observe("DELETED", _template("team-a"))
    keeper.restore_due()
    assert store.posted == [] and keeper.pending() == 0
    assert keeper.sweep() == 0


def test_no_tenant_unmanaged_and_present_are_left_alone(store: Store) -> None:
    keeper = _keeper(store)
    keeper.observe("DELETED", _template("free"))
    keeper.observe("DELETED", _template("team-a", "mine", managed=False))
    store.cached[("team-a", "back")] = _template("team-a", "back")
    keeper.observe("DELETED", _template("team-a", "back"))
    keeper.restore_due()
    assert store.posted == []


def test_label_removed_means_forgotten(store: Store) -> None:
    keeper = _keeper(store)
    keeper.observe("ADDED", _template("team-a"))
    keeper.observe("MODIFIED", _template("team-a", managed=False))
    assert keeper.sweep() == 0


def test_sweep_remembers_restores_and_forgets_gone_namespaces(store: Store) -> None:
    keeper = _keeper(store)
    store.cached = {("team-a", "gpu-1"): _template("team-a"), ("gone", "x"): _template("gone", "x")}
    store.namespaces["gone"] = _ns("gone")
    assert keeper.sweep() == 0
    store.cached = {}
    del store.namespaces["gone"]
    assert keeper.sweep() == 1
    keeper.restore_due()
    assert [t["metadata"]["name"] for t in store.posted] == ["gpu-1"]
    assert ("gone", "x") not in keeper._known


def test_sweep_refuses_unsynced_caches(store: Store) -> None:
    keeper = _keeper(store)
    keeper.observe("ADDED", _template("team-a"))
    store.synced = False
    with pytest.raises(FactsUnavailable):
        keeper.sweep()


def test_started_keeper_restores_on_its_own_and_stops(store: Store) -> None:
    keeper = _keeper(store).start()
    try:
        keeper.observe("DELETED", _template("team-a"))
        for _ in range(200):
            if store.posted:
                break
            time.sleep(0.01)
        assert len(store.posted) == 1
    finally:
        keeper.stop(timeout=1)
    assert keeper._thread is not None and not keeper._thread.is_alive()


@pytest.mark.parametrize(
    ("leading", "posted"), [(False, 0), (True, 1)], ids=["a-follower-waits", "the-leader-restores"]
)
def test_only_the_leader_restores_and_a_new_leader_restores_what_it_heard(
    store: Store, leading: bool, posted: int
) -> None:
    """Every replica hears the deletion; the Lease holder alone re-creates it, and a replica
    that takes the Lease over re-creates what it heard deleted while it followed."""
    lead = [leading]
    keeper = TemplateKeeper(store, lambda: POLICIES, max_delay=0.01, leading=lambda: lead[0])
    keeper.start()
    try:
        keeper.observe("DELETED", _template("team-a"))
        _wait_until(lambda: bool(store.posted), 0.3)
        assert len(store.posted) == posted
        lead[0] = True
        keeper.wake()  # as Leadership.on_change does
        assert _wait_until(lambda: bool(store.posted), 1.0)
        assert store.posted == [desired(_template("team-a"))]
    finally:
        keeper.stop(timeout=1)


def _wait_until(condition: Callable[[], bool], seconds: float) -> bool:
    ends = time.monotonic() + seconds
    while not condition() and time.monotonic() < ends:
        time.sleep(0.01)
    return condition()
