"""Init containers and the devices a Pod needs: the device plugin's arithmetic, as one claim.

With the device plugin a Pod needs, per resource, `max(init_i + sidecars started before i,
app containers + all sidecars)`: init containers run one at a time before the app containers,
and the kubelet hands an init container's devices on to the containers that start after it.
The scheduler charges that maximum, not the sum. One claim per container would need the sum
(init 8 + main 8 = 16 GPUs where 8 fitted), so for a resource that a regular init container
asks for, the Pod gets one shared claim instead:

- one request per long-running container (app containers and restartable sidecars), so each
  keeps seeing only its own devices, as with the device plugin;
- one `init` request with what the init containers need beyond that;
- each init container references the requests of the containers that are not running while
  it runs (app containers, sidecars declared after it) plus `init`: at least what it asked
  for, on devices nobody else holds at that moment.

The claim then holds exactly the device plugin's effective request. An init container may see
more devices than it asked for (never fewer). A layout that a claim cannot hold (more than 32
requests or 32 devices, Kubernetes' limits per claim) is not built: the caller keeps one
claim per container and says why.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from webhook.types.kubelimits import ALLOCATION_RESULTS_MAX, DEVICE_REQUESTS_MAX


class Role(StrEnum):
    INIT = "init"  # a regular init container: runs alone, to completion, before the others
    SIDECAR = "sidecar"  # an init container with `restartPolicy: Always`: runs alongside
    APP = "app"


@dataclass(frozen=True)
class Member:
    """One container asking for the shared resource, in Pod order (init containers first)."""

    role: Role
    count: int


@dataclass(frozen=True)
class Layout:
    """Requests of the shared claim and which of them each member references.

    `own[i]` is the count of member i's own request (long-running members only); `extra` is the
    `init` request's count (0: no such request); `refs[i]` lists, for an init member i, the
    members whose requests it references (it also references `init` when `extra` > 0).
    """

    own: dict[int, int]
    extra: int
    refs: dict[int, tuple[int, ...]]

    @property
    def total(self) -> int:
        return sum(self.own.values()) + self.extra


def effective_request(members: Sequence[Member]) -> int:
    """What the device plugin (and the scheduler's NodeResourcesFit) needed for the Pod."""
    long_running = sum(m.count for m in members if m.role != Role.INIT)
    most, sidecars_before = long_running, 0
    for member in members:
        if member.role == Role.INIT:
            most = max(most, member.count + sidecars_before)
        elif member.role == Role.SIDECAR:
            sidecars_before += member.count
    return most


def layout(members: Sequence[Member]) -> Layout | None:
    """The shared claim for `members`, or None when one claim cannot hold it."""
    own = {i: m.count for i, m in enumerate(members) if m.role != Role.INIT}
    if len(own) + 1 > DEVICE_REQUESTS_MAX:
        return None
    not_yet_running = _not_yet_running(members)
    extra = max(
        (
            m.count - sum(own[j] for j in not_yet_running[i])
            for i, m in enumerate(members)
            if m.role == Role.INIT
        ),
        default=0,
    )
    result = Layout(
        own,
        max(extra, 0),
        {i: not_yet_running[i] for i, m in enumerate(members) if m.role == Role.INIT},
    )
    return result if result.total <= ALLOCATION_RESULTS_MAX else None


def _not_yet_running(members: Sequence[Member]) -> dict[int, tuple[int, ...]]:
    """Per init member, the long-running members that start after it (at most 31 each)."""
    later: list[int] = []
    found: dict[int, tuple[int, ...]] = {}
    for i in reversed(range(len(members))):
        role = members[i].role
        if role == Role.INIT:
            found[i] = tuple(reversed(later))
        else:
            later.append(i)
    return found
