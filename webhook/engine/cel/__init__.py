"""CEL for dragate: cel-python's compiled runner plus the Kubernetes CEL library.

The only package that imports celpy. Compile once with `compile_expression`, convert request
data once with `to_cel` / `device_to_cel`, then evaluate many programs against those values;
`Program.evaluate` never raises.

Library: quantity, semver, strings (cel-go ext), lists (Kubernetes), sets (cel-go ext),
regex (RE2: matches, find, findAll) and `cel.bind`.
"""

from webhook.engine.cel.device import device_to_cel
from webhook.engine.cel.errors import CelCompileError
from webhook.engine.cel.program import (
    MAX_EXPRESSION_BYTES,
    MAX_SECONDS,
    Program,
    compile_expression,
)
from webhook.engine.cel.values import to_cel

__all__ = [
    "MAX_EXPRESSION_BYTES",
    "MAX_SECONDS",
    "CelCompileError",
    "Program",
    "compile_expression",
    "device_to_cel",
    "to_cel",
]
