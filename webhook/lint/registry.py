"""The rule registry: each rule is a function `(obj) -> Iterable[Finding]` registered here.

A rule module registers its checks at import; `webhook.lint.lint_object` runs them all. A check
may report more than one rule id (one walk over the requests finds several kinds of mistake);
`RULES` lists the ids each check can report, for `dragate lint --list-rules` and docs/cli.md.
A check that needs more than the object (the DeviceClasses that exist) registers with
`register_known` and is handed `Known` too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from webhook.lint.findings import Finding, Severity

Check = Callable[[Mapping[str, Any]], Iterable[Finding]]


@dataclass(frozen=True)
class Known:
    """What lint knows beyond one object: the DeviceClasses of the cluster (`--state`) and of
    the inputs, the extended resource names they map, the target Kubernetes minor and the
    pinned schemas of every supported minor. Empty when none are known, and then nothing is
    judged against it."""

    device_classes: frozenset[str] = frozenset()
    extended_names: frozenset[str] = frozenset()  # their `extendedResourceName`s (KEP-5004)
    kube_version: str = ""  # the target minor (`1.36`), as `--kube-version` names it
    schemas: Mapping[str, Mapping[str, Any]] = field(default_factory=dict, compare=False)
    """Supported minor -> its compact pinned schemas (`definitions`, `roots`)."""


KnownCheck = Callable[[Mapping[str, Any], Known], Iterable[Finding]]


@dataclass(frozen=True)
class RuleInfo:
    id: str
    severity: Severity
    summary: str


@dataclass(frozen=True)
class Registered:
    check: KnownCheck
    rules: tuple[RuleInfo, ...]
    name: str


CHECKS: list[Registered] = []
RULES: dict[str, RuleInfo] = {}


def register(*rules: RuleInfo) -> Callable[[Check], Check]:
    """Decorator: run this check on every object; it reports the given rule ids."""

    def decorate(check: Check) -> Check:
        _add(lambda obj, _known: check(obj), rules, check.__name__)
        return check

    return decorate


def register_known(*rules: RuleInfo) -> Callable[[KnownCheck], KnownCheck]:
    """Decorator: run this check on every object with what lint knows (`Known`)."""

    def decorate(check: KnownCheck) -> KnownCheck:
        _add(check, rules, check.__name__)
        return check

    return decorate


def _add(check: KnownCheck, rules: tuple[RuleInfo, ...], name: str) -> None:
    for info in rules:
        RULES.setdefault(info.id, info)
    CHECKS.append(Registered(check, rules, name))
