"""The legacy GPU rewriter: `nvidia.com/gpu: 2` in, a Pod with a DRA claim out (pure).

Object in, `RewriteResult` out; inputs are never mutated. `dragate migrate` calls
`rewrite_object` on every manifest and writes the changes back; the webhook calls
`rewrite_pod` on Pod CREATE: the same result, with its JSON patch, from the pod spec's
remembered edits.
"""

from webhook.rewrite.mappings import resource_markers
from webhook.rewrite.podedits import PodRewrite, rewrite_pod
from webhook.rewrite.podspec import REPLACES_ANNOTATION, rewrite_pod_spec
from webhook.rewrite.workloads import (
    POD_PATHS,
    REWRITTEN_ANNOTATION,
    REWRITTEN_LABEL,
    pod_specs,
    rewrite_object,
)

__all__ = [
    "POD_PATHS",
    "REPLACES_ANNOTATION",
    "REWRITTEN_ANNOTATION",
    "REWRITTEN_LABEL",
    "PodRewrite",
    "pod_specs",
    "resource_markers",
    "rewrite_object",
    "rewrite_pod",
    "rewrite_pod_spec",
]
