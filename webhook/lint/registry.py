"""The rule registry: each rule is a function `(obj) -> Iterable[Finding]` registered here.

A rule module registers its checks at import; `webhook.lint.lint_object` runs them all. A check
may report more than one rule id (one walk over the requests finds several kinds of mistake);
`RULES` lists the ids each check can report, for `dragate lint --list-rules` and docs/cli.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from webhook.lint.findings import Finding, Severity

Check = Callable[[Mapping[str, Any]], Iterable[Finding]]


@dataclass(frozen=True)
class RuleInfo:
    id: str
    severity: Severity
    summary: str


@dataclass(frozen=True)
class Registered:
    check: Check
    rules: tuple[RuleInfo, ...]


CHECKS: list[Registered] = []
RULES: dict[str, RuleInfo] = {}


def register(*rules: RuleInfo) -> Callable[[Check], Check]:
    """Decorator: run this check on every object; it reports the given rule ids."""

    def decorate(check: Check) -> Check:
        for info in rules:
            RULES.setdefault(info.id, info)
        CHECKS.append(Registered(check, rules))
        return check

    return decorate
