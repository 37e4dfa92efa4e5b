"""v1, v1beta2 and v1beta1 DRA shapes turned into one internal form.

Policies are written once against `DeviceRequest`; whether the user sent a flat v1beta1
request or a v1 `exactly:`/`firstAvailable:` one must not change any answer. The API server
converts versions only for storage, so a webhook (matchPolicy Equivalent) and the offline CLI
can both see any of the three.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from webhook.types import (
    AllocationMode,
    ClaimSpec,
    DeviceRequest,
    DragateError,
    MatchConstraint,
    Object,
    PodClaim,
    Toleration,
)

FLAT_VERSIONS = frozenset({"resource.k8s.io/v1beta1"})
CONTAINER_FIELDS = ("initContainers", "containers")


class ObjectError(DragateError):
    """An object whose shape the engine cannot read; becomes a denial reason, never a crash."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message


def claim_spec(obj: Object, label: str) -> ClaimSpec:
    """The normalized spec of a ResourceClaim."""
    return _spec(obj.get("spec"), str(obj.get("apiVersion", "")), label, "spec")


def template_claim_spec(obj: Object, label: str) -> ClaimSpec:
    """The normalized claim spec inside a ResourceClaimTemplate (`spec.spec`)."""
    outer = _mapping(obj.get("spec"), "spec")
    return _spec(outer.get("spec"), str(obj.get("apiVersion", "")), label, "spec.spec")


def _spec(spec: Any, api_version: str, label: str, path: str) -> ClaimSpec:
    devices = _mapping(_mapping(spec, path).get("devices"), f"{path}.devices")
    raw = _list(devices.get("requests"), f"{path}.devices.requests")
    flat = api_version in FLAT_VERSIONS
    requests = tuple(
        _request(item, flat, f"{path}.devices.requests[{i}]") for i, item in enumerate(raw)
    )
    constraints = tuple(_constraints(devices.get("constraints"), f"{path}.devices.constraints"))
    return ClaimSpec(label=label, requests=requests, constraints=constraints)


def _constraints(raw: Any, path: str) -> Iterator[MatchConstraint]:
    """The `matchAttribute` constraints (others, such as distinctAttribute, are not modelled)."""
    for i, item in enumerate(_list(raw, path)):
        constraint = _mapping(item, f"{path}[{i}]")
        attribute = constraint.get("matchAttribute")
        if attribute is None:
            continue
        names = _list(constraint.get("requests"), f"{path}[{i}].requests")
        yield MatchConstraint(
            attribute=_string(attribute, f"{path}[{i}].matchAttribute"),
            requests=tuple(_string(n, f"{path}[{i}].requests") for n in names),
        )


def _request(raw: Any, flat: bool, path: str) -> DeviceRequest:
    item = _mapping(raw, path)
    name = _string(item.get("name"), f"{path}.name")
    alternatives = item.get("firstAvailable")
    if alternatives is not None:
        subs = _list(alternatives, f"{path}.firstAvailable")
        leaves = tuple(
            _exact(f"{name}/{_string(_mapping(s, p).get('name'), p + '.name')}", s, p)
            for s, p in ((s, f"{path}.firstAvailable[{i}]") for i, s in enumerate(subs))
        )
        return DeviceRequest(name=name, alternatives=leaves)
    if flat:
        return _exact(name, item, path)
    if "exactly" not in item:
        raise ObjectError(path, "exactly one of `exactly` or `firstAvailable` is required")
    return _exact(name, item["exactly"], f"{path}.exactly")


def _exact(name: str, raw: Any, path: str) -> DeviceRequest:
    item = _mapping(raw, path)
    mode = item.get("allocationMode") or AllocationMode.EXACT_COUNT.value
    if mode not in {m.value for m in AllocationMode}:
        raise ObjectError(f"{path}.allocationMode", f"unknown allocation mode {mode!r}")
    count = item.get("count", 1)
    if not isinstance(count, int) or isinstance(count, bool):
        raise ObjectError(f"{path}.count", f"expected an integer, got {count!r}")
    return DeviceRequest(
        name=name,
        device_class=_string(item.get("deviceClassName"), f"{path}.deviceClassName"),
        count=0 if mode == AllocationMode.ALL else count,
        allocation_mode=AllocationMode(mode),
        admin_access=item.get("adminAccess") is True,
        selectors=tuple(_selectors(item.get("selectors"), f"{path}.selectors")),
        tolerations=tuple(_tolerations(item.get("tolerations"), f"{path}.tolerations")),
    )


