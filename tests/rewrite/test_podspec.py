"""`asks_legacy`: validation asks it of every Pod, so it must be cheap and agree with the
rewrite: a pod spec it says no to comes out of the rewrite unchanged, without a template or
a denial."""

from __future__ import annotations

from typing import Any

import pytest
from pod_corpus import corpus_pods

from webhook.policy.loading import default_mappings
from webhook.rewrite import rewrite_object
from webhook.rewrite.podspec import asks_legacy

GPU = {"nvidia.com/gpu": 1}
SPECS: dict[str, tuple[Any, bool]] = {
    "gpu-limit": ({"containers": [{"name": "a", "resources": {"limits": GPU}}]}, True),
    "gpu-request": ({"containers": [{"name": "a", "resources": {"requests": GPU}}]}, True),
    "mig-prefix": (
        {"containers": [{"resources": {"limits": {"nvidia.com/mig-1g.10gb": 1}}}]},
        True,
    ),
    "init-only": ({"initContainers": [{"resources": {"limits": GPU}}], "containers": []}, True),
    "second-container": (
        {"containers": [{"resources": {"limits": {"cpu": "1"}}}, {"resources": {"limits": GPU}}]},
        True,
    ),
    "cpu-only": ({"containers": [{"resources": {"limits": {"cpu": "1"}}}]}, False),
    "prefix-alone": ({"containers": [{"resources": {"limits": {"nvidia.com/mig-": 1}}}]}, False),
    "ephemeral": ({"ephemeralContainers": [{"resources": {"limits": GPU}}]}, False),
    "no-resources": ({"containers": [{"name": "a"}]}, False),
    "resources-not-a-map": ({"containers": [{"resources": ["nvidia.com/gpu"]}]}, False),
    "limits-not-a-map": ({"containers": [{"resources": {"limits": ["nvidia.com/gpu"]}}]}, False),
    "container-not-a-map": ({"containers": ["nvidia.com/gpu"]}, False),
    "containers-not-a-list": ({"containers": {"a": {"resources": {"limits": GPU}}}}, False),
    "spec-not-a-map": (["nvidia.com/gpu"], False),
    "int-key": ({"containers": [{"resources": {"limits": {1: 1}}}]}, False),
}


@pytest.mark.parametrize(("spec", "asks"), SPECS.values(), ids=SPECS.keys())
def test_asks_legacy(spec: Any, asks: bool) -> None:
    assert asks_legacy(spec, default_mappings()) is asks


def test_a_spec_that_asks_nothing_is_not_rewritten() -> None:
    for where, pod in corpus_pods():
        if asks_legacy(pod.get("spec"), default_mappings()):
            continue
        result = rewrite_object(pod, default_mappings())
        assert not (result.changed or result.templates or result.denied), where
