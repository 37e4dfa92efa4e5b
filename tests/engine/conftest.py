"""Engine test fixtures shared across modules."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from webhook.engine import rules


@pytest.fixture
def cold_rule_memos() -> Iterator[None]:
    """Rule results start and end unremembered, so a test sees its own evaluations."""
    rules._results_of.cache_clear()
    yield
    rules._results_of.cache_clear()