def _tolerations(raw: Any, path: str) -> Iterator[Toleration]:
    """`tolerations` (v1, v1beta2 and v1beta1 alike); an absent operator is `Equal`, as the
    API server defaults it."""
    for i, item in enumerate(_list(raw, path)):
        entry = _mapping(item, f"{path}[{i}]")
        yield Toleration(
            key=_optional_string(entry.get("key"), f"{path}[{i}].key"),
            operator=_optional_string(entry.get("operator"), f"{path}[{i}].operator") or "Equal",
            value=_optional_string(entry.get("value"), f"{path}[{i}].value"),
            effect=_optional_string(entry.get("effect"), f"{path}[{i}].effect"),
        )


def _selectors(raw: Any, path: str) -> Iterator[str]:
    for i, selector in enumerate(_list(raw, path) if raw is not None else []):
        cel = _mapping(_mapping(selector, f"{path}[{i}]").get("cel"), f"{path}[{i}].cel")
        yield _string(cel.get("expression"), f"{path}[{i}].cel.expression")


def pod_claims(pod: Object) -> tuple[PodClaim, ...]:
    """The Pod's `spec.resourceClaims`, each with the containers that reference it."""
    return tuple(PodClaim(*ref) for ref in pod_claim_refs(pod))


ClaimRef = tuple[str, str | None, str | None, tuple[str, ...]]
"""`PodClaim`'s fields, as a plain tuple: hashed and compared in C, where a frozen
dataclass is built and hashed in Python (every reviewed Pod keys a memo with them)."""


def pod_claim_refs(pod: Object) -> tuple[ClaimRef, ...]:
    """`pod_claims(pod)` as plain tuples: name, template name, claim name, containers."""
    spec = _mapping(pod.get("spec"), "spec")
    users = _claim_users(spec)
    refs = []
    for i, raw in enumerate(_list(spec.get("resourceClaims") or [], "spec.resourceClaims")):
        # the checks' paths are formatted only when the plain case does not hold
        item = raw if type(raw) is dict else _mapping(raw, f"spec.resourceClaims[{i}]")
        name = item.get("name")
        if type(name) is not str or not name:
            name = _string(name, f"spec.resourceClaims[{i}].name")
        template = item.get("resourceClaimTemplateName") or None
        claim = item.get("resourceClaimName") or None
        refs.append((name, template, claim, tuple(users.get(name, ()))))
    return tuple(refs)


def _claim_users(spec: Mapping[str, Any]) -> dict[str, list[str]]:
    users: dict[str, list[str]] = {}
    for field in CONTAINER_FIELDS:
        for container in spec.get(field) or []:
            if type(container) is not dict and not isinstance(container, Mapping):
                continue  # (the concrete type first: an ABC's isinstance costs more)
            for ref in (container.get("resources") or {}).get("claims") or []:
                if (type(ref) is dict or isinstance(ref, Mapping)) and isinstance(
                    ref.get("name"), str
                ):
                    users.setdefault(ref["name"], []).append(str(container.get("name", "")))
    return users


def _mapping(value: Any, path: str) -> Mapping[str, Any]:
    if type(value) is dict:  # decoded JSON: checked first, an ABC's isinstance costs more
        return value
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ObjectError(path, f"expected an object, got {type(value).__name__}")
    return value


def _list(value: Any, path: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ObjectError(path, f"expected a list, got {type(value).__name__}")
    return value


def _optional_string(value: Any, path: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ObjectError(path, f"expected a string, got {type(value).__name__}")
    return value


def _string(value: Any, path: str) -> str:
    if not isinstance(value, str) or not value:
        raise ObjectError(path, "required string is missing")
    return value
