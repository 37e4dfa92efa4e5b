"""The one way through: request -> facts gathered once -> pure evaluation -> verdict.

STUB: the lead is writing this module; the signatures below are the contract.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from webhook.types import AdmissionRequest, ClusterState, Ledger, PolicySet, Verdict


@dataclass(frozen=True)
class Context:
    """What a review needs besides the request; built once per process by the caller."""

    policies: Callable[[], PolicySet]
    state: ClusterState
    ledger: Ledger


def review(request: AdmissionRequest, context: Context, *, mutate: bool = False) -> Verdict:
    raise NotImplementedError
