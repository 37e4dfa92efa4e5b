"""Fixtures for the fuzz tests: the real pipeline and the example policies behind Flask."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from fuzz import fuzz_support
from fuzz.fuzz_support import Errors

from webhook import pipeline
from webhook.admission.app import create_app
from webhook.admission.config import AdmissionOptions
from webhook.admission.reload import PolicyHolder
from webhook.assembly import offline_context
from webhook.kube.snapshot import SnapshotState
from webhook.ledger.memory import MemoryLedger
from webhook.pipeline import Context
from webhook.policy.loading import default_policy_dir, load_policies


@pytest.fixture(scope="module")
def errors() -> Iterator[Errors]:
    handler = Errors()
    logger = logging.getLogger("dragate")
    logger.addHandler(handler)
    yield handler
    logger.removeHandler(handler)


def example_context() -> tuple[PolicyHolder, Context]:
    holder = PolicyHolder([str(default_policy_dir())], load_policies)
    state = SnapshotState(fuzz_support.namespace_objects())
    return holder, offline_context(holder.get, state, MemoryLedger())


@pytest.fixture(scope="module")
def context() -> Context:
    return example_context()[1]


@pytest.fixture(scope="module")
def http(errors: Errors) -> fuzz_support.Poster:
    """POST bytes to the real app (real pipeline, example policies): (status, body)."""
    holder, context = example_context()
    client = create_app(context, holder, AdmissionOptions(), pipeline.review).test_client()

    def post(path: str, data: bytes, content_type: str = "application/json") -> tuple[int, bytes]:
        response = client.post(path, data=data, content_type=content_type)
        return response.status_code, response.get_data()

    return post
