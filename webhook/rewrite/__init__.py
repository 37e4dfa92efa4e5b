"""The legacy GPU rewriter: `nvidia.com/gpu: 2` in, a Pod with a DRA claim out (pure).

Object in, `RewriteResult` out; inputs are never mutated. The webhook calls `rewrite_object`
on Pod CREATE; `dragate migrate` calls it on every manifest and writes the changes back.
"""

from webhook.rewrite.mappings import resource_markers
from webhook.rewrite.podspec import REPLACES_ANNOTATION, rewrite_pod_spec
from webhook.rewrite.workloads import POD_PATHS, REWRITTEN_ANNOTATION, pod_specs, rewrite_object

__all__ = [
    "POD_PATHS",
    "REPLACES_ANNOTATION",
    "REWRITTEN_ANNOTATION",
    "pod_specs",
    "resource_markers",
    "rewrite_object",
    "rewrite_pod_spec",
]
