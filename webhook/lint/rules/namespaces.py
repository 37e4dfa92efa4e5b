"""Namespace rules: the admin-access label key that changed in Kubernetes 1.34."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from webhook.lint.findings import ERROR, WARNING, Finding
from webhook.lint.objects import as_map, dig, group_version, kind_of
from webhook.lint.registry import RuleInfo, register
from webhook.types import ADMIN_ACCESS_LABEL

OLD_ADMIN_ACCESS_LABEL = "resource.k8s.io/admin-access"
LABEL = RuleInfo(
    "admin-access-label", ERROR, 'pre-1.34 admin-access namespace label, or a value not "true"'
)


@register(LABEL)
def check_admin_label(obj: Mapping[str, Any]) -> Iterator[Finding]:
    if kind_of(obj) != "Namespace" or group_version(obj)[0] != "":
        return
    labels = as_map(dig(obj, ("metadata", "labels")))
    if OLD_ADMIN_ACCESS_LABEL in labels:
        yield Finding(
            LABEL.id,
            ERROR,
            ("metadata", "labels", OLD_ADMIN_ACCESS_LABEL),
            f"`{OLD_ADMIN_ACCESS_LABEL}` is the Kubernetes 1.33 key; since 1.34 the API server "
            f"only honours `{ADMIN_ACCESS_LABEL}`, so adminAccess claims here are refused",
            f'label the namespace `{ADMIN_ACCESS_LABEL}: "true"`',
        )
    value = labels.get(ADMIN_ACCESS_LABEL)
    if ADMIN_ACCESS_LABEL in labels and value != "true":
        yield Finding(
            LABEL.id,
            WARNING,
            ("metadata", "labels", ADMIN_ACCESS_LABEL),
            f'`{ADMIN_ACCESS_LABEL}` is `{value}`; only the string "true" grants admin access',
            'set it to `"true"`, or remove the label',
        )
