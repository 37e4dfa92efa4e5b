"""Limits Kubernetes validates, refused before any review work (webhook/admission/bounds.py).

The real kube-apiserver is the oracle for the same objects in tests/e2e/test_kube_limits.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from kube_limits_cases import CASES, pod

from webhook.admission.bounds import POLICY, problems, refusal
from webhook.types import AdmissionRequest, Operation


@pytest.mark.parametrize(("obj", "words"), CASES.values(), ids=CASES.keys())
def test_problems(obj: dict[str, Any], words: str | None) -> None:
    found = list(problems(obj["kind"], obj))
    if words is None:
        assert found == []
    else:
        assert found and words in found[0], found


def _request(obj: dict[str, Any]) -> AdmissionRequest:
    return AdmissionRequest(uid="u", kind=obj["kind"], group="", version="v1", resource="x",
                            operation=Operation.CREATE, namespace="default", name="n",
                            object=obj)  # fmt: skip


def test_refusal_is_an_explained_denial() -> None:
    verdict = refusal(_request(pod(["c"] * 4000)))
    assert verdict is not None and not verdict.allowed
    reason = verdict.decision.reasons[0]
    assert reason.policy == POLICY and "Kubernetes refuses this object anyway" in reason.message
    assert refusal(_request(pod(["a", "b"]))) is None
