"""Which Nodes a Pod may run on by its `nodeSelector` and required node affinity, as the
scheduler's NodeAffinity plugin reads them: every nodeSelector label equal, and any one of
the `nodeSelectorTerms`, each term's expressions and fields all satisfied.

A Pending Pod whose constraints exclude every node that has a matching device is told so,
rather than that its devices are missing or taken.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from webhook.types import Object


def constrained(pod: Object) -> bool:
    """Whether the Pod narrows the nodes it may run on at all."""
    spec = pod.get("spec") or {}
    return bool(spec.get("nodeSelector") or _terms(spec))


def admits(pod: Object, node: Object) -> bool:
    """Whether `node` passes the Pod's nodeSelector and required node affinity."""
    spec = pod.get("spec") or {}
    meta = node.get("metadata") or {}
    labels: Mapping[str, str] = meta.get("labels") or {}
    selector: Mapping[str, str] = spec.get("nodeSelector") or {}
    if any(labels.get(k) != v for k, v in selector.items()):
        return False
    terms = _terms(spec)
    fields = {"metadata.name": str(meta.get("name", ""))}
    return not terms or any(_term(t, labels, fields) for t in terms)


def constraints_text(pod: Object) -> str:
    """The constraints as the Pod states them, for a finding's message."""
    spec = pod.get("spec") or {}
    parts = [f"nodeSelector {k}={v}" for k, v in (spec.get("nodeSelector") or {}).items()]
    if _terms(spec):
        parts.append("required node affinity")
    return ", ".join(parts)


def _terms(spec: Mapping[str, Any]) -> Sequence[Mapping[str, Any]]:
    affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    terms: Sequence[Mapping[str, Any]] = required.get("nodeSelectorTerms") or []
    return terms


def _term(term: Mapping[str, Any], labels: Mapping[str, str], fields: Mapping[str, str]) -> bool:
    """A term with no requirement matches no node, as the scheduler reads it."""
    expressions = term.get("matchExpressions") or []
    by_field = term.get("matchFields") or []
    if not expressions and not by_field:
        return False
    return all(_requirement(r, labels) for r in expressions) and all(
        _requirement(r, fields) for r in by_field
    )


def _requirement(requirement: Mapping[str, Any], values: Mapping[str, str]) -> bool:
    key, operator = str(requirement.get("key", "")), requirement.get("operator")
    wanted = [str(v) for v in requirement.get("values") or []]
    present, value = key in values, values.get(key, "")
    if operator == "In":
        return present and value in wanted
    if operator == "NotIn":
        return not present or value not in wanted
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt") and present and len(wanted) == 1:
        return _compare(value, wanted[0], operator)
    return False


def _compare(value: str, bound: str, operator: str) -> bool:
    try:
        left, right = int(value), int(bound)
    except ValueError:
        return False
    return left > right if operator == "Gt" else left < right
