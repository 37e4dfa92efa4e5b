"""The legacy rewrite and the admission around it do work linear in the number of containers.

Work is counted, not timed: every Python and C function call made while admitting a Pod
(`sys.setprofile` events), so the test means the same on a loaded CI machine. A Pod with 4x
the containers must cost about 4x the calls; the quadratic rewrite this replaces cost ~14x
(same-named containers made every claim name probe all earlier ones, and the JSON patch's list
diff compared every container with every other).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

import pytest

from webhook.assembly import offline_context
from webhook.cli.inputs import policy_set, snapshot
from webhook.pipeline import admit, request_from_object
from webhook.policy.loading import default_mappings
from webhook.rewrite import rewrite_object

SMALL, LARGE = 250, 1000
MOST_GROWTH = 4.4  # linear is 4.0 (+ constant costs); quadratic would be ~16


def legacy_pod(containers: int, *, init: bool) -> dict[str, Any]:
    def container(name: str) -> dict[str, Any]:
        return {"name": name, "image": "x", "resources": {"limits": {"nvidia.com/gpu": 1}}}

    spec: dict[str, Any] = {"containers": [container("c") for _ in range(containers)]}
    if init:
        spec["initContainers"] = [container("i") for _ in range(containers)]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ml-research"},
        "spec": spec,
    }


def calls(work: Callable[[], object]) -> int:
    count = 0

    def profile(frame: FrameType, event: str, arg: object) -> None:
        nonlocal count
        count += 1

    sys.setprofile(profile)
    try:
        work()
    finally:
        sys.setprofile(None)
    return count


def rewrite_only(containers: int, init: bool) -> Callable[[], object]:
    pod = legacy_pod(containers, init=init)
    return lambda: rewrite_object(pod, default_mappings())


def whole_admission(containers: int, init: bool) -> Callable[[], object]:
    pod = legacy_pod(containers, init=init)
    policies = policy_set(None)
    context = offline_context(lambda: policies, snapshot(None))
    return lambda: admit(request_from_object(pod), context)


@pytest.mark.parametrize("init", [False, True], ids=["containers", "with-init-containers"])
@pytest.mark.parametrize("work", [rewrite_only, whole_admission], ids=["rewrite", "admit"])
def test_work_grows_linearly_with_same_named_containers(
    work: Callable[[int, bool], Callable[[], object]], init: bool
) -> None:
    small, large = calls(work(SMALL, init)), calls(work(LARGE, init))
    growth = large / small
    assert growth <= MOST_GROWTH, f"{SMALL} -> {LARGE} containers: {small} -> {large} calls"
