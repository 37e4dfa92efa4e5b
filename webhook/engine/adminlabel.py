"""The admin-access label guard on Namespaces.

DRA grants admin access to devices already in use to any claim in a namespace labelled
`resource.kubernetes.io/admin-access: "true"`, and anyone who may patch their own Namespace
can set that label (kubernetes/kubernetes#141293, closed as working as designed). So adding,
changing or removing the label is allowed only to the users and groups named in
`Settings.adminAccessEditors`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.types import ADMIN_ACCESS_LABEL, AdmissionRequest, Reason, Settings

OLD_ADMIN_ACCESS_LABEL = "resource.k8s.io/admin-access"
GUARDED_LABELS = (ADMIN_ACCESS_LABEL, OLD_ADMIN_ACCESS_LABEL)


def admin_label_reasons(request: AdmissionRequest, settings: Settings) -> list[Reason]:
    """A denial when the Namespace CREATE or UPDATE changes an admin-access label and its
    author may not."""
    old, new = request.old_object, request.object
    changed = [k for k in GUARDED_LABELS if _label(new, k) != _label(old, k)]
    if not changed or may_edit(request.user_info, settings):
        return []
    user = str(request.user_info.get("username", "")) or "<unknown>"
    return [
        Reason(
            policy="Settings/adminAccessEditors",
            message=f"user {user!r} may not set or change the {changed[0]} label on namespace "
            f"{request.name!r}; it grants admin access to devices in use. Allowed: "
            f"{', '.join(sorted(settings.admin_access_editors)) or 'nobody'}",
        )
    ]


def may_edit(user_info: Mapping[str, Any], settings: Settings) -> bool:
    editors = settings.admin_access_editors
    if str(user_info.get("username", "")) in editors:
        return True
    return any(f"group:{group}" in editors for group in user_info.get("groups") or [])


def _label(obj: Mapping[str, Any] | None, key: str) -> str | None:
    labels = ((obj or {}).get("metadata") or {}).get("labels") or {}
    value = labels.get(key)
    return None if value is None else str(value)
