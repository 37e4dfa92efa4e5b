"""The real kube-apiserver refuses what webhook/admission/bounds.py refuses, and stores what it
lets through: every case of tests/kube_limits_cases.py, by `kubectl create --dry-run=server`
with no webhook registered (so the answer is the API server's own validation)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kube_limits_cases import CASES

from .cluster import Cluster

pytestmark = pytest.mark.e2e
ORACLE = {k: v for k, v in CASES.items() if not k.startswith("malformed")}


@pytest.mark.parametrize(("obj", "words"), ORACLE.values(), ids=ORACLE.keys())
def test_the_api_server_agrees(cluster: Cluster, obj: dict[str, Any], words: str | None) -> None:
    result = cluster.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(obj),
                             check=False)  # fmt: skip
    assert (result.returncode == 0) is (words is None), result.stderr
