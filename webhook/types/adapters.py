"""What the pipeline asks of its adapters: cluster facts, the ledger, and the deadline that
bounds every blocking call; the facts gathered once per request.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from webhook.types.basics import DragateError, Object
from webhook.types.claimspec import ClaimSpec
from webhook.types.policyset import Tenant
from webhook.types.records import record


class DeadlineExceeded(DragateError):
    """A review's time ran out before a step that may block or change state.

    Raised instead of starting the step, so a review answered as timed out has reserved nothing.
    """


def no_pause() -> None:
    """A checkpoint's pause when nothing else needs the thread (the CLI, the tests)."""


PAUSE_INTERVAL = 0.002
"""Seconds of a review's work between two pauses at its checkpoints."""


class _Pacing:
    """When a deadline's checkpoint next pauses: the only state a Deadline changes, owned by
    the one review (one thread) the deadline belongs to."""

    __slots__ = ("due",)

    def __init__(self, due: float) -> None:
        self.due = due

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Pacing) and other.due == self.due

    __hash__ = None  # type: ignore[assignment]  # changes: never a key


@record
class Deadline:
    """When a review must be done, on `clock` (monotonic seconds), handed to every blocking step.

    The review runs in the request's own thread: nothing can interrupt it, so each step that
    may wait (a ledger lock, an API call) bounds its wait by `remaining()`, every step that
    changes state first `check`s that there is time left, and long work (a rewrite or
    judgment per container, per claim) passes a `checkpoint` per item, which stops it within
    an item of the deadline and lets the server's other reviews run (`pause`).
    `Deadline.never()` is the CLI's.
    """

    at: float
    clock: Callable[[], float] = time.monotonic
    pause: Callable[[], None] = no_pause
    pacing: _Pacing = field(default_factory=lambda: _Pacing(-math.inf), compare=False, repr=False)

    @classmethod
    def after(
        cls,
        seconds: float,
        clock: Callable[[], float] = time.monotonic,
        pause: Callable[[], None] = no_pause,
    ) -> Deadline:
        now = clock()
        return cls(now + seconds, clock, pause, _Pacing(now + PAUSE_INTERVAL))

    @classmethod
    def never(cls) -> Deadline:
        return NEVER

    def remaining(self) -> float:
        """Seconds left (inf without a bound); never negative."""
        return max(self.at - self.clock(), 0.0)

    def bound(self, seconds: float) -> float:
        """`seconds`, or less when the deadline comes first: the timeout for one blocking call."""
        return min(seconds, self.remaining())

    def check(self, step: str) -> None:
        """Raise DeadlineExceeded when no time is left to start `step`."""
        if self.clock() >= self.at:
            raise DeadlineExceeded(f"deadline passed before {step}")

    def checkpoint(self, step: str) -> None:
        """`check`, inside long work: and `pause` once the review has worked PAUSE_INTERVAL
        since the last pause, so the thread is handed over every couple of milliseconds at
        most. One clock read when no pause is due; none at all without a deadline or a pause
        (the CLI's)."""
        if self.at == math.inf and self.pause is no_pause:
            return
        now = self.clock()
        if now >= self.at:
            raise DeadlineExceeded(f"deadline passed during {step}")
        pacing = self.pacing
        if now >= pacing.due:
            self.pause()
            pacing.due = self.clock() + PAUSE_INTERVAL  # the review's own work, not the pause


NEVER = Deadline(math.inf)
"""No deadline: `checkpoint` returns at once, and nothing of it changes (shared safely)."""


class FactsUnavailable(DragateError):
    """Raised by a ClusterState or Ledger that cannot answer within its bound.

    The pipeline turns it into an explicit outcome (`Settings.whenStateUnavailable`): quota
    cannot be checked without facts, so by default the request is denied and says why.
    """


@dataclass(frozen=True)
class Holder:
    """A claim (or a Pod's pending reservation) holding devices of one class."""

    key: str  # "claim:<namespace>/<name>", or "pod:<uid>/<pod claim>" for a Pod's reservation
    devices: int
    name: str = ""  # a Pod's "<namespace>/<name>" when known (the key has only its uid)


