"""`dragate test`: policy test suites kept beside the policies, run by the CLI and pytest alike.

A suite (`kind: PolicyTestSuite`, in a `tests/` folder of the policy directory, which the
policy loader skips) lists cases: an object, optional extra state, and what the pipeline must
answer. Suites are read strictly (`webhook.policy.suites`) before anything runs, so a typo in
a suite is exit 2 with `file:line`, never a case that passes because it checked nothing. Each
case starts from the suite's state, so cases never depend on each other's order.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import click

from webhook.assembly import offline_context
from webhook.cli import exits
from webhook.cli.inputs import KUBE_VERSION_OPTION, UsageError, policy_set
from webhook.kube.snapshot import SnapshotState
from webhook.pipeline import admit, request_from_object
from webhook.policy.schema import PolicyError, PolicyProblem
from webhook.policy.suites import SUITE_KIND, Case, Expect, Suite, load_suites, lookup
from webhook.types import Action, PolicySet, Source

DEFAULT_PATHS = ("policies",)


@dataclass(frozen=True)
class CaseResult:
    suite: str
    case: str
    source: Source
    failures: tuple[str, ...]

    @property
    def passed(self) -> bool:
        return not self.failures

    def text(self) -> str:
        """`PASS  FILE:LINE: SUITE: CASE` or `FAIL  ...` and what differed; the line is the case."""
        verdict = "PASS" if self.passed else "FAIL"
        head = f"{verdict}  {shown_source(self.source)}: {self.suite}: {self.case}"
        return "\n".join([head, *(f"      {failure}" for failure in self.failures)])


def shown(path: str | os.PathLike[str]) -> str:
    """A path relative to the current directory when it is below it, else as it is."""
    relative = os.path.relpath(os.path.abspath(path))
    return str(path) if relative.split(os.sep, 1)[0] == os.pardir else relative


def shown_source(source: Source) -> str:
    return f"{shown(source.file)}:{source.line}" if source.line else shown(source.file)


def find_suites(paths: Sequence[str]) -> list[Suite]:
    """Every suite under `paths`, or exit 2 listing every problem in every suite."""
    try:
        suites = load_suites(paths)
    except PolicyError as err:
        problems = "\n".join(f"  {shown_source(p.source)}: {_said(p)}" for p in err.problems)
        raise UsageError(f"invalid test suites:\n{problems}") from None
    if not suites:
        raise UsageError(f"no {SUITE_KIND} found in {', '.join(paths)}")
    return suites


def _said(problem: PolicyProblem) -> str:
    return f"{problem.path}: {problem.message}" if problem.path else problem.message


def run_suite(suite: Suite, policies: PolicySet | None = None) -> Iterator[CaseResult]:
    """Run every case of `suite` through the pipeline, each from a fresh state."""
    policies = policies or policy_set(str(suite.policies_dir))
    for case in suite.cases:
        failures = tuple(_run_case(case, policies, SnapshotState([*suite.state, *case.state])))
        yield CaseResult(suite.name, case.name, case.source, failures)


def _run_case(case: Case, policies: PolicySet, state: SnapshotState) -> Iterator[str]:
    context = offline_context(lambda: policies, state)
    request = request_from_object(case.object, operation=case.operation, namespace=case.namespace)
    applied = admit(request, context)
    decision = applied.decision
    said = Said(
        reasons=[str(r) for r in decision.reasons],
        warnings=list(applied.warnings),
        audit=[str(v.reason) for v in decision.violations if v.mode == Action.AUDIT],
    )
    yield from _compare(case.expect, decision.allowed, said, applied.final)


@dataclass(frozen=True)
class Said:
    """What a case's object was told: denial reasons, warnings, and violations audited."""

    reasons: list[str]
    warnings: list[str]
    audit: list[str]


def _compare(expect: Expect, allowed: bool, said: Said, final: Any) -> Iterator[str]:
    reasons = said.reasons
    if expect.allowed is not None and expect.allowed != allowed:
        because = f": {'; '.join(reasons)}" if reasons else ""
        yield f"expected allowed={expect.allowed}, got {allowed}{because}"
    if expect.message is not None and not any(expect.message.search(r) for r in reasons):
        yield f"no reason matches /{expect.message.pattern}/ in {reasons}"
    for pattern in expect.warnings:
        if not any(pattern.search(w) for w in said.warnings):
            yield f"no warning matches /{pattern.pattern}/ in {said.warnings}"
    for pattern in expect.audit:
        if not any(pattern.search(a) for a in said.audit):
            yield f"no audited violation matches /{pattern.pattern}/ in {said.audit}"
    for path, value in expect.patched.items():
        actual = lookup(final, path)
        if actual != value:
            yield f"{path}: expected {value!r}, got {actual!r}"


@click.command("test")
@KUBE_VERSION_OPTION
@click.argument("paths", nargs=-1, metavar="SUITE...")
def command(paths: tuple[str, ...]) -> None:
    """Run policy test suites (default: ./policies). Exit 0 pass, 1 fail, 2 malformed suite
    or invalid policies (then no case runs)."""
    suites = find_suites(paths or DEFAULT_PATHS)
    policies = {d: policy_set(str(d)) for d in dict.fromkeys(s.policies_dir for s in suites)}
    for suite in suites:
        where = shown_source(suite.source)
        click.echo(f"SUITE {where}: {suite.name}: policies from {shown(suite.policies_dir)}")
    results = [r for s in suites for r in run_suite(s, policies[s.policies_dir])]
    for result in results:
        click.echo(result.text())
    failed = sum(not r.passed for r in results)
    click.echo(f"\n{len(results) - failed} passed, {failed} failed")
    sys.exit(exits.FINDINGS if failed else exits.OK)
