"""Table helpers shared by the CEL library tests: `(id, expression, expected)` rows."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

from webhook.types import EvalResult

Row = tuple[str, str, Any]


def table(rows: Sequence[Row], expected: str) -> Callable[[Any], Any]:
    """Parametrize a test over `rows` as (expr, <expected>), with the first column as ids."""
    return pytest.mark.parametrize(
        ("expr", expected), [row[1:] for row in rows], ids=[row[0] for row in rows]
    )


def expect_value(result: EvalResult, expected: Any) -> None:
    """The expression evaluated, to `expected` and of its exact type (1 is not True)."""
    assert result.error is None
    assert result.value == expected and type(result.value) is type(expected)


def expect_error(result: EvalResult, message: str) -> None:
    """The expression failed, and the error says `message`."""
    assert result.value is None
    assert message in (result.error or "")
