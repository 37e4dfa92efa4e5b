"""The deadline is passed down: a review runs in the request's thread, and one whose time runs
out stops before any step that changes state, so nothing is reserved or created after (or
because of) an answer that said "timeout".

The real pipeline and ledgers; the slowness comes from our own ClusterState adapter, the
boundary where a slow API server or a stalled cache would show.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient

from webhook import pipeline
from webhook.admission.app import create_app
from webhook.admission.config import AdmissionOptions
from webhook.admission.reload import PolicyHolder
from webhook.admission.routes import ARRIVED
from webhook.kube.snapshot import SnapshotState
from webhook.ledger.memory import MemoryLedger
from webhook.ledger.sqlite import SqliteLedger
from webhook.pipeline import Context
from webhook.policy.loading import parse_policies
from webhook.types import Ledger, Object, PolicySet

POLICIES = parse_policies(
    """
apiVersion: dragate.io/v1alpha1
kind: Tenant
metadata: {name: team-a}
spec:
  namespaces: [team-a]
  quota:
  - {deviceClassName: gpu.nvidia.com, maxDevices: 4}
""",
    "inline.yaml",
)
SLOW_SECONDS = 0.3
TIMEOUT = "100ms"  # with no margin: a 0.1 s budget, passed long before the slow read returns


class SlowState(SnapshotState):
    """Our ClusterState adapter answering a namespace read late; records when it returned."""

    def __init__(self) -> None:
        super().__init__()
        self.returned = threading.Event()

    def namespace(self, name: str) -> Object | None:
        time.sleep(SLOW_SECONDS)
        self.returned.set()
        return super().namespace(name)


class Templates:
    """A TemplateSink that records what it was asked to create, and in how many seconds."""

    def __init__(self) -> None:
        self.created: list[Object] = []
        self.seconds: list[float] = []

    def __call__(self, namespace: str, templates: Any, dry_run: bool, seconds: float) -> None:
        self.created.extend(templates)
        self.seconds.append(seconds)


def _claim() -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "late", "namespace": "team-a"},
        "spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 2}}
        ]}},
    }  # fmt: skip


def _legacy_pod() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "late", "namespace": "team-a", "uid": "u-1"},
        "spec": {"containers": [
            {"name": "c", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": 2}}}
        ]},
    }  # fmt: skip


def _review(obj: dict[str, Any], resource: str) -> dict[str, Any]:
    meta = obj["metadata"]
    group, _, version = obj["apiVersion"].rpartition("/")
    request = {
        "uid": "deadline-uid",
        "kind": {"group": group, "version": version, "kind": obj["kind"]},
        "resource": {"group": group, "version": version, "resource": resource},
        "operation": "CREATE",
        "namespace": meta["namespace"],
        "name": meta["name"],
        "object": obj,
        "userInfo": {"username": "alice"},
    }
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def _client(ledger: Ledger, state: SnapshotState, templates: Templates) -> FlaskClient:
    chosen: PolicySet = POLICIES
    holder = PolicyHolder(["unused"], lambda paths: chosen, initial=chosen)
    context = Context(policies=holder.get, state=state, ledger=ledger, templates=templates)
    options = AdmissionOptions(timeout_margin=0.0)
    return create_app(context, holder, options, pipeline.review).test_client()


LEDGERS: list[Any] = [
    pytest.param(lambda tmp: MemoryLedger(), id="memory"),
    pytest.param(lambda tmp: SqliteLedger(str(tmp / "ledger.db")), id="sqlite"),
]


@pytest.mark.parametrize("make_ledger", LEDGERS)
def test_a_review_out_of_time_before_the_ledger_reserves_nothing(
    make_ledger: Callable[[Path], Ledger], tmp_path: Path
) -> None:
    ledger, state = make_ledger(tmp_path), SlowState()
    client = _client(ledger, state, Templates())
    answer = client.post(f"/validate?timeout={TIMEOUT}", json=_review(_claim(), "resourceclaims"))
    assert state.returned.is_set(), "answered while the review was still running"
    response = answer.get_json()["response"]
    assert response["allowed"] is False
    assert "could not finish the review" in response["status"]["message"]
    assert "timeout" in response["auditAnnotations"]
    assert ledger.usage("team-a") == {}


def test_the_deadline_counts_from_the_requests_arrival() -> None:
    """`?timeout=10s` for a request that arrived 9.9 s ago (its body slow to come): the review
    has what is left, not 10 s, and says it could not finish within the API server's 10 s."""
    ledger, state = MemoryLedger(), SlowState()
    client = _client(ledger, state, Templates())
    arrived = {ARRIVED: time.monotonic() - 9.9}
    answer = client.post("/validate?timeout=10s", json=_review(_claim(), "resourceclaims"),
                         environ_overrides=arrived)  # fmt: skip
    response = answer.get_json()["response"]
    assert response["allowed"] is False, response
    assert "could not finish the review within 10.0s" in response["status"]["message"]
    assert ledger.usage("team-a") == {}


def test_a_mutation_out_of_time_creates_no_template(tmp_path: Path) -> None:
    state, templates = SlowState(), Templates()
    client = _client(MemoryLedger(), state, templates)
    answer = client.post(f"/mutate?timeout={TIMEOUT}", json=_review(_legacy_pod(), "pods"))
    assert state.returned.is_set(), "answered while the review was still running"
    response = answer.get_json()["response"]
    assert response["allowed"] is True and "patch" not in response
    assert any("mutation skipped" in w for w in response["warnings"])
    assert templates.created == []


def test_in_time_the_same_review_reserves(tmp_path: Path) -> None:
    """The control: with time to spare, the slow read is waited for and the claim reserved."""
    ledger = MemoryLedger()
    client = _client(ledger, SlowState(), Templates())
    answer = client.post("/validate?timeout=10s", json=_review(_claim(), "resourceclaims"))
    assert answer.get_json()["response"]["allowed"] is True
    assert ledger.usage("team-a")["gpu.nvidia.com"].used == 2


@pytest.mark.parametrize(
    ("timeout", "budget"), [("10s", 10.0), ("2s", 2.0)], ids=["10s", "the chart's 2s"]
)
def test_in_time_the_same_mutation_creates_its_template_within_what_is_left(
    timeout: str, budget: float
) -> None:
    """The template sink is told what the review has left (the slow read took some of it),
    so creating a template never outlasts the API server's own wait for the answer."""
    templates = Templates()
    client = _client(MemoryLedger(), SlowState(), templates)
    answer = client.post(f"/mutate?timeout={timeout}", json=_review(_legacy_pod(), "pods"))
    assert "patch" in answer.get_json()["response"]
    assert len(templates.created) == 1
    assert 0 < templates.seconds[0] <= budget - SLOW_SECONDS
