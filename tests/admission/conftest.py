"""Fixtures for the admission tests: a Flask app over the pipeline double."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from admission import admission_support
from flask import Flask

from webhook.admission.app import create_app
from webhook.admission.config import AdmissionOptions
from webhook.admission.handler import Reviewer
from webhook.admission.reload import PolicyHolder
from webhook.kube.snapshot import SnapshotState
from webhook.ledger.memory import MemoryLedger
from webhook.pipeline import Context


@pytest.fixture
def make_app(tmp_path: Any) -> Callable[..., Flask]:
    def build(reviewer: Reviewer = admission_support.review, **options: Any) -> Flask:
        holder = PolicyHolder([str(tmp_path)], admission_support.StaticLoader())
        context = Context(policies=holder.get, state=SnapshotState.empty(), ledger=MemoryLedger())
        return create_app(context, holder, AdmissionOptions(**options), reviewer, metrics_seconds=0)

    return build


@pytest.fixture
def client(make_app: Callable[..., Flask]) -> Any:
    return make_app().test_client()
