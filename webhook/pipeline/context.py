"""What a review needs besides the request: policies, cluster state, ledger, template sink."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from webhook.engine.inventory import Inventory
from webhook.pipeline.scope import Identity
from webhook.types import ClusterState, Ledger, Object, PolicySet

PolicyCheck = Callable[[Object], Sequence[str]]
"""Why a dragate.io policy object would not be enforced beside the cluster's others (empty:
it would be); the same loader as the policy files, handed in by the composer."""

TemplateSink = Callable[[str, Sequence[Object], bool, float], None]
"""Makes sure managed ResourceClaimTemplates exist: (namespace, templates, dry_run, seconds),
`seconds` what the review has left: a sink that cannot finish in time raises
FactsUnavailable rather than answer after the API server has given up on the review."""


@dataclass(frozen=True)
class Context:
    """What a review needs besides the request; built once per process by the caller.

    `own` is the webhook's own namespace and service account, which always pass
    (`scope.handles`); the CLI has none.
    """

    policies: Callable[[], PolicySet]
    state: ClusterState
    ledger: Ledger
    templates: TemplateSink | None = None
    inventory: Callable[[], Inventory | None] | None = None
    own: Identity = field(default_factory=Identity)
    policy_check: PolicyCheck | None = None
