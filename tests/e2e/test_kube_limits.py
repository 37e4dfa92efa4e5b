"""The real kube-apiserver refuses what webhook/pipeline/limits.py refuses, and stores what it
lets through: every case of tests/kube_limits_cases.py, with no webhook registered (so the
answer is the API server's own).

Validation limits are asked with `kubectl create --dry-run=server`. The size limit is
etcd's (`--max-request-bytes`, 1.5 MiB by default), met only by a real write, so those
objects are created (and deleted again). What etcd measures is the stored object: defaulted,
with its managedFields, encoded as protobuf, strings unescaped. A Pod of one container is
stored at about its JSON size (so just under the limit is stored and just over refused), a
Pod whose JSON is mostly escaped quotation marks is stored at half its JSON size, and a Pod of
many small containers grows in storage (one of 17,000 GPU containers, 1.45 MiB of JSON, is
refused): the limit refuses only what etcd would refuse too.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from kube_limits_cases import CASES, LEGACY_CONTAINERS, SIZE_CASES, legacy_pod

from .cluster import Cluster

pytestmark = pytest.mark.e2e
ORACLE = {k: v for k, v in CASES.items() if not k.startswith("malformed")}
STORED = {**SIZE_CASES, "legacy-pod-of-34000-gpu-containers": (legacy_pod(LEGACY_CONTAINERS), "")}


@pytest.mark.parametrize(("obj", "words"), ORACLE.values(), ids=ORACLE.keys())
def test_the_api_server_agrees(cluster: Cluster, obj: dict[str, Any], words: str | None) -> None:
    result = cluster.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(obj),
                             check=False)  # fmt: skip
    assert (result.returncode == 0) is (words is None), result.stderr


@pytest.mark.parametrize(("obj", "words"), STORED.values(), ids=STORED.keys())
def test_etcd_stores_what_the_size_limit_lets_through(
    cluster: Cluster, obj: dict[str, Any], words: str | None
) -> None:
    name = f"pod/{obj['metadata']['name']}"
    result = cluster.kubectl("create", "-f", "-", input=json.dumps(obj), check=False)
    try:
        assert (result.returncode == 0) is (words is None), result.stderr
        if words is not None:
            assert "too large" in result.stderr or "larger than max" in result.stderr
    finally:
        cluster.kubectl("delete", name, "--ignore-not-found", "--wait=false", check=False)
