"""Device requests in normalized form, the same for every resource.k8s.io version."""

from __future__ import annotations

import functools
from dataclasses import dataclass, fields
from enum import StrEnum


class AllocationMode(StrEnum):
    EXACT_COUNT = "ExactCount"
    ALL = "All"


def _fields_hash(obj: object) -> int:
    """The hash a frozen dataclass generates (its fields, in order), for one that keeps it."""
    return hash(tuple(getattr(obj, f.name) for f in fields(obj)))  # type: ignore[arg-type]


@dataclass(frozen=True)
class DeviceRequest:
    """One request of a claim, the same for v1, v1beta2 and v1beta1 shapes.

    For a `firstAvailable` request `device_class` is "" and `alternatives` holds the
    subrequests, each a DeviceRequest named `<request>/<subrequest>`.
    """

    name: str
    device_class: str = ""
    count: int = 1
    allocation_mode: AllocationMode = AllocationMode.EXACT_COUNT
    admin_access: bool = False
    selectors: tuple[str, ...] = ()
    alternatives: tuple[DeviceRequest, ...] = ()
    tolerations: tuple[Toleration, ...] = ()

    def leaves(self) -> tuple[DeviceRequest, ...]:
        """The requests that name a class: itself, or its alternatives."""
        return self.alternatives or (self,)

    def __hash__(self) -> int:
        return self._hash

    @functools.cached_property
    def _hash(self) -> int:
        """The fields' hash, computed once: a request keys several memos per review (the
        object is frozen, so the value cannot go stale)."""
        return _fields_hash(self)


@dataclass(frozen=True)
class Toleration:
    """`tolerations[]` of a request (KEP-5055): which device taints it may be allocated past.

    Empty `key` with `Exists` tolerates every taint; empty `effect` every effect. The API
    server defaults `operator` to `Equal`."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        """resourceclaim.ToleratesTaint, as kube-scheduler's allocator applies it."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator in ("", "Equal"):
            return self.value == taint.value
        return self.operator == "Exists"


@dataclass(frozen=True)
class Taint:
    """`devices[].taints[]` of a ResourceSlice: only NoSchedule and NoExecute keep a device from
    being allocated; None and effects unknown to the allocator do not."""

    key: str
    value: str = ""
    effect: str = ""

    @property
    def blocks(self) -> bool:
        return self.effect in BLOCKING_EFFECTS


BLOCKING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


def tolerated(taints: tuple[Taint, ...], tolerations: tuple[Toleration, ...]) -> bool:
    """Whether a request with `tolerations` may be allocated a device with `taints`."""
    return all(not t.blocks or any(o.tolerates(t) for o in tolerations) for t in taints)


@dataclass(frozen=True)
class ClaimSpec:
    """A ResourceClaim spec in normalized form; `label` says where it came from."""

    label: str
    requests: tuple[DeviceRequest, ...] = ()
    constraints: tuple[MatchConstraint, ...] = ()

    def __hash__(self) -> int:
        return self._hash

    @functools.cached_property
    def _hash(self) -> int:
        """As DeviceRequest's: the fields' hash, computed once."""
        return _fields_hash(self)


@dataclass(frozen=True)
class MatchConstraint:
    """`constraints[].matchAttribute`: the devices of these requests share this attribute."""

    attribute: str  # fully qualified, `domain/name`
    requests: tuple[str, ...] = ()  # request names (`request/subrequest` too); empty: all


@dataclass(frozen=True)
class PodClaim:
    """One entry of `pod.spec.resourceClaims` and the containers that use it."""

    name: str
    template_name: str | None = None
    claim_name: str | None = None
    containers: tuple[str, ...] = ()
