"""A loaded, compiled policy set: tenants, device class policies, legacy mappings, settings.

Frozen, so a reload swaps the whole set atomically and reviews in flight keep the one they
started with; what the engine remembers under a set is owned by it (`memos`) and goes with it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from webhook.types.memos import Memos


@dataclass(frozen=True)
class Source:
    """Where a policy or manifest came from, for messages: `file:line`."""

    file: str = "<memory>"
    line: int = 0

    def __str__(self) -> str:
        return f"{self.file}:{self.line}" if self.line else self.file


class Action(StrEnum):
    """What a failing rule does: a validation's `action`, a policy's `enforcement`.

    Deny refuses the object; Warn admits it with a kubectl warning; Audit admits it and
    records the violation (an audit annotation and a metric). The names and meanings are
    ValidatingAdmissionPolicyBinding's `validationActions`.
    """

    DENY = "Deny"
    WARN = "Warn"
    AUDIT = "Audit"


class FailurePolicy(StrEnum):
    """What a DeviceClassPolicy rule that cannot be evaluated does (VAP's `failurePolicy`)."""

    FAIL = "Fail"  # the error fails the rule: its action applies (a Deny rule denies)
    IGNORE = "Ignore"  # the rule is skipped; the error is a warning


class MappingAction(StrEnum):
    """What to do with a Pod that still asks for a legacy extended resource."""

    AUTO = "Auto"  # Native where a DeviceClass maps the name (KEP-5004), Rewrite elsewhere
    REWRITE = "Rewrite"
    NATIVE = "Native"  # kept for Kubernetes to map through the DeviceClass; still charged
    WARN = "Warn"
    DENY = "Deny"
    IGNORE = "Ignore"

    def keeps_native(self, resource: str, native: Collection[str]) -> bool:
        """Whether a Pod keeps `resource` for Kubernetes to map (`native`: the names a
        DeviceClass declares as its `extendedResourceName`)."""
        return self is MappingAction.NATIVE or (self is MappingAction.AUTO and resource in native)

    def rewrites(self, resource: str, native: Collection[str]) -> bool:
        """Whether a Pod's `resource` is rewritten into DRA claims."""
        return self is MappingAction.REWRITE or (
            self is MappingAction.AUTO and resource not in native
        )


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
    enforcement: Action = Action.DENY  # what its class rules and quota do when broken

    def limit_for(self, device_class: str) -> QuotaLimit | None:
        for limit in self.quota:  # a loop, not next(generator): asked per class per review
            if limit.device_class == device_class:
                return limit
        return None


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
    failure_policy: FailurePolicy = FailurePolicy.FAIL
    enforcement: Action = Action.DENY  # its built-in rules' (and action-less validations')

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
    action: MappingAction = MappingAction.AUTO
    resources: tuple[ResourceMapping, ...] = ()
    source: Source = Source()


GANG_KINDS = frozenset({"Job", "JobSet", "LeaderWorkerSet", "PodGroup"})
"""The workload kinds that may be gangs (`Settings.gangKinds`, all of them by default)."""


@dataclass(frozen=True)
class Settings:
    """Engine-wide options (kind `Settings` in policy files; all optional)."""

    deny_unknown_namespaces: bool = False  # namespaces in no tenant are denied GPU use
    feasibility: Action | None = None  # deny/warn when no device can satisfy a request
    when_state_unavailable: Action = Action.DENY  # quota checks fail closed by default
    admin_access_editors: frozenset[str] = frozenset()  # users or `group:NAME` allowed to label
    exempt_namespaces: frozenset[str] = frozenset()
    exempt_service_accounts: frozenset[str] = frozenset()
    gang_kinds: frozenset[str] = GANG_KINDS  # workload kinds charged whole at creation


@dataclass(frozen=True)
class ObjectVerdict:
    """A policy object of the cluster read into a set: enforced, or left out and why (`message`;
    its status says so too). `generation` is the one judged."""

    kind: str
    name: str
    generation: int
    message: str = ""

    @property
    def enforced(self) -> bool:
        return not self.message


@dataclass(frozen=True)
class PolicySet:
    """All loaded policies, compiled, immutable; swapped atomically on reload."""

    tenants: tuple[Tenant, ...] = ()
    class_policies: tuple[DeviceClassPolicy, ...] = ()
    mappings: tuple[LegacyResourceMapping, ...] = ()
    settings: Settings = Settings()
    digest: str = ""  # content hash, shown on /readyz and in metrics
    objects: tuple[ObjectVerdict, ...] = ()  # the cluster's policy objects read into it
    memos: Memos = field(
        default_factory=Memos, init=False, compare=False, hash=False, repr=False
    )  # what the engine and the rewriter remember under this set (`memos.py`)

    @property
    def not_enforced(self) -> tuple[ObjectVerdict, ...]:
        return tuple(v for v in self.objects if not v.enforced)
