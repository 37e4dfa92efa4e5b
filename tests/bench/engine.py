"""Benchmark: the pure engine's time for one Pod review (two GPU containers, two template
claims) against 50 tenants and 20 CEL rules.

Run: `python tests/bench/engine.py [--iterations N] [--json FILE]`. Reports min / p50 / p99 /
max in microseconds, and the same Pod through the whole pipeline (facts from an in-memory
state and ledger) for comparison. Numbers, not assertions: docs/benchmarks.md records them.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from builders import exact, pod, request, template
from timing import sample, summarize

from webhook.engine import evaluate
from webhook.engine.cel import compile_expression
from webhook.pipeline import request_from_object
from webhook.types import (
    Action,
    ClassUsage,
    DeviceClassPolicy,
    Facts,
    Holder,
    PolicySet,
    QuotaLimit,
    Tenant,
    Validation,
)

VARIABLES = ("request", "object", "oldObject", "namespace", "tenant", "operation", "userInfo")
RULES = [
    "request.selectors.all(s, !s.contains('uuid'))",
    "request.count <= 8",
    "request.allocationMode == 'ExactCount'",
    "!request.adminAccess",
    "request.deviceClassName.endsWith('.nvidia.com')",
    "size(request.selectors) <= 4",
    "request.name.matches('^[a-z0-9-]+$')",
    "tenant != 'blocked'",
    "operation == 'CREATE'",
    "request.count >= 1",
]


def policies(tenants: int = 50, rules: int = 20) -> PolicySet:
    tenant_list = tuple(
        Tenant(
            f"tenant-{i}",
            namespaces=frozenset({f"ns-{i}", f"ns-{i}-batch"}),
            allowed_device_classes=frozenset({"gpu.nvidia.com", "mig.nvidia.com"}),
            quota=(QuotaLimit("gpu.nvidia.com", 64, 8), QuotaLimit("mig.nvidia.com", 32, 4)),
        )
        for i in range(tenants)
    )
    validations = tuple(
        Validation(e, f"rule {i}", Action.DENY, compile_expression(e, variables=VARIABLES))
        for i, e in enumerate((RULES * (rules // len(RULES) + 1))[:rules])
    )
    half = len(validations) // 2
    class_policies = (
        DeviceClassPolicy("gpu-a", frozenset({"gpu.nvidia.com"}), 8, False, validations[:half]),
        DeviceClassPolicy("gpu-b", frozenset({"gpu.nvidia.com"}), None, True, validations[half:]),
    )
    return PolicySet(tenants=tenant_list, class_policies=class_policies)


def scenario(tenants: int = 50, rules: int = 20) -> tuple[Any, PolicySet, Facts]:
    policy_set = policies(tenants, rules)
    tenant = policy_set.tenants[-1]
    namespace = sorted(tenant.namespaces)[0]
    templates = {
        "gpu-1": template(request(exact(count=1)), name="gpu-1", namespace=namespace),
        "gpu-2": template(request(exact(count=2)), name="gpu-2", namespace=namespace),
    }
    obj = pod(
        "trainer",
        namespace,
        claims={"a": "gpu-1", "b": "gpu-2"},
        containers={"a": ["a"], "b": ["b"], "side": []},
        uid="u-1",
    )
    usage = {
        "gpu.nvidia.com": ClassUsage(
            10, tuple(Holder(f"claim:{namespace}/c{i}", 1) for i in range(10))
        )
    }
    facts = Facts(tenant=tenant, usage=usage, templates=templates)
    return request_from_object(obj), policy_set, facts


def measure(call: Callable[[], object], iterations: int) -> dict[str, float | str | None]:
    return summarize(sample(call, iterations, warmup=100))


def run(iterations: int, tenants: int = 50, rules: int = 20) -> dict[str, Any]:
    req, policy_set, facts = scenario(tenants, rules)
    decision = evaluate(req, policy_set, facts)
    assert decision.allowed, decision.reasons
    return {
        "scenario": f"Pod, 2 GPU containers, 2 template claims; {tenants} tenants; "
        f"{rules} CEL rules",
        "engine": measure(lambda: evaluate(req, policy_set, facts), iterations),
    }


def curve(iterations: int, rule_counts: tuple[int, ...] = (0, 5, 20, 40)) -> list[dict[str, Any]]:
    """Engine time per Pod review against the number of CEL rules (50 tenants)."""
    return [{"cel_rules": n, **run(iterations, rules=n)["engine"]} for n in rule_counts]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=20000)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    report = run(args.iterations)
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