@dataclass(frozen=True)
class ClassUsage:
    used: int = 0
    holders: tuple[Holder, ...] = ()
    pending: int = field(default=0, compare=False)
    """Of `used`, the devices of holders admitted and not yet confirmed (shown, never judged)."""

    def held_by(self, keys: Collection[str]) -> int:
        """Devices the holders named by `keys` hold (a re-admitted object's own share): asked
        by every review, so by an index made once per usage, not a walk of every holder."""
        if not keys:
            return 0
        index = self._index
        return sum(index.get(key, 0) for key in keys)

    @functools.cached_property
    def _index(self) -> dict[str, int]:
        index: dict[str, int] = {}
        for holder in self.holders:
            index[holder.key] = index.get(holder.key, 0) + holder.devices
        return index


@record
class Facts:
    """Everything the engine may know about the cluster, gathered once per request."""

    namespace: Object | None = None  # the Namespace object; None when unknown
    tenant: Tenant | None = None
    usage: Mapping[str, ClassUsage] = field(default_factory=dict)  # class -> tenant's usage
    templates: Mapping[str, Object] = field(default_factory=dict)  # name -> template in ns
    device_classes: Mapping[str, Object] = field(default_factory=dict)  # name -> DeviceClass
    class_capacity: Mapping[str, int] = field(default_factory=dict)  # class -> matching devices
    feasibility: Callable[[ClaimSpec], Sequence[str]] | None = None  # unsatisfiable requests
    binding: Callable[[ClaimSpec], Sequence[str]] | None = None  # requests that wait to bind

    def with_usage(self, usage: Mapping[str, ClassUsage]) -> Facts:
        """`dataclasses.replace(self, usage=usage)`, at a third of its cost: every review of a
        claim or Pod adds the tenant's usage once gathered (tests/types: every field kept)."""
        return Facts(self.namespace, self.tenant, usage, self.templates, self.device_classes,
                     self.class_capacity, self.feasibility, self.binding)  # fmt: skip

    def with_templates(self, templates: Mapping[str, Object]) -> Facts:
        """`dataclasses.replace(self, templates=templates)`, as cheaply (each rewrite)."""
        return Facts(self.namespace, self.tenant, self.usage, templates, self.device_classes,
                     self.class_capacity, self.feasibility, self.binding)  # fmt: skip


class ClusterState(Protocol):
    """Read-only cluster facts: a snapshot file offline, watch caches in a cluster."""

    def namespace(self, name: str) -> Object | None: ...

    def template(self, namespace: str, name: str) -> Object | None: ...

    def device_classes(self) -> Mapping[str, Object]: ...

    def claims(self) -> Sequence[Object]: ...

    def namespaces(self) -> Sequence[Object]: ...

    def slices(self) -> Sequence[Object]: ...

    def workloads(self) -> Sequence[Object] | None:
        """The gang kinds' workloads (Jobs, JobSets, LeaderWorkerSets) and Pods, for the truth
        of gangs' holders; None when the state does not keep them."""
        ...

    def workload(self, namespace: str, kind: str, name: str) -> Object | None:
        """One gang workload or PodGroup (or Workload) by kind and name, read when a PodGroup
        or one of its Pods is admitted; None when absent, not served or not kept."""
        ...


@record
class Reservation:
    """The outcome of asking the ledger to hold devices: granted, or the usage that refused it."""

    granted: bool
    usage: Mapping[str, ClassUsage] = field(default_factory=dict)


class Ledger(Protocol):
    """Per-tenant device usage, changed only by atomic check-and-reserve."""

    def usage(self, tenant: str, deadline: Deadline | None = None) -> Mapping[str, ClassUsage]:
        """The tenant's usage; a wait for the store is bounded by `deadline` too."""
        ...

    def reserve(
        self,
        tenant: str,
        holds: Mapping[str, Mapping[str, int]],
        limits: Mapping[str, int],
        deadline: Deadline | None = None,
        names: Mapping[str, str] | None = None,
    ) -> Reservation:
        """Atomically set each holder's devices unless a class would exceed its limit.

        A holder already present is replaced, not added to, so admitting the same object
        twice (reinvocation, retries) never counts it twice. When `deadline` passes before
        the change is stored, raise DeadlineExceeded (or FactsUnavailable) having stored nothing.
        `names` gives holders keyed by a Pod's uid the Pod's `<namespace>/<name>`, stored
        beside them for denials to show.
        """
        ...

    def release(self, tenant: str, holder: str) -> None: ...
