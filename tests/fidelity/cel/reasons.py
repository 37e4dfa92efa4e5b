"""Why a known difference exists: a reason per difference class, for the known list."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fidelity.cel.run import Outcome

REASONS = {
    "kubernetes compile_error, dragate value": (
        "Kubernetes' type checker refuses this at create time; dragate has no static check "
        "for it and evaluates it"
    ),
    "kubernetes compile_error, dragate error": (
        "Kubernetes' type checker refuses this at create time; dragate only fails when evaluating"
    ),
    "kubernetes value, dragate compile_error": "dragate does not support this feature yet",
    "kubernetes error, dragate compile_error": "dragate does not support this feature yet",
    "kubernetes value, dragate error": "dragate's runtime lacks or mis-implements this function",
    "kubernetes error, dragate value": "dragate evaluates where cel-go reports an error",
    "different value": "dragate computes a different value",
    "different type": "dragate's result has a different CEL type",
}


SPECIFIC = (
    (
        "format.",
        "Kubernetes' named-format library (format.named, format.dns1123Label()...) is "
        "not implemented in dragate, which refuses it at compile time",
    ),
    ("net.IP", "the type names net.IP / net.CIDR are not declared as values in dragate"),
    ("net.CIDR", "the type names net.IP / net.CIDR are not declared as values in dragate"),
)
"""(text in the expression, reason) for differences whose cause is known precisely."""


def reason_for(outcome: Outcome) -> str:
    """The reason recorded for a newly listed difference."""
    for text, reason in SPECIFIC:
        if text in outcome.case.expr:
            return reason
    return REASONS.get(outcome.difference or "", outcome.difference or "")
