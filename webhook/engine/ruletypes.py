"""The declared types of a DeviceClassPolicy rule's variables, one environment per kind.

A rule runs when a Pod, a ResourceClaim or a ResourceClaimTemplate is created
(`evaluate.CLAIM_KINDS`), so it is type-checked once for each: `object` and `oldObject` have
that kind's type from the Kubernetes OpenAPI schema, `namespace` the Namespace's (null when
the namespace is unknown: object types accept `== null`), `request` exactly the fields
`rules.request_view` builds and `userInfo` Kubernetes' UserInfo. `compile_expression` accepts a
rule that type-checks for each kind (`check_in_each`); a kind test (`object.kind == 'Pod'`)
guards the fields of one kind (`kindtests`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.engine.cel.schematypes import schema_type
from webhook.engine.cel.types import (
    BOOL,
    INT,
    STRING,
    CelType,
    TypeEnvironment,
    list_of,
    map_of,
    object_type,
)

RULE_KINDS = ("Pod", "ResourceClaim", "ResourceClaimTemplate")
REQUEST = "dragate.Request"
USER_INFO = "kubernetes.UserInfo"
REQUEST_FIELDS: Mapping[str, CelType] = {
    "name": STRING,
    "deviceClassName": STRING,
    "count": INT,
    "allocationMode": STRING,
    "adminAccess": BOOL,
    "selectors": list_of(STRING),
}
"""`request`: one normalized device request (a `firstAvailable` alternative is one too)."""
USER_INFO_FIELDS: Mapping[str, CelType] = {
    "username": STRING,
    "uid": STRING,
    "groups": list_of(STRING),
    "extra": map_of(STRING, list_of(STRING)),
}
"""`userInfo`: authentication.k8s.io/v1 UserInfo, as in the AdmissionReview."""


def rule_environments(schemas: Mapping[str, Any]) -> tuple[TypeEnvironment, ...]:
    """One environment per kind a rule sees, from pinned schemas ({roots, definitions})."""
    definitions, roots = schemas["definitions"], schemas["roots"]
    namespace, namespace_objects = schema_type(definitions, roots["Namespace"], "Namespace")
    fixed: dict[str, Mapping[str, CelType]] = {REQUEST: REQUEST_FIELDS, USER_INFO: USER_INFO_FIELDS}
    environments = []
    for kind in RULE_KINDS:
        object_kind, objects = schema_type(definitions, roots[kind], kind)
        variables = {
            "request": object_type(REQUEST),
            "userInfo": object_type(USER_INFO),
            "operation": STRING,
            "tenant": STRING,
            "namespace": namespace,
            "object": object_kind,
            "oldObject": object_kind,
        }
        merged = {**fixed, **namespace_objects, **objects}
        environments.append(TypeEnvironment(kind, variables, merged, kind=kind))
    return tuple(environments)
