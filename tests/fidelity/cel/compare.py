"""How two answers differ: one difference class per case, or None when they agree.

Agreement is on the outcome a user sees: refused at compile time, failed at run time, or
a value of a CEL type. Error texts are not compared; doubles compare by value (NaN equals
NaN, -0 and 0 differ), maps without regard to order.
"""

from __future__ import annotations

import json
import math
from typing import Any


def _canonical(value: Any) -> Any:
    kind, inner = value["t"], value["v"]
    if kind == "double":
        number = float(inner.replace("+Inf", "inf").replace("-Inf", "-inf"))
        return ("double", "nan" if math.isnan(number) else (number, math.copysign(1, number)))
    if kind == "map":
        pairs = sorted((json.dumps(_canonical(k)), _canonical(v)) for k, v in inner)
        return ("map", [list(p) for p in pairs])
    if kind in ("list", "optional_type") and inner is not None:
        return (kind, [_canonical(item) for item in inner])
    return (kind, inner)


def outcome(answer: dict[str, Any]) -> str:
    """compile_error | error | value."""
    if answer.get("compile_error"):
        return "compile_error"
    return "error" if answer.get("error") else "value"


def difference(oracle: dict[str, Any], dragate: dict[str, Any]) -> str | None:
    """The class of disagreement between Kubernetes and dragate, or None."""
    expected, got = outcome(oracle), outcome(dragate)
    if expected != got:
        return f"kubernetes {expected}, dragate {got}"
    if expected != "value":
        return None
    if oracle["value"]["t"] != dragate["value"]["t"]:
        return "different type"
    if _canonical(oracle["value"]) != _canonical(dragate["value"]):
        return "different value"
    return None
