"""How the CLI enters the pipeline: the AdmissionRequest the API server would send."""

from __future__ import annotations

import uuid
from typing import Any

from webhook.types import AdmissionRequest, Object, Operation

CLUSTER_KINDS = frozenset({"Namespace", "DeviceClass", "ResourceSlice", "Node"})


def request_from_object(
    obj: Object,
    *,
    operation: Operation = Operation.CREATE,
    namespace: str = "",
    dry_run: bool = False,
    user_info: dict[str, Any] | None = None,
) -> AdmissionRequest:
    """The AdmissionRequest the API server would send for `obj`: how the CLI enters the pipeline."""
    meta = obj.get("metadata") or {}
    api_version = str(obj.get("apiVersion", ""))
    group, _, version = api_version.rpartition("/")
    kind = str(obj.get("kind", ""))
    return AdmissionRequest(
        uid=str(uuid.uuid4()),
        kind=kind,
        group=group,
        version=version,
        resource=kind.lower() + "s",
        operation=operation,
        namespace=str(
            meta.get("namespace") or namespace or ("default" if _namespaced(kind) else "")
        ),
        name=str(meta.get("name", "")),
        object=obj if operation != Operation.DELETE else None,
        old_object=obj if operation in (Operation.UPDATE, Operation.DELETE) else None,
        dry_run=dry_run,
        user_info=user_info or {"username": "dragate-cli"},
    )


def _namespaced(kind: str) -> bool:
    return kind not in CLUSTER_KINDS
