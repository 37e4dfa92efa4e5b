"""The pure policy engine: normalization, tenancy, counting, class policy, CEL rules, quota.

Nothing in this package does I/O; callers hand it a `PolicySet` and `Facts` and get a
`Decision` back.
"""

from webhook.engine.evaluate import evaluate
from webhook.engine.tenancy import namespace_labels, resolve_tenant

__all__ = ["evaluate", "namespace_labels", "resolve_tenant"]
