"""Shared helper: compile and evaluate one expression with optional variables."""

from collections.abc import Callable
from typing import Any

import pytest

from webhook.engine.cel import compile_expression
from webhook.types import EvalResult

Run = Callable[..., EvalResult]


def run_expression(expression: str, **variables: Any) -> EvalResult:
    program = compile_expression(expression, variables=variables, expect_bool=False)
    return program.evaluate(variables)


@pytest.fixture
def run() -> Run:
    return run_expression
