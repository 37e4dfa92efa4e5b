"""`Admitter`: the deadline it builds carries its clock and pause into the review, a review
out of time inside long work is answered as a timeout, and the pipeline's limits refusal
reaches the webhook's reply.

The real pipeline; time is a fake clock that advances a fixed tick at every read.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from big_review_support import POLICIES, TICK, TickingClock, roomy_context
from kube_limits_cases import LEGACY_CONTAINERS, legacy_pod, pod

from webhook import pipeline
from webhook.admission.app import create_app
from webhook.admission.config import AdmissionOptions
from webhook.admission.handler import Admitter
from webhook.admission.reload import PolicyHolder
from webhook.pipeline import Context, request_from_object
from webhook.types import Deadline, Decision, PolicySet, Verdict
from webhook.types.kubelimits import OBJECT_BYTES_MAX

OUTCOMES = {
    # id: (mutate, allowed, words of the answer)
    "mutate-fails-open": (True, True, "mutation skipped"),
    "validate-denies": (False, False, "could not finish the review"),
}


@pytest.mark.parametrize(("mutate", "allowed", "words"), OUTCOMES.values(), ids=OUTCOMES.keys())
def test_a_huge_pod_out_of_time_inside_its_rewrite_is_a_timeout(
    mutate: bool, allowed: bool, words: str
) -> None:
    clock = TickingClock()
    admitter = Admitter(roomy_context(), AdmissionOptions(), pipeline.review, clock=clock)
    huge = pod([f"h{int(mutate)}-{i}" for i in range(17_000)], gpus=1)
    admitted = admitter.admit(request_from_object(huge), mutate=mutate, budget=50 * TICK)
    response = admitted.reply["response"]
    assert response["allowed"] is allowed
    assert words in str(response), response
    assert clock.reads < 100  # stopped a few containers past the deadline


def test_the_admitters_pause_reaches_the_reviews_deadline() -> None:
    seen: list[Deadline] = []

    def reviewer(request: Any, context: Context, *, mutate: bool, deadline: Deadline) -> Verdict:
        seen.append(deadline)
        return Verdict(Decision())

    def pause() -> None:
        """Stands for the server's cooperative yield."""

    Admitter(roomy_context(), AdmissionOptions(), reviewer, pause=pause).admit(
        request_from_object(pod(["a"])), mutate=False, budget=1.0
    )
    assert seen[0].pause is pause


@pytest.mark.parametrize("path", ["/mutate", "/validate"])
def test_an_object_etcd_could_never_store_is_denied_by_the_webhook(path: str) -> None:
    chosen: PolicySet = POLICIES
    holder = PolicyHolder(["unused"], lambda paths: chosen, initial=chosen)
    client = create_app(roomy_context(), holder, AdmissionOptions(), pipeline.review).test_client()
    obj = legacy_pod(LEGACY_CONTAINERS)
    request = {
        "uid": "huge", "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "operation": "CREATE", "namespace": "default", "name": obj["metadata"]["name"],
        "object": obj, "userInfo": {"username": "alice"},
    }  # fmt: skip
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    body = orjson.dumps(review)  # compact: under the 3 MiB body limit
    answer = client.post(path, data=body, content_type="application/json").get_json()["response"]
    assert answer["allowed"] is False and answer.get("patch") is None
    assert f"more than the {OBJECT_BYTES_MAX:,} bytes" in answer["status"]["message"]
