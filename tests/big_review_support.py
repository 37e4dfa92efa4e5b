"""Shared by the tests of big reviews (deadline checkpoints, limits, the admitter): a tenant
with room for any number of GPUs, and a clock that advances a fixed step at every read."""

from __future__ import annotations

from webhook.kube.snapshot import SnapshotState
from webhook.ledger.memory import MemoryLedger
from webhook.pipeline import Context
from webhook.policy.loading import parse_policies

POLICIES = parse_policies(
    """
apiVersion: dragate.io/v1alpha1
kind: Tenant
metadata: {name: team-a}
spec:
  namespaces: [default]
  quota:
  - {deviceClassName: gpu.nvidia.com, maxDevices: 100000}
""",
    "inline.yaml",
)
TICK = 1e-5
"""Seconds the fake clock advances at each read."""


class TickingClock:
    """Monotonic seconds that advance TICK at every read; counts the reads."""

    def __init__(self) -> None:
        self.reads = 0

    def __call__(self) -> float:
        self.reads += 1
        return self.reads * TICK


def roomy_context() -> Context:
    """An offline Context on POLICIES with no cluster objects."""
    return Context(policies=lambda: POLICIES, state=SnapshotState([]), ledger=MemoryLedger())
