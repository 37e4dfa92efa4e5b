"""Which Nodes a Pod's nodeSelector and required node affinity admit, as the scheduler's
NodeAffinity plugin reads them."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.engine.nodefit import admits, constrained

NODE = {"metadata": {"name": "gpu-1", "labels": {"zone": "a", "gpus": "8"}}}


def affinity(*terms: dict[str, Any]) -> dict[str, Any]:
    required = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}
    return {"affinity": {"nodeAffinity": required}}


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    return {"matchExpressions": [{"key": key, "operator": operator, "values": list(values)}]}


CASES = {
    "no constraint": ({}, True),
    "selector equal": ({"nodeSelector": {"zone": "a"}}, True),
    "selector differs": ({"nodeSelector": {"zone": "b"}}, False),
    "selector label missing": ({"nodeSelector": {"rack": "1"}}, False),
    "In": (affinity(expr("zone", "In", "a", "b")), True),
    "NotIn": (affinity(expr("zone", "NotIn", "a")), False),
    "NotIn absent label": (affinity(expr("rack", "NotIn", "1")), True),
    "Exists": (affinity(expr("zone", "Exists")), True),
    "DoesNotExist": (affinity(expr("zone", "DoesNotExist")), False),
    "Gt": (affinity(expr("gpus", "Gt", "4")), True),
    "Lt": (affinity(expr("gpus", "Lt", "4")), False),
    "Gt not a number": (affinity(expr("zone", "Gt", "4")), False),
    "terms are ORed": (affinity(expr("zone", "In", "b"), expr("zone", "In", "a")), True),
    "an empty term matches nothing": (affinity({}), False),
    "matchFields name": (affinity({"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["gpu-1"]}]}), True),
    "selector and affinity both apply": (
        {"nodeSelector": {"zone": "b"}, **affinity(expr("zone", "Exists"))}, False),
}  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_admits_reads_constraints_as_the_scheduler_does(case: str) -> None:
    spec, expected = CASES[case]
    pod = {"spec": spec}
    assert admits(pod, NODE) is expected
    assert constrained(pod) is bool(spec)
