"""The policy objects' caches without an API server: discovery decides which kinds are watched,
nothing is answered before every served kind is listed, and CRDs installed later are picked
up. (Against a real API server: tests/e2e/test_policy_objects.py.)"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any, cast

import pytest

from webhook.kube.api import ApiError, KubeApi, Unreachable
from webhook.kube.policywatch import GROUP_PATH, PolicyObjects
from webhook.types import FactsUnavailable

TENANT = {"metadata": {"name": "a", "resourceVersion": "5"}, "spec": {}}


class Stream:
    """A watch that sends the events queued for it, then stays open, quiet, until closed."""

    def __init__(self, events: list[dict[str, Any]] | None = None) -> None:
        self.closed = threading.Event()
        self.events = events if events is not None else []

    def __iter__(self) -> Iterator[dict[str, Any]]:
        while not self.closed.is_set():
            while self.events:
                yield self.events.pop(0)
            self.closed.wait(0.02)

    def close(self) -> None:
        self.closed.set()


class Api:
    def __init__(self, served: list[str] | None, items: Mapping[str, list[Any]]) -> None:
        self.served = served
        self.items = dict(items)
        self.down = False
        self.listing = threading.Event()
        self.listing.set()
        self.events: list[dict[str, Any]] = []

    def request(self, method: str, path: str, **_: Any) -> dict[str, Any]:
        if self.down:
            raise Unreachable("connection refused")
        if path == GROUP_PATH:
            if self.served is None:
                raise ApiError(404, "the server could not find the requested resource")
            return {"resources": [{"name": n} for n in self.served]}
        self.listing.wait(5)
        plural = path.rsplit("/", 1)[1]
        return {"apiVersion": "dragate.io/v1alpha1", "metadata": {"resourceVersion": "9"},
                "items": self.items.get(plural, [])}  # fmt: skip

    def watch(self, *_: Any) -> Stream:
        return Stream(self.events)


def started(api: Api) -> PolicyObjects:
    return PolicyObjects(cast(KubeApi, api), rediscover_seconds=0.05).start()


def eventually(check: Any, seconds: float = 3.0) -> None:
    deadline = time.monotonic() + seconds
    while not check() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert check()


@pytest.mark.parametrize(
    ("served", "kinds"),
    [
        pytest.param(None, [], id="group-not-served"),
        pytest.param(["tenants", "tenants/status"], ["Tenant"], id="only-tenants"),
        pytest.param(
            ["tenants", "deviceclasspolicies", "legacyresourcemappings", "settings"],
            ["Tenant"],
            id="all-kinds",
        ),
    ],
)
def test_served_kinds_are_listed_and_others_hold_nothing(
    served: list[str] | None, kinds: list[str]
) -> None:
    objects = started(Api(served, {"tenants": [TENANT]}))
    try:
        assert objects.wait_synced(3)
        assert [o["kind"] for o in objects.objects()] == kinds
        assert objects.ready() == (True, "policy objects")
    finally:
        objects.stop()


def test_nothing_is_answered_before_every_served_kind_is_listed() -> None:
    api = Api(["tenants"], {"tenants": [TENANT]})
    api.listing.clear()
    objects = started(api)
    try:
        eventually(lambda: objects.discovery.answered)
        with pytest.raises(FactsUnavailable, match="Tenant objects not listed yet"):
            objects.objects()
        assert objects.ready()[0] is False
        before = objects.fingerprint()
        api.listing.set()
        assert objects.wait_synced(3) and objects.fingerprint() != before
    finally:
        objects.stop()


def test_an_unreachable_api_server_is_not_an_empty_cluster() -> None:
    api = Api(["tenants"], {})
    api.down = True
    objects = started(api)
    try:
        assert not objects.wait_synced(0.3)
        with pytest.raises(FactsUnavailable, match=r"not discovered yet.*connection refused"):
            objects.objects()
    finally:
        objects.stop()


def test_crds_installed_later_are_watched_without_a_restart() -> None:
    api = Api(None, {"tenants": [TENANT]})
    objects = started(api)
    try:
        assert objects.wait_synced(3) and objects.objects() == ()
        api.served = ["tenants"]
        eventually(lambda: objects.discovery.served == frozenset({"Tenant"}))
        assert objects.wait_synced(3)
        assert [o["metadata"]["name"] for o in objects.objects()] == ["a"]
    finally:
        objects.stop()


def modified(generation: int, **status: Any) -> dict[str, Any]:
    meta = {"name": "a", "resourceVersion": str(10 + generation + len(status)),
            "generation": generation}  # fmt: skip
    return {"type": "MODIFIED", "object": {"metadata": meta, "spec": {}, "status": status}}


def test_a_status_write_is_no_policy_change_and_a_new_generation_is() -> None:
    api = Api(["tenants"], {"tenants": [{**TENANT, "metadata": {**TENANT["metadata"],
                                                                 "generation": 1}}]})  # fmt: skip
    objects = started(api)
    try:
        assert objects.wait_synced(3)
        before = objects.fingerprint()
        api.events.append(modified(1, usageSummary="gpu.nvidia.com=1/4"))
        eventually(lambda: objects.objects()[0].get("status"))
        assert objects.fingerprint() == before
        api.events.append(modified(2))
        eventually(lambda: objects.objects()[0]["metadata"]["generation"] == 2)
        assert objects.fingerprint() != before
    finally:
        objects.stop()
