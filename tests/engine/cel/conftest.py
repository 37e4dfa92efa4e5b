"""Shared helper: compile and evaluate one expression with optional variables."""

from collections.abc import Callable
from typing import Any

import pytest

from webhook.engine.cel import CelCompileError, compile_expression
from webhook.types import EvalResult

Run = Callable[..., EvalResult]


def run_expression(expression: str, **variables: Any) -> EvalResult:
    """The value or error; a compile-time refusal is an error too (its message says which)."""
    try:
        program = compile_expression(expression, variables=variables, expect_bool=False)
    except CelCompileError as error:
        return EvalResult(error=f"does not compile: {error}")
    return program.evaluate(variables)


@pytest.fixture
def run() -> Run:
    return run_expression
