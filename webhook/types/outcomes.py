"""A review's request and what is answered: reasons, the engine's decision, the rewrite, and
the pipeline's verdict.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from webhook.types.basics import Object
from webhook.types.policyset import Action
from webhook.types.records import record


class Operation(StrEnum):
    CREATE = "CREATE"
    UPDATE = "UPDATE"
    DELETE = "DELETE"
    CONNECT = "CONNECT"


@record
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

    def with_object(self, obj: Object | None) -> AdmissionRequest:
        """`dataclasses.replace(self, object=obj)`, at a quarter of its cost: each rewritten Pod
        is judged as the request it becomes (tests/types: every field kept)."""
        return AdmissionRequest(self.uid, self.kind, self.group, self.version, self.resource,
                                self.operation, self.namespace, self.name, self.sub_resource, obj,
                                self.old_object, self.dry_run, self.user_info)  # fmt: skip


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
    rule: str = ""  # the rule of `policy` broken, as PolicyReports group results

    def __str__(self) -> str:
        return f"[{self.policy}] {self.message}"


@dataclass(frozen=True)
class Violation:
    """A policy rule the object breaks and is admitted anyway: `mode` Warn or Audit (the
    rule's action, or its policy's `enforcement`), with the reason a denial would give."""

    mode: Action
    reason: Reason

    @property
    def policy_kind(self) -> str:
        return self.reason.policy.partition("/")[0]

    @property
    def policy_name(self) -> str:
        return self.reason.policy.partition("/")[2]


@record
class Decision:
    """The engine's answer for one object.

    `holds` is what the object adds to its tenant's usage: per ledger holder (a claim, or one
    pod claim of a Pod), devices per class; `names` the `<namespace>/<name>` of the Pod behind
    holders keyed by its uid, stored beside them for denials to show. `violations` are the
    rules broken under Warn or Audit: already in `warnings` and `audit` as text, kept whole
    for metrics and reports.
    """

    allowed: bool = True
    reasons: tuple[Reason, ...] = ()
    warnings: tuple[str, ...] = ()
    audit: Mapping[str, str] = field(default_factory=dict)
    tenant: str = ""
    holds: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    violations: tuple[Violation, ...] = ()
    names: Mapping[str, str] = field(default_factory=dict)  # holder -> its Pod's ns/name


@dataclass(frozen=True, slots=True)
class AuditResult:
    """The background audit's verdict on one existing object for one policy."""

    namespace: str
    api_version: str
    kind: str
    name: str
    uid: str
    policy: str  # "Tenant/team-a", "DeviceClassPolicy/gpu-rules", or "dragate" for a pass
    result: str  # pass | fail | warn, as PolicyReports spell them
    message: str
    tenant: str = ""
    properties: Mapping[str, str] = field(default_factory=dict)
    rule: str = ""  # "quota", "validations[0]", "feasibility", ...: what Policy Reporter groups by


@record
class RewriteResult:
    """What the legacy rewriter made of an object; `templates` must exist for it to run."""

    object: Object
    changed: bool = False
    notes: tuple[str, ...] = ()
    templates: tuple[Object, ...] = ()
    denied: tuple[str, ...] = ()


@record
class Verdict:
    """The pipeline's answer: the decision, and for mutation the patch that gets there."""

    decision: Decision
    patch: Sequence[Mapping[str, Any]] = ()
    rewritten: Callable[[], Object] | None = field(default=None, compare=False, repr=False)
    """Builds the patched object when `patched` is read (None: unchanged); `patch` says it."""
    exempt: str = ""  # why the request was answered unreviewed; "" once reviewed

    @property
    def allowed(self) -> bool:
        return self.decision.allowed

    @property
    def patched(self) -> Object | None:
        """The object with `patch` applied (None: unchanged); the webhook sends only the patch."""
        return self.rewritten() if self.rewritten is not None else None
