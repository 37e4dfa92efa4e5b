"""Limits Kubernetes enforces, refused by the pipeline before any review work
(webhook/pipeline/limits.py): the webhook, `dragate check`, `dragate test` and the audit alike.

The real kube-apiserver is the oracle for the same objects in tests/e2e/test_kube_limits.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from big_review_support import POLICIES
from kube_limits_cases import CASES, LEGACY_CONTAINERS, SIZE_CASES, claim, legacy_pod, pod

from webhook.kube.snapshot import SnapshotState
from webhook.ledger.memory import MemoryLedger
from webhook.pipeline import Context, admit, request_from_object, review
from webhook.pipeline.audit import audit
from webhook.pipeline.limits import POLICY, problems, refusal, stored_size
from webhook.types import Deadline
from webhook.types.kubelimits import DEVICE_REQUESTS_MAX, OBJECT_BYTES_MAX

ALL_CASES = {**CASES, **SIZE_CASES}


def _context() -> Context:
    return Context(policies=lambda: POLICIES, state=SnapshotState([]), ledger=MemoryLedger())


@pytest.mark.parametrize(("obj", "words"), ALL_CASES.values(), ids=ALL_CASES.keys())
def test_problems(obj: dict[str, Any], words: str | None) -> None:
    found = list(problems(obj["kind"], obj))
    if words is None:
        assert found == []
    else:
        assert found and words in found[0], found


@pytest.mark.parametrize("kind", ["ResourceClaim", "ResourceClaimTemplate"])
def test_a_claim_is_not_searched_for_pod_specs(kind: str) -> None:
    """A claim's schema holds no pod spec: a `containers` list in a field it does not have
    (which the API server drops) is not read as one, while a workload's would be."""
    obj = claim()
    obj["kind"] = kind
    obj["spec"]["extra"] = {"containers": [{"name": "a"}, {"name": "a"}]}
    assert list(problems(kind, obj)) == []
    assert list(problems("Deployment", {**obj, "kind": "Deployment"}))


def test_refusal_is_an_explained_denial() -> None:
    verdict = refusal(request_from_object(pod(["c"] * 4000)))
    assert verdict is not None and not verdict.allowed
    reason = verdict.decision.reasons[0]
    assert reason.policy == POLICY and "Kubernetes refuses this object anyway" in reason.message
    assert refusal(request_from_object(pod(["a", "b"]))) is None


SIZES = {
    # id: (object, its stored size)
    "plain": ({"a": "bc"}, len('{"a":"bc"}')),
    "escaped-quote-counted-once": ({"a": 'b"c'}, len('{"a":"b"c"}')),
    "newline-counted-once": ({"a": "b\nc"}, len('{"a":"b\nc"}')),
    "non-ascii-as-utf8": ({"a": "é"}, len('{"a":"é"}'.encode())),
    "integer-past-64-bits": ({"a": 2**70}, len('{"a":' + str(2**70) + "}")),
    "status-left-to-the-api-server": ({"a": 1, "status": {"b": 2}}, len('{"a":1}')),
    "managed-fields-left-too": (
        {"metadata": {"name": "n", "managedFields": [{"manager": "kubectl"}]}},
        len('{"metadata":{"name":"n"}}'),
    ),
}


@pytest.mark.parametrize(("obj", "size"), SIZES.values(), ids=SIZES.keys())
def test_stored_size(obj: dict[str, Any], size: int) -> None:
    assert stored_size(obj) == size


def test_an_object_nested_past_every_encoder_has_no_size() -> None:
    deep: dict[str, Any] = {}
    for _ in range(100_000):
        deep = {"a": deep}
    assert stored_size(deep) is None


HUGE = legacy_pod(LEGACY_CONTAINERS)


@pytest.mark.parametrize("mutate", [True, False], ids=["mutate", "validate"])
def test_a_pod_etcd_could_never_store_is_denied_before_any_work(mutate: bool) -> None:
    """No time at all is left: only a review that does no work can answer."""
    spent = Deadline.after(0.0)
    verdict = review(request_from_object(HUGE), _context(), mutate=mutate, deadline=spent)
    assert not verdict.allowed and verdict.patched is None
    message = verdict.decision.reasons[0].message
    assert f"more than the {OBJECT_BYTES_MAX:,} bytes" in message
    assert f"{stored_size(HUGE):,} bytes as JSON" in message


def test_check_and_test_meet_the_same_denial() -> None:
    applied = admit(request_from_object(pod(["c"] * 4000, gpus=1)), _context())
    assert not applied.decision.allowed and applied.validation is None
    assert applied.decision.reasons[0].policy == POLICY


def test_the_audit_meets_the_same_denial() -> None:
    over, within = claim(DEVICE_REQUESTS_MAX + 1), claim(DEVICE_REQUESTS_MAX)
    over["metadata"]["name"], within["metadata"]["name"] = "over", "within"
    results = {(r.name, r.policy): r.result for r in audit([over, within], _context())}
    assert results[("over", POLICY)] == "fail"
    assert ("within", POLICY) not in results and ("within", "dragate") in results
