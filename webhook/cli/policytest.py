"""`dragate test`: policy test suites kept beside the policies, run by the CLI and pytest alike.

A suite (`kind: PolicyTestSuite`, in a `tests/` folder of the policy directory, which the
policy loader skips) lists cases: an object, optional extra state, and what the pipeline must
answer. Each case starts from the suite's state, so cases never depend on each other's order.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from webhook.assembly import offline_context
from webhook.cli import exits
from webhook.cli.inputs import UsageError, policy_set
from webhook.files.manifests import find_files, read_text
from webhook.files.yamlio import Document, YamlError, parse_documents
from webhook.kube.snapshot import SnapshotState
from webhook.pipeline import admit, request_from_object
from webhook.types import API_VERSION, Action, Operation, PolicySet

SUITE_KIND = "PolicyTestSuite"


@dataclass(frozen=True)
class CaseResult:
    suite: str
    case: str
    failures: tuple[str, ...]

    @property
    def passed(self) -> bool:
        return not self.failures


@dataclass(frozen=True)
class Suite:
    name: str
    document: Document
    policies_dir: Path

    @property
    def cases(self) -> list[Mapping[str, Any]]:
        return list((self.document.data.get("spec") or {}).get("cases") or [])


def find_suites(paths: Sequence[str]) -> list[Suite]:
    """Every PolicyTestSuite document under `paths` (files or directories)."""
    suites = []
    for file in find_files(paths):
        for doc in parse_documents(read_text(file), file):
            if isinstance(doc.data, dict) and doc.data.get("kind") == SUITE_KIND:
                suites.append(_suite(doc, Path(file)))
    return suites


def _suite(doc: Document, file: Path) -> Suite:
    if doc.data.get("apiVersion") != API_VERSION:
        raise YamlError(doc.source, f"a {SUITE_KIND} needs apiVersion {API_VERSION}")
    spec = doc.data.get("spec") or {}
    policies = spec.get("policies")
    default = file.parent.parent if file.parent.name == "tests" else file.parent
    policies_dir = (file.parent / policies) if policies else default
    name = str((doc.data.get("metadata") or {}).get("name") or file.stem)
    return Suite(name, doc, policies_dir.resolve())


def run_suite(suite: Suite, policies: PolicySet | None = None) -> Iterator[CaseResult]:
    """Run every case of `suite` through the pipeline, each from a fresh state."""
    policies = policies or policy_set(str(suite.policies_dir))
    base = list((suite.document.data.get("spec") or {}).get("state") or [])
    for i, case in enumerate(suite.cases):
        name = str(case.get("name") or f"case {i}")
        state = SnapshotState([*base, *(case.get("state") or [])])
        yield CaseResult(suite.name, name, tuple(_run_case(case, policies, state)))


def _run_case(case: Mapping[str, Any], policies: PolicySet, state: SnapshotState) -> Iterator[str]:
    obj, expect = case.get("object"), case.get("expect") or {}
    if not isinstance(obj, dict):
        yield "case has no `object`"
        return
    context = offline_context(lambda: policies, state)
    operation = Operation(str(case.get("operation", "CREATE")))
    request = request_from_object(
        obj, operation=operation, namespace=str(case.get("namespace", ""))
    )
    applied = admit(request, context)
    decision = applied.decision
    said = Said(
        reasons=[str(r) for r in decision.reasons],
        warnings=list(applied.warnings),
        audit=[str(v.reason) for v in decision.violations if v.mode == Action.AUDIT],
    )
    yield from _compare(expect, decision.allowed, said, applied.final)


@dataclass(frozen=True)
class Said:
    """What a case's object was told: denial reasons, warnings, and violations audited."""

    reasons: list[str]
    warnings: list[str]
    audit: list[str]


def _compare(expect: Mapping[str, Any], allowed: bool, said: Said, final: Any) -> Iterator[str]:
    reasons, warnings = said.reasons, said.warnings
    if "allowed" in expect and expect["allowed"] != allowed:
        yield f"expected allowed={expect['allowed']}, got {allowed}: {'; '.join(reasons)}"
    if "message" in expect and not any(re.search(expect["message"], r) for r in reasons):
        yield f"no reason matches /{expect['message']}/ in {reasons}"
    for pattern in expect.get("warnings") or []:
        if not any(re.search(pattern, w) for w in warnings):
            yield f"no warning matches /{pattern}/ in {warnings}"
    for pattern in expect.get("audit") or []:
        if not any(re.search(pattern, a) for a in said.audit):
            yield f"no audited violation matches /{pattern}/ in {said.audit}"
    for path, value in (expect.get("patched") or {}).items():
        actual = lookup(final, path)
        if actual != value:
            yield f"{path}: expected {value!r}, got {actual!r}"


PATH_STEP = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def lookup(value: Any, path: str) -> Any:
    """The value at a path like `spec.containers[0].resources.claims[0].name`, or None."""
    for name, index in PATH_STEP.findall(path):
        if name and isinstance(value, Mapping):
            value = value.get(name)
        elif index and isinstance(value, list) and int(index) < len(value):
            value = value[int(index)]
        else:
            return None
    return value


@click.command("test")
@click.argument("paths", nargs=-1, metavar="SUITE...")
def command(paths: tuple[str, ...]) -> None:
    """Run policy test suites (default: ./policies). Exit 0 pass, 1 fail, 2 error."""
    try:
        suites = find_suites(paths or ("policies",))
    except YamlError as err:
        raise UsageError(str(err)) from None
    if not suites:
        raise UsageError(f"no {SUITE_KIND} found in {', '.join(paths or ('policies',))}")
    results = [result for suite in suites for result in run_suite(suite)]
    for result in results:
        click.echo(f"{'PASS' if result.passed else 'FAIL'}  {result.suite}: {result.case}")
        for failure in result.failures:
            click.echo(f"      {failure}")
    failed = sum(not r.passed for r in results)
    click.echo(f"\n{len(results) - failed} passed, {failed} failed")
    sys.exit(exits.FINDINGS if failed else exits.OK)
