"""The plain shapes every layer passes around: decoded JSON, Kubernetes objects, the labels
dragate reads or writes, and the root of its exceptions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.types.kubelimits import ALLOCATION_RESULTS_MAX

JSON = Any
"""A decoded JSON/YAML value: dict, list, str, int, float, bool or None."""

Object = Mapping[str, Any]
"""A Kubernetes object as a plain dict (kopf's rule: Kubernetes objects are dicts)."""

API_VERSION = "dragate.io/v1alpha1"
POLICY_GROUP = "dragate.io"
POLICY_KINDS = frozenset({"Tenant", "DeviceClassPolicy", "LegacyResourceMapping", "Settings"})
"""The policy kinds, in files and as cluster objects of POLICY_GROUP."""
ALL_MODE_DEVICES = ALLOCATION_RESULTS_MAX
"""What ResourceQuota charges for `allocationMode: All` when the inventory is unknown: the
most devices one claim can be allocated."""

ADMIN_ACCESS_LABEL = "resource.kubernetes.io/admin-access"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE = "dragate"


class DragateError(Exception):
    """Root of dragate's few exceptions; each subclass is owned by one layer."""
