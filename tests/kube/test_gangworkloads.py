"""Gang workloads and their Pods, listed for the reconciler's truth (`kube.gangworkloads`)."""

from __future__ import annotations

from typing import Any, cast

import pytest

from webhook.kube.api import ApiError, KubeApi, Unreachable
from webhook.kube.gangworkloads import list_workloads
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
