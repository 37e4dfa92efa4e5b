"""What the worker does to the interpreter once booted (app.py): the collector frozen after
loading and once more when first ready."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import pytest
from admission import admission_support

from webhook.admission import app as app_module
from webhook.admission.app import create_app
from webhook.admission.config import AdmissionOptions
from webhook.admission.reload import PolicyHolder
from webhook.kube.snapshot import SnapshotState
from webhook.ledger.memory import MemoryLedger
from webhook.pipeline import Context


@pytest.fixture
def interpreter() -> Iterator[None]:
    """The test process's collector, put back afterwards."""
    yield
    gc.unfreeze()


def test_settling_freezes_what_is_loaded(interpreter: None) -> None:
    gc.unfreeze()
    loaded = [{"policy": n} for n in range(1000)]
    app_module.settle_collector()
    assert gc.get_freeze_count() >= len(loaded)
    walked = {id(obj) for obj in gc.get_objects()}  # what a collection still looks at
    assert not any(id(obj) in walked for obj in loaded)


def _app(tmp_path: Any, ready: list[bool], calls: list[int]) -> Any:
    holder = PolicyHolder([str(tmp_path)], admission_support.StaticLoader())
    context = Context(policies=holder.get, state=SnapshotState.empty(), ledger=MemoryLedger())
    return create_app(
        context, holder, AdmissionOptions(), admission_support.review,
        readiness=[lambda: (ready[0], "caches")], on_first_ready=lambda: calls.append(1),
    )  # fmt: skip


@pytest.mark.parametrize(
    ("readiness", "calls"),
    [([False, False], 0), ([False, True], 1), ([True, True, True], 1), ([True, False, True], 1)],
    ids=["never-ready", "ready-later", "ready-at-once", "flapping"],
)
def test_on_first_ready_runs_once_when_every_check_first_passes(
    tmp_path: Any, readiness: list[bool], calls: int
) -> None:
    ready, ran = [False], []
    client = _app(tmp_path, ready, ran).test_client()
    for state in readiness:
        ready[0] = state
        assert client.get("/readyz").status_code == (200 if state else 503)
    assert len(ran) == calls
