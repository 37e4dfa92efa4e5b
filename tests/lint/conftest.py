"""Every lint test runs with the CEL checker injected, as `dragate lint` does."""

from __future__ import annotations

import pytest

from webhook.engine.cel import selector_error
from webhook.lint.rules.cel import use_selector_compiler


@pytest.fixture(autouse=True, scope="session")
def _selector_compiler() -> None:
    use_selector_compiler(selector_error)
