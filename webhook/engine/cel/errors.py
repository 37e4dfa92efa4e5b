"""The three ways CEL work can fail, kept apart so callers can tell them apart.

* `CelCompileError` is the only one that leaves the package: a policy author wrote something
  that can never run, and the loader reports it with the column where it went wrong.
* `CelFunctionError` is raised by the Kubernetes library functions; the evaluator turns it
  into a CEL error *value* so that `false && <error>` still short-circuits like Go does.
* `BudgetExceeded` is deliberately not an `ArithmeticError`/`ValueError`: celpy's own error
  trapping must not swallow it, so a runaway expression stops at once instead of continuing.
"""

from __future__ import annotations

from webhook.types import DragateError


class CelCompileError(DragateError):
    """A CEL expression that cannot be compiled; `column` is 1-based when known."""

    def __init__(self, message: str, column: int | None = None) -> None:
        super().__init__(message if column is None else f"{message} (column {column})")
        self.message = message
        self.column = column


class CelFunctionError(ValueError):
    """A library function refused its arguments (bad quantity string, index out of range...)."""


class BudgetExceeded(Exception):
    """An evaluation did more work than one admission decision may spend."""


class NoSuchOverload(CelFunctionError):
    """A function was called with argument types it has no overload for.

    Kept apart because `isQuantity(1)` must fail like Go (a type error), not answer false.
    """
