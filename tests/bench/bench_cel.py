"""Micro benchmark for webhook.engine.cel: prints microseconds per evaluation.

Not a test. Run: python tests/bench/bench_cel.py
"""

from __future__ import annotations

import timeit
from functools import partial

from webhook.engine.cel import compile_expression, device_to_cel, to_cel

DEVICE = device_to_cel(
    "gpu.nvidia.com",
    {
        "productName": {"string": "NVIDIA A100-SXM4-80GB"},
        "driverVersion": {"version": "550.54.15"},
        "type": {"string": "gpu"},
    },
    {"memory": {"value": "80Gi"}},
)
REQUEST = to_cel(
    {
        "name": "gpu",
        "deviceClassName": "gpu.nvidia.com",
        "count": 2,
        "adminAccess": False,
        "selectors": ["device.attributes['gpu.nvidia.com'].type == 'gpu'"] * 3,
    }
)
ACTIVATION = {"device": DEVICE, "request": REQUEST, "tenant": to_cel("team-a")}
EXPRESSIONS = [
    "request.count <= 4",
    "request.selectors.all(s, !s.contains('uuid'))",
    "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0",
    "device.attributes['gpu.nvidia.com'].driverVersion.compareTo(semver('550.0.0')) >= 0",
    "device.attributes['gpu.nvidia.com'].productName.matches('A100|H100')",
    "sets.contains(['team-a', 'team-b'], [tenant]) && request.count > 0",
]


def main() -> None:
    for expression in EXPRESSIONS:
        program = compile_expression(expression, variables=ACTIVATION)
        assert program.evaluate(ACTIVATION).value is True, expression
        runs = 5000
        evaluate = partial(program.evaluate, ACTIVATION)
        seconds = min(timeit.repeat(evaluate, number=runs, repeat=3))
        print(f"{seconds / runs * 1e6:8.1f} us  {expression}")


if __name__ == "__main__":
    main()
