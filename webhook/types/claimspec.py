"""Device requests in normalized form, the same for every resource.k8s.io version."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from enum import StrEnum


class AllocationMode(StrEnum):
    EXACT_COUNT = "ExactCount"
    ALL = "All"


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

    def leaves(self) -> tuple[DeviceRequest, ...]:
        """The requests that name a class: itself, or its alternatives."""
        return self.alternatives or (self,)

    def __hash__(self) -> int:
        return self._hash

    @functools.cached_property
    def _hash(self) -> int:
        """The generated hash of the fields, computed once: a request keys several memos per
        review (the object is frozen, so the value cannot go stale)."""
        return hash(
            (
                self.name,
                self.device_class,
                self.count,
                self.allocation_mode,
                self.admin_access,
                self.selectors,
                self.alternatives,
            )
        )


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
        return hash((self.label, self.requests, self.constraints))


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
