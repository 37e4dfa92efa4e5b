"""CEL for dragate: cel-python's compiled runner plus the Kubernetes CEL library.

The only package that imports celpy. Compile once with `compile_expression`, convert request
data once with `to_cel` / `device_to_cel`, then evaluate many programs against those values;
`Program.evaluate` never raises.

Library (as the target Kubernetes minor, 1.35 to 1.37, offers it to new expressions; the
minor is a parameter of `compile_expression`): quantity, semver, strings and format (cel-go
ext), lists (Kubernetes and cel-go ext), sets (cel-go ext), regex (RE2: matches, find,
findAll), ip and cidr, url, optionals, two-variable comprehensions and, outside the plain
Kubernetes environment, `cel.bind`. Expressions are type- and cost-checked at compile time
(checker.py, cost.py) and evaluated under a deterministic budget (budget.py).
"""

from webhook.engine.cel.budget import GUARD_SECONDS, TIME_GUARD_MESSAGE
from webhook.engine.cel.device import device_to_cel
from webhook.engine.cel.errors import CelCompileError
from webhook.engine.cel.program import (
    MAX_EXPRESSION_BYTES,
    Program,
    compile_expression,
    selector_error,
)
from webhook.engine.cel.types import TypeEnvironment
from webhook.engine.cel.values import to_cel

__all__ = [
    "GUARD_SECONDS",
    "MAX_EXPRESSION_BYTES",
    "TIME_GUARD_MESSAGE",
    "CelCompileError",
    "Program",
    "TypeEnvironment",
    "compile_expression",
    "device_to_cel",
    "selector_error",
    "to_cel",
]
