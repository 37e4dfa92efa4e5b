"""The limits Kubernetes enforces on the objects dragate reads: one table for every user.

The pipeline refuses an object over them before any work (`webhook.pipeline.limits`), lint
reports them in manifests, the rewrite never builds a claim past them and quota charges
`All` by them. Each is the Go constant of resource.k8s.io/v1 validation it mirrors, or the
storage limit the API server meets; the real kube-apiserver is the oracle for each
(tests/e2e/test_kube_limits.py).
"""

from __future__ import annotations

DEVICE_REQUESTS_MAX = 32
"""`DeviceRequestsMaxSize`: requests in one claim."""
DEVICE_CONSTRAINTS_MAX = 32
"""`DeviceConstraintsMaxSize`: constraints in one claim."""
DEVICE_CONFIG_MAX = 32
"""`DeviceConfigMaxSize`: config entries in one claim (or DeviceClass)."""
DEVICE_SELECTORS_MAX = 32
"""`DeviceSelectorsMaxSize`: selectors in one request, subrequest or DeviceClass."""
FIRST_AVAILABLE_MAX = 8
"""`FirstAvailableDeviceRequestMaxSize`: alternatives (subrequests) of one request."""
ALLOCATION_RESULTS_MAX = 32
"""`AllocationResultsMaxSize`: the most devices one claim can be allocated."""

OBJECT_BYTES_MAX = 1_572_864
"""etcd's default `--max-request-bytes` (1.5 MiB): the largest write etcd accepts, so no
larger object is ever stored. Measured as the object's JSON encoding with each escaped
character counted as the one character it stands for (`webhook.pipeline.limits`)."""

CLAIM_LISTS = {"requests": DEVICE_REQUESTS_MAX, "constraints": DEVICE_CONSTRAINTS_MAX,
               "config": DEVICE_CONFIG_MAX}  # fmt: skip
"""A claim spec's `devices` field -> the most items it may hold."""
REQUEST_LISTS = {"firstAvailable": FIRST_AVAILABLE_MAX, "selectors": DEVICE_SELECTORS_MAX}
"""A request's (or its `exactly`'s, or a subrequest's) list field -> the most items."""
