"""A deterministic evaluation budget, in cost units close to Kubernetes' runtime cost.

Every evaluation gets `MAX_COST` units. A comprehension step or binding costs `STEP_COST`,
a library call or arithmetic operator one unit, and functions and operators that build, scan
or compare strings and lists one more unit per ten elements or characters they touch
(Kubernetes charges 0.1 per character for string work). Constant-time comparisons are not
charged: between two steps there are at most as many as the expression has operators.
The same expression on the same input always spends the same units, so a verdict never
depends on how loaded the machine is. A wall-clock guard remains only as a last resort for
work the units do not see; when it fires the error says so (`TIME_GUARD_MESSAGE`).
"""

from __future__ import annotations

import time
from contextvars import ContextVar
from typing import Any

from webhook.engine.cel.errors import BudgetExceeded

MAX_COST = 1_000_000
"""Cost units per evaluation: Kubernetes' per-expression runtime limit (PerCallLimit)."""
STEP_COST = 20
"""Units per comprehension step or binding: a celpy step costs about twenty operators' time."""
GUARD_SECONDS = 2.0
"""Last-resort wall-clock guard; checked with the units, never reached by metered work."""
TIME_GUARD_MESSAGE = "evaluation stopped by the time guard"


class Budget:
    """The units left for one evaluation."""

    __slots__ = ("deadline", "spent")

    def __init__(self, until: float | None = None) -> None:
        self.spent = 0
        self.deadline = time.monotonic() + GUARD_SECONDS
        if until is not None and until < self.deadline:
            self.deadline = until

    def charge(self, units: int) -> None:
        """Spend units; BudgetExceeded when the evaluation has spent more than MAX_COST."""
        before = self.spent
        self.spent += units
        if self.spent > MAX_COST:
            raise BudgetExceeded(f"cost limit exceeded (more than {MAX_COST} units)")
        if (before >> 10) != (self.spent >> 10) and time.monotonic() > self.deadline:
            raise BudgetExceeded(f"{TIME_GUARD_MESSAGE} after {GUARD_SECONDS} s")


CURRENT: ContextVar[Budget | None] = ContextVar("dragate_cel_budget", default=None)


def charge(units: int) -> None:
    """Charge the running evaluation (no-op outside one, e.g. constant folding in tests)."""
    budget = CURRENT.get()
    if budget is not None:
        budget.charge(units)


def size_units(*values: Any) -> int:
    """One unit per ten characters or elements of the string / list / map arguments."""
    return sum(len(v) for v in values if isinstance(v, str | list | dict | bytes)) // 10
