"""Bounded work: no policy and no object can make a review run away.

- CEL: every evaluation has a deterministic cost budget (comprehension steps, string and list
  work, see webhook/engine/cel/budget.py), and a stopped `Deny` rule is an explained denial
  ("evaluation stopped: cost limit exceeded ..."), the same on a loaded machine as on an idle one.
- Regexes are RE2: `(a+)+$` against `'a' * 30 + '!'` is linear, not 2^30 steps.
- The apiserver's `?timeout=` bounds the whole review: a slow policy over many requests is
  answered inside it (validation denied, mutation skipped with a warning).
- Bodies above 3 MiB are refused with 413, with or without Content-Length.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from typing import Any

import pytest
from flask.testing import FlaskClient
from reliability.reliability_support import review

from webhook import pipeline
from webhook.admission.app import create_app
from webhook.admission.config import AdmissionOptions
from webhook.admission.reload import PolicyHolder
from webhook.assembly import offline_context
from webhook.engine.cel import compile_expression
from webhook.engine.cel.budget import TIME_GUARD_MESSAGE
from webhook.kube.snapshot import SnapshotState
from webhook.ledger.memory import MemoryLedger
from webhook.pipeline import Context, request_from_object
from webhook.policy.loading import parse_policies
from webhook.types import EvalResult, PolicySet

XS = "[" + ",".join(str(i) for i in range(100)) + "]"
STEPS_RULE = f"cel.bind(xs, {XS}, xs.all(a, xs.all(b, xs.all(c, a + b + c >= 0))))"
"""10^6 comprehension steps: stopped by the cost limit."""
TIME_RULE = (
    f"cel.bind(s, object.metadata.annotations['big'], cel.bind(xs, {XS}, "
    "xs.all(a, xs.all(b, !s.contains(string(a) + '-' + string(b) + '#')))))"
)
"""10^4 steps, each a scan of a 1 MB string: stopped by the cost limit (each scan is charged)."""
CONCAT_RULE = (
    f"cel.bind(s, object.metadata.annotations['big'], cel.bind(xs, {XS}, "
    "xs.all(a, xs.all(b, (s + s + string(a)).size() > 0))))"
)
"""10^4 steps, each concatenating 2 MB of strings (issue 15: 4.9 s per evaluation before)."""
SLOW_XS = "[" + ",".join(str(i) for i in range(170)) + "]"
SLOW_RULE = f"cel.bind(xs, {SLOW_XS}, xs.all(a, xs.all(b, a + b >= 0)))"
"""28,900 cheap steps: inside the cost budget (about 640,000 units), a few tenths of a second."""
POLICY = """\
apiVersion: dragate.io/v1alpha1
kind: Tenant
metadata: {{name: team-a}}
spec:
  namespaces: [team-a]
---
apiVersion: dragate.io/v1alpha1
kind: DeviceClassPolicy
metadata: {{name: pathological}}
spec:
  validations:
  - expression: "{rule}"
    message: pathological rule
    action: Deny
"""


def policies(rule: str) -> PolicySet:
    return parse_policies(POLICY.format(rule=rule.replace('"', '\\"')), "bounded.yaml")


def context_for(rule: str) -> Context:
    chosen = policies(rule)
    return offline_context(lambda: chosen, SnapshotState(), MemoryLedger())


def claim(requests: int = 1, big: int = 1_000_000) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "team-a", "annotations": {"big": "x" * big}},
        "spec": {"devices": {"requests": [
            {"name": f"r{i}", "exactly": {"deviceClassName": "gpu.nvidia.com"}}
            for i in range(requests)
        ]}},
    }  # fmt: skip


@pytest.mark.parametrize(
    ("rule", "stopped_by"),
    [
        (STEPS_RULE, ("cost limit exceeded",)),
        (TIME_RULE, ("cost limit exceeded",)),
        (CONCAT_RULE, ("cost limit exceeded",)),
    ],
    ids=["steps", "scan", "concatenation"],
)
def test_pathological_rule_is_an_explained_denial(rule: str, stopped_by: tuple[str, ...]) -> None:
    """The deterministic cost limit stops each, never the wall-clock guard."""
    context = context_for(rule)
    verdict = pipeline.review(request_from_object(claim()), context)
    assert not verdict.allowed
    message = str(verdict.decision.reasons[0])
    assert "pathological rule" in message and "evaluation stopped" in message
    assert any(limit in message for limit in stopped_by), message
    assert TIME_GUARD_MESSAGE not in message


@pytest.mark.parametrize(
    ("pattern", "subject", "expected"),
    [
        ("(a+)+$", "a" * 30 + "!", EvalResult(value=False)),  # 2^30 steps for a backtracker
        ("(a+)+$", "a" * 200_000 + "!", EvalResult(value=False)),
        ("(?=a)a", "a", EvalResult(error="invalid regex '(?=a)a': invalid perl operator: (?=")),
        ("(a)\\1", "aa", EvalResult(error=r"invalid regex '(a)\\1': invalid escape sequence: \1")),
    ],
    ids=["nested-quantifier", "nested-quantifier-long", "no-lookahead", "no-backreference"],
)
def test_regexes_are_re2(pattern: str, subject: str, expected: EvalResult) -> None:
    """RE2, not a backtracker: linear on `(a+)+$` (a backtracker never returns, and the
    suite's timeout fails the test), and without lookarounds or backreferences."""
    program = compile_expression("s.matches(p)", variables=["s", "p"])
    assert program.evaluate({"s": subject, "p": pattern}) == expected


def _seconds(call: Callable[[], object]) -> float:
    started = time.monotonic()
    call()
    return time.monotonic() - started


@pytest.fixture
def slow_client() -> FlaskClient:
    """The real app over a policy whose rule takes a few tenths of a second per request."""
    chosen = policies(SLOW_RULE)
    holder = PolicyHolder(["unused"], lambda paths: chosen, initial=chosen)
    context = offline_context(holder.get, SnapshotState(), MemoryLedger())
    return create_app(context, holder, AdmissionOptions(), pipeline.review).test_client()


def test_timeout_parameter_bounds_a_slow_policy(slow_client: FlaskClient) -> None:
    """Requests enough for 4 s of CEL (measured here, one request alone) under `?timeout=1s`:
    answered at the 0.8 s budget, not when the work would end.

    (The mutating side evaluates no policy rules; its deadline is tested with a slow double in
    tests/admission/test_admission_server.py.)
    """
    one = _seconds(lambda: pipeline.review(request_from_object(claim(big=0)), context_for(
        SLOW_RULE)))  # fmt: skip
    requests = max(8, math.ceil(4.0 / one))  # at least 4 s of work without the deadline
    body = review(claim(requests=requests, big=0), "slow-uid")
    started = time.monotonic()
    answer = slow_client.post("/validate?timeout=1s", json=body)
    elapsed = time.monotonic() - started
    assert elapsed < 2.0, f"answered after {elapsed:.1f}s: the 0.8s budget did not stop the work"
    assert answer.status_code == 200
    response = answer.get_json()["response"]
    assert response["uid"] == "slow-uid" and response["allowed"] is False
    assert "could not finish the review within 0.8s" in response["status"]["message"]
    assert "timeout" in response["auditAnnotations"]


def test_request_size_cap(slow_client: FlaskClient) -> None:
    limit = AdmissionOptions().max_body_bytes
    assert limit == 3 * 1024 * 1024
    answer = slow_client.post("/validate", data=b"x" * (limit + 1),
                              content_type="application/json")  # fmt: skip
    assert answer.status_code == 413 and "limit" in json.loads(answer.data)["message"]
