"""Running every registered rule over one object."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.lint import rules as _rules  # noqa: F401  (importing registers the rules)
from webhook.lint.findings import ERROR, WARNING, Finding
from webhook.lint.registry import CHECKS, RULES, Known, RuleInfo

INTERNAL = "internal"


def lint_object(obj: Mapping[str, Any], known: Known | None = None) -> list[Finding]:
    """Every finding for one Kubernetes object or dragate policy document, in path order;
    `known` is what is known beyond the object (see `Known`).

    A rule that fails on an odd input becomes a warning naming the rule, never an exception:
    lint must report on everything a person hands it.
    """
    if not isinstance(obj, Mapping):
        return []
    found: list[Finding] = []
    known = known or Known()
    for registered in CHECKS:
        try:
            found.extend(registered.check(obj, known))
        except Exception as err:
            name = registered.name
            found.append(
                Finding(
                    INTERNAL,
                    WARNING,
                    (),
                    f"{name} could not check this object: {err!r}",
                    "please report this as a dragate bug",
                )
            )
    unique = list(dict.fromkeys(found))
    return sorted(unique, key=lambda f: (_sort_key(f.path), f.rule))


def _sort_key(path: tuple[str | int, ...]) -> tuple[tuple[int, str], ...]:
    return tuple((0, f"{s:09d}") if isinstance(s, int) else (1, s) for s in path)


POLICY = RuleInfo("policy", ERROR, "dragate policy document the policy loader refuses")
PARSE = RuleInfo("parse", ERROR, "file that cannot be read or is not valid YAML/JSON objects")
RULES.setdefault(POLICY.id, POLICY)
RULES.setdefault(PARSE.id, PARSE)
