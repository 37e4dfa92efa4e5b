"""Values every layer shares: policies, normalized device requests, requests, decisions.

Everything here is a frozen dataclass or a Protocol so that the pure layers (engine, rewrite,
lint) can be handed facts without ever reaching for I/O, and so that a value computed once per
admission can be shared safely between threads of a gunicorn worker.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

JSON = Any
"""A decoded JSON/YAML value: dict, list, str, int, float, bool or None."""

Object = Mapping[str, Any]
"""A Kubernetes object as a plain dict (kopf's rule: Kubernetes objects are dicts)."""

API_VERSION = "dragate.io/v1alpha1"
ALL_MODE_DEVICES = 32
"""What ResourceQuota charges for `allocationMode: All` when the inventory is unknown."""

ADMIN_ACCESS_LABEL = "resource.kubernetes.io/admin-access"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE = "dragate"


class DragateError(Exception):
    """Root of dragate's few exceptions; each subclass is owned by one layer."""


class DeadlineExceeded(DragateError):
    """A review's time ran out before a step that may block or change state.

    Raised instead of starting the step, so a review answered as timed out has reserved nothing.
    """


@dataclass(frozen=True)
class Deadline:
    """When a review must be done, on `clock` (monotonic seconds), handed to every blocking step.

    The review runs in the request's own thread: nothing can interrupt it, so each step that
    may wait (a ledger lock, an API call) bounds its wait by `remaining()`, and every step that
    changes state first `check`s that there is time left. `Deadline.never()` is the CLI's.
    """

    at: float
    clock: Callable[[], float] = time.monotonic

    @classmethod
    def after(cls, seconds: float, clock: Callable[[], float] = time.monotonic) -> Deadline:
        return cls(clock() + seconds, clock)

    @classmethod
    def never(cls) -> Deadline:
        return cls(math.inf)

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


class Action(StrEnum):
    """What a failing CEL validation does."""

    DENY = "Deny"
    WARN = "Warn"
    AUDIT = "Audit"


class MappingAction(StrEnum):
    """What to do with a Pod that still asks for a legacy extended resource."""

    REWRITE = "Rewrite"
    WARN = "Warn"
    DENY = "Deny"
    IGNORE = "Ignore"


class AllocationMode(StrEnum):
    EXACT_COUNT = "ExactCount"
    ALL = "All"


class Operation(StrEnum):
    CREATE = "CREATE"
    UPDATE = "UPDATE"
    DELETE = "DELETE"
    CONNECT = "CONNECT"


# --------------------------------------------------------------------------- policies


@dataclass(frozen=True)
class Source:
    """Where a policy or manifest came from, for messages: `file:line`."""

    file: str = "<memory>"
    line: int = 0

    def __str__(self) -> str:
        return f"{self.file}:{self.line}" if self.line else self.file


@dataclass(frozen=True)
class LabelSelector:
    """A Kubernetes label selector (matchLabels and matchExpressions)."""

    match_labels: Mapping[str, str] = field(default_factory=dict)
    match_expressions: tuple[LabelRequirement, ...] = ()


@dataclass(frozen=True)
class LabelRequirement:
    key: str
    operator: str  # In | NotIn | Exists | DoesNotExist
    values: tuple[str, ...] = ()


@dataclass(frozen=True)
class QuotaLimit:
    device_class: str
    max_devices: int | None = None
    max_devices_per_claim: int | None = None


@dataclass(frozen=True)
class Tenant:
    """A set of namespaces and what they may hold together."""

    name: str
    namespaces: frozenset[str] = frozenset()
    namespace_selector: LabelSelector | None = None
    allowed_device_classes: frozenset[str] | None = None  # None: any class
    admin_access: bool = False
    quota: tuple[QuotaLimit, ...] = ()
    mapping_action: MappingAction | None = None  # overrides LegacyResourceMapping.action
    source: Source = Source()

    def limit_for(self, device_class: str) -> QuotaLimit | None:
        return next((q for q in self.quota if q.device_class == device_class), None)


class CompiledExpression(Protocol):
    """A CEL program compiled once at load; evaluation never raises."""

    source: str
    variables: frozenset[str]  # the root variables the expression reads

    def __hash__(self) -> int: ...

    def evaluate(self, activation: Mapping[str, Any], until: float | None = None) -> EvalResult: ...


@dataclass(frozen=True)
class EvalResult:
    """The outcome of one CEL evaluation: a value, or the error that stopped it."""

    value: Any = None
    error: str | None = None


@dataclass(frozen=True)
class Validation:
    expression: str
    message: str
    action: Action
    program: CompiledExpression | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class DeviceClassPolicy:
    """Rules for requests that use some device classes."""

    name: str
    device_class_names: frozenset[str]  # empty: every class
    max_count_per_request: int | None = None
    allow_allocation_mode_all: bool = True
    validations: tuple[Validation, ...] = ()
    source: Source = Source()

    def applies_to(self, device_class: str) -> bool:
        return not self.device_class_names or device_class in self.device_class_names


@dataclass(frozen=True)
class ResourceMapping:
    """One legacy extended resource (exact name or prefix) and the DRA class it becomes."""

    device_class: str
    resource_name: str | None = None
    resource_name_prefix: str | None = None
    selector: str | None = None  # CEL with `{suffix}` replaced by what follows the prefix

    def suffix_of(self, resource: str) -> str | None:
        """The part after the prefix (or "" for an exact match); None when it does not match."""
        if self.resource_name is not None:
            return "" if resource == self.resource_name else None
        prefix = self.resource_name_prefix or ""
        return (
            resource[len(prefix) :] if resource.startswith(prefix) and resource != prefix else None
        )


@dataclass(frozen=True)
class LegacyResourceMapping:
    name: str
    action: MappingAction = MappingAction.REWRITE
    resources: tuple[ResourceMapping, ...] = ()
    source: Source = Source()


@dataclass(frozen=True)
class Settings:
    """Engine-wide options (kind `Settings` in policy files; all optional)."""

    deny_unknown_namespaces: bool = False  # namespaces in no tenant are denied GPU use
    feasibility: Action | None = None  # deny/warn when no device can satisfy a request
    when_state_unavailable: Action = Action.DENY  # quota checks fail closed by default
    admin_access_editors: frozenset[str] = frozenset()  # users or `group:NAME` allowed to label
    exempt_namespaces: frozenset[str] = frozenset()
    exempt_service_accounts: frozenset[str] = frozenset()


@dataclass(frozen=True)
class PolicySet:
    """All loaded policies, compiled, immutable; swapped atomically on reload."""

    tenants: tuple[Tenant, ...] = ()
    class_policies: tuple[DeviceClassPolicy, ...] = ()
    mappings: tuple[LegacyResourceMapping, ...] = ()
    settings: Settings = Settings()
    digest: str = ""  # content hash, shown on /readyz and in metrics


# --------------------------------------------------------------------------- normalized DRA


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


@dataclass(frozen=True)
class ClaimSpec:
    """A ResourceClaim spec in normalized form; `label` says where it came from."""

    label: str
    requests: tuple[DeviceRequest, ...] = ()
    constraints: tuple[MatchConstraint, ...] = ()


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


@dataclass(frozen=True)
class AdmissionRequest:
    """The parts of an AdmissionReview request that dragate reads (or a CLI stand-in)."""

    uid: str
    kind: str
    group: str
    version: str
    resource: str
    operation: Operation
    namespace: str = ""
    name: str = ""
    sub_resource: str = ""
    object: Object | None = None
    old_object: Object | None = None
    dry_run: bool = False
    user_info: Mapping[str, Any] = field(default_factory=dict)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


# --------------------------------------------------------------------------- facts


@dataclass(frozen=True)
class Holder:
    """A claim (or a Pod's pending reservation) holding devices of one class."""

    key: str  # "namespace/name" of the claim, or "pod:<uid>" for a reservation
    devices: int


@dataclass(frozen=True)
class ClassUsage:
    used: int = 0
    holders: tuple[Holder, ...] = ()


@dataclass(frozen=True)
class Facts:
    """Everything the engine may know about the cluster, gathered once per request."""

    namespace: Object | None = None  # the Namespace object; None when unknown
    tenant: Tenant | None = None
    usage: Mapping[str, ClassUsage] = field(default_factory=dict)  # class -> tenant's usage
    templates: Mapping[str, Object] = field(default_factory=dict)  # name -> template in ns
    device_classes: Mapping[str, Object] = field(default_factory=dict)  # name -> DeviceClass
    class_capacity: Mapping[str, int] = field(default_factory=dict)  # class -> matching devices
    feasibility: Callable[[ClaimSpec], Sequence[str]] | None = None  # unsatisfiable requests


# --------------------------------------------------------------------------- outcomes


@dataclass(frozen=True)
class Reason:
    """Why something was denied, with the numbers a person needs to act."""

    policy: str
    message: str
    tenant: str = ""
    device_class: str = ""
    used: int | None = None
    limit: int | None = None
    requested: int | None = None
    holders: tuple[str, ...] = ()

    def __str__(self) -> str:
        return f"[{self.policy}] {self.message}"


@dataclass(frozen=True)
class Decision:
    """The engine's answer for one object.

    `holds` is what the object adds to its tenant's usage: per ledger holder (a claim, or one
    pod claim of a Pod), devices per class.
    """

    allowed: bool = True
    reasons: tuple[Reason, ...] = ()
    warnings: tuple[str, ...] = ()
    audit: Mapping[str, str] = field(default_factory=dict)
    tenant: str = ""
    holds: Mapping[str, Mapping[str, int]] = field(default_factory=dict)


@dataclass(frozen=True)
class RewriteResult:
    """What the legacy rewriter made of an object; `templates` must exist for it to run."""

    object: Object
    changed: bool = False
    notes: tuple[str, ...] = ()
    templates: tuple[Object, ...] = ()
    denied: tuple[str, ...] = ()


@dataclass(frozen=True)
class Verdict:
    """The pipeline's answer: the decision, and for mutation the patch that gets there."""

    decision: Decision
    patch: Sequence[Mapping[str, Any]] = ()
    patched: Object | None = None
    exempt: str = ""  # why the request was answered unreviewed; "" once reviewed

    @property
    def allowed(self) -> bool:
        return self.decision.allowed


# --------------------------------------------------------------------------- adapters


class FactsUnavailable(DragateError):
    """Raised by a ClusterState or Ledger that cannot answer within its bound.

    The pipeline turns it into an explicit outcome (`Settings.whenStateUnavailable`): quota
    cannot be checked without facts, so by default the request is denied and says why.
    """


class ClusterState(Protocol):
    """Read-only cluster facts: a snapshot file offline, watch caches in a cluster."""

    def namespace(self, name: str) -> Object | None: ...

    def template(self, namespace: str, name: str) -> Object | None: ...

    def device_classes(self) -> Mapping[str, Object]: ...

    def claims(self) -> Sequence[Object]: ...

    def namespaces(self) -> Sequence[Object]: ...

    def slices(self) -> Sequence[Object]: ...


@dataclass(frozen=True)
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
    ) -> Reservation:
        """Atomically set each holder's devices unless a class would exceed its limit.

        A holder already present is replaced, not added to, so admitting the same object
        twice (reinvocation, retries) never counts it twice. When `deadline` passes before
        the change is stored, raise DeadlineExceeded (or FactsUnavailable) having stored nothing.
        """
        ...

    def release(self, tenant: str, holder: str) -> None: ...
