"""What a watch cache keeps of an object: everything but `metadata.managedFields`."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from webhook.kube import informer
from webhook.kube.informer import Informer, Resource, without_managed_fields
from webhook.types import Object

MANAGED = [{"manager": "kubectl", "operation": "Apply", "fieldsV1": {"f:spec": {}}}]


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        (
            {"kind": "ResourceClaim", "metadata": {"name": "a", "managedFields": MANAGED}},
            {"kind": "ResourceClaim", "metadata": {"name": "a"}},
        ),
        ({"metadata": {"name": "a", "uid": "u"}}, {"metadata": {"name": "a", "uid": "u"}}),
        ({"metadata": None}, {"metadata": None}),
        ({"spec": {}}, {"spec": {}}),
    ],
    ids=["managed-fields-dropped", "nothing-to-drop", "null-metadata", "no-metadata"],
)
def test_a_cached_object_leaves_out_managed_fields(given: Any, kept: Any) -> None:
    assert without_managed_fields(given) == kept


def test_the_object_sent_is_left_as_it_was() -> None:
    sent = {"metadata": {"name": "a", "managedFields": MANAGED}, "spec": {"x": 1}}
    kept = without_managed_fields(sent)
    assert sent["metadata"]["managedFields"] == MANAGED
    assert kept["spec"] is sent["spec"]  # a shallow copy: nothing but the metadata is copied
    clean = {"metadata": {"name": "a"}}
    assert without_managed_fields(clean) is clean


class Pages:
    """KubeApi's `request` for a list: the given pages of claims, one per call, in order."""

    def __init__(self, *lists: list[Object]) -> None:
        self.lists = list(lists)

    def request(self, method: str, path: str, **_: Any) -> Object:
        items = self.lists.pop(0)
        return {"apiVersion": "resource.k8s.io/v1", "items": items, "metadata": {}}


def _claim(name: str, version: str) -> Object:
    meta = {"name": name, "namespace": "ns", "resourceVersion": version}
    return {"metadata": {**meta, "managedFields": MANAGED}, "spec": {"v": version}}


def test_a_relist_keeps_the_cached_object_of_an_unchanged_resource_version() -> None:
    first = [_claim("same", "1"), _claim("changed", "1"), _claim("gone", "1")]
    second = [_claim("same", "1"), _claim("changed", "2"), _claim("new", "3")]
    cache = Informer(Pages(first, second), Resource("ResourceClaim", "/claims"))  # type: ignore[arg-type]
    cache.relist()
    before = {name: cache.get("ns", name) for name in ("same", "changed")}
    cache.relist()
    assert cache.get("ns", "same") is before["same"]
    changed = cache.get("ns", "changed")
    assert changed is not before["changed"] and changed["spec"] == {"v": "2"}
    assert cache.get("ns", "gone") is None
    new = cache.get("ns", "new")
    assert new["kind"] == "ResourceClaim" and "managedFields" not in new["metadata"]
    assert len(cache.items()) == 3


class EndedWatches:
    """KubeApi for an empty list at resourceVersion 7 and watches the server ends after an
    hour (the clock moves an hour per watch), each counted; the fourth stops the informer."""

    def __init__(self, stop: threading.Event) -> None:
        self.stop = stop
        self.lists = 0
        self.watched_from: list[str] = []
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def request(self, method: str, path: str, **_: Any) -> Object:
        self.lists += 1
        return {"apiVersion": "v1", "items": [], "metadata": {"resourceVersion": "7"}}

    def watch(self, path: str, resource_version: str, seconds: int, selector: str = "") -> Any:
        self.watched_from.append(resource_version)
        self.now += 3600.0
        if len(self.watched_from) == 4:
            self.stop.set()
        return Ended()


class Ended:
    """A watch the server ended without an event."""

    def __iter__(self) -> Any:
        return iter(())

    def close(self) -> None:
        pass


def test_ended_watches_resume_from_the_listed_version_without_a_relist(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As client-go's reflector: a list only when a watch cannot resume, never on a timer."""
    stop = threading.Event()
    api = EndedWatches(stop)
    monkeypatch.setattr(informer, "time", api)  # hours pass between watches
    cache = Informer(api, Resource("ResourceClaim", "/claims"))  # type: ignore[arg-type]
    cache.run(stop)
    assert api.lists == 1 and cache.relists == 1
    assert api.watched_from == ["7", "7", "7", "7"]
