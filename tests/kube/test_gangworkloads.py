"""Gang workloads and their Pods, listed for the reconciler's truth (`kube.gangworkloads`)."""

from __future__ import annotations

from typing import Any, cast

import pytest

from webhook.kube.api import ApiError, KubeApi, Unreachable
from webhook.kube.gangworkloads import get_workload, list_workloads
from webhook.types import FactsUnavailable

JOB = {"metadata": {"name": "train", "namespace": "a", "uid": "j1"}}
POD = {"metadata": {"name": "train-x", "namespace": "a", "uid": "p1"}}


class Api:
    """Lists by path and label selector, in pages of one; some paths fail."""

    def __init__(self, failures: dict[str, Exception] | None = None) -> None:
        self.failures = failures or {}
        self.asked: list[tuple[str, str]] = []
        self.lists = {"/apis/batch/v1/jobs": [JOB, {**JOB, "metadata": {"name": "b"}}]}

    def request(self, method: str, path: str, *, query: Any = None, **_: Any) -> dict[str, Any]:
        assert method == "GET"
        selector = (query or {}).get("labelSelector", "")
        self.asked.append((path, selector))
        if path in self.failures:
            raise self.failures[path]
        items = [POD] if path == "/api/v1/pods" else self.lists.get(path, [])
        start = int((query or {}).get("continue") or 0)
        more = {"continue": str(start + 1)} if start + 1 < len(items) else {}
        return {"items": items[start : start + 1], "metadata": more}


def listed(api: Api) -> list[tuple[str, str]]:
    found = list_workloads(cast(KubeApi, api))
    return [(o["kind"], o["metadata"]["name"]) for o in found]


def test_workloads_and_labelled_pods_are_listed_page_by_page_each_pod_once() -> None:
    api = Api()
    assert listed(api) == [("Job", "train"), ("Job", "b"), ("Pod", "train-x")]
    selectors = {s for p, s in api.asked if p == "/api/v1/pods"}
    assert selectors == {"batch.kubernetes.io/job-name", "leaderworkerset.sigs.k8s.io/name"}


JOBSETS = "/apis/jobset.x-k8s.io/v1alpha2/jobsets"
FAILURES = [
    pytest.param({JOBSETS: ApiError(404, "not found")}, None, id="crd-absent-is-skipped"),
    pytest.param({JOBSETS: ApiError(403, "forbidden")}, "forbidden", id="forbidden"),
    pytest.param({"/api/v1/pods": Unreachable("reset")}, "reset", id="unreachable"),
]


@pytest.mark.parametrize(("failures", "raised"), FAILURES)
def test_a_failure_makes_the_list_unavailable_but_an_absent_crd(
    failures: dict[str, Exception], raised: str | None
) -> None:
    if raised is None:
        assert ("Job", "train") in listed(Api(failures))
        return
    with pytest.raises(FactsUnavailable, match=raised):
        listed(Api(failures))


PODGROUPS = "/apis/scheduling.k8s.io/v1beta1/podgroups"
GROUP = {"metadata": {"name": "pg", "namespace": "b", "uid": "g1"}}
LONE = {"metadata": {"name": "lone", "namespace": "b", "uid": "p2"}}


def test_podgroups_and_every_pod_of_their_namespaces_are_listed() -> None:
    """A Pod names its PodGroup in its spec, which no selector reaches: the Pods of each
    namespace with a PodGroup are all listed, each once."""
    api = Api()
    api.lists[PODGROUPS] = [GROUP]
    api.lists["/api/v1/namespaces/b/pods"] = [LONE, POD]
    assert listed(api) == [
        ("Job", "train"), ("Job", "b"), ("PodGroup", "pg"), ("Pod", "train-x"), ("Pod", "lone")
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("failures", "found"),
    [
        ({}, "pg"),
        ({"/apis/scheduling.k8s.io/v1beta1/namespaces/b/podgroups/pg": ApiError(404, "")}, None),
    ],
    ids=["found", "absent-or-not-served"],
)
def test_one_podgroup_is_read(failures: dict[str, Exception], found: str | None) -> None:
    api = Api(failures)
    api.lists["/apis/scheduling.k8s.io/v1beta1/namespaces/b/podgroups/pg"] = [GROUP]
    api.request = _get(api)  # type: ignore[method-assign]
    got = get_workload(cast(KubeApi, api), "b", "PodGroup", "pg")
    assert (got["metadata"]["name"] if got else None) == found
    assert got is None or got["kind"] == "PodGroup"


def test_a_podgroup_that_cannot_be_read_is_unavailable() -> None:
    path = "/apis/scheduling.k8s.io/v1beta1/namespaces/b/podgroups/pg"
    api = Api({path: ApiError(403, "forbidden")})
    with pytest.raises(FactsUnavailable, match="forbidden"):
        get_workload(cast(KubeApi, api), "b", "PodGroup", "pg")


def _get(api: Api) -> Any:
    """GET of one object: the first item listed under its path."""
    listing = api.request

    def request(method: str, path: str, **kw: Any) -> dict[str, Any]:
        return dict(listing(method, path, **kw)["items"][0])

    return request
