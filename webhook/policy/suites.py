"""The PolicyTestSuite kind, read as strictly as the policy kinds it tests.

A suite is the gate in front of a policy change, so a mistake in the suite itself must never
read as a pass: a misspelt field (`casess:`, `alowed:`), a case that states nothing to check, a
message that is not a regex are problems with `file:line`, reported all at once by the same
schema machinery (`webhook.policy.schema`) as policy files, and no case runs until there are
none. Running the cases is the CLI's business (`webhook.cli.policytest`), above the pipeline.
"""

from __future__ import annotations

import pathlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from webhook.files.manifests import files_below, find_files, read_text
from webhook.files.yamlio import Document, YamlError, parse_documents
from webhook.policy.kinds import KINDS, METADATA, NAMESPACE, TEXT
from webhook.policy.kubetypes import missing_field
from webhook.policy.policysets import holds_policy, nearest_policy_dir
from webhook.policy.schema import (
    INVALID,
    Anything,
    Bool,
    ListOf,
    MapOf,
    Obj,
    OneOf,
    Path,
    PolicyError,
    PolicyProblem,
    Report,
    Str,
    suggest,
)
from webhook.types import API_VERSION, JSON, Object, Operation, Source

SUITE_KIND = "PolicyTestSuite"
FIELD_PATH = re.compile(r"[^.\[\]]+(\[\d+\])*(\.[^.\[\]]+(\[\d+\])*)*")
"""`spec.containers[0].resources.claims[0].name`: how `expect.patched` names a field."""
PATH_STEP = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


@dataclass(frozen=True)
class Expect:
    """What a case's verdict must be; each field left out is not checked."""

    allowed: bool | None
    message: re.Pattern[str] | None
    warnings: tuple[re.Pattern[str], ...]
    patched: Mapping[str, JSON]
    audit: tuple[re.Pattern[str], ...] = ()


@dataclass(frozen=True)
class Case:
    name: str
    object: Object
    state: tuple[Object, ...]
    operation: Operation
    namespace: str
    expect: Expect
    source: Source


@dataclass(frozen=True)
class Suite:
    name: str
    source: Source
    policies_dir: pathlib.Path
    state: tuple[Object, ...]
    cases: tuple[Case, ...]


def lookup(value: Any, path: str) -> Any:
    """The value at a FIELD_PATH in `value`, or None when there is none."""
    for name, index in PATH_STEP.findall(path):
        if name and isinstance(value, Mapping):
            value = value.get(name)
        elif index and isinstance(value, list) and int(index) < len(value):
            value = value[int(index)]
        else:
            return None
    return value


# --------------------------------------------------------------------------- value specs


@dataclass(frozen=True)
class Regex:
    """A regular expression, compiled at load so a broken one fails before any case runs."""

    noun: str = "a regular expression (a non-empty string)"

    def read(self, value: JSON, at: Path, report: Report) -> Any:
        text = Str(noun=self.noun).read(value, at, report)
        if text is INVALID:
            return INVALID
        try:
            return re.compile(text)
        except re.error as err:
            report.add(at, f"not a valid regular expression: {err}")
            return INVALID


_OBJECT_HEAD = Obj(
    {"apiVersion": TEXT, "kind": TEXT},
    required=("apiVersion", "kind"),
    open=True,
    noun="a Kubernetes object (a mapping with apiVersion and kind)",
)


@dataclass(frozen=True)
class Manifest:
    """A Kubernetes object taken whole: its head is checked here, its body by the pipeline."""

    noun: str = _OBJECT_HEAD.noun

    def read(self, value: JSON, at: Path, report: Report) -> Any:
        return INVALID if _OBJECT_HEAD.read(value, at, report) is INVALID else value


OBJECTS = ListOf(Manifest(), "Kubernetes objects")


@dataclass(frozen=True)
class Patched:
    """`expect.patched`: field paths of the mutated object and the values they must hold."""

    noun: str = "a mapping of field paths to values"

    def read(self, value: JSON, at: Path, report: Report) -> Any:
        read = MapOf(Anything(), self.noun).read(value, at, report)
        bad = [key for key in read if not FIELD_PATH.fullmatch(key)] if read is not INVALID else []
        for key in bad:
            report.add((*at, key), "expected a field path like spec.items[0].name")
        return INVALID if bad else read


@dataclass(frozen=True)
class PoliciesDir:
    """`spec.policies`: a directory relative to the suite's file, which must exist."""

    noun: str = "a directory (relative to this file)"

    def read(self, value: JSON, at: Path, report: Report) -> Any:
        text = Str(noun=self.noun).read(value, at, report)
        if text is INVALID:
            return INVALID
        directory = policies_dir(pathlib.Path(report.doc.source.file), text)
        if not directory.is_dir():
            report.add(at, f"no policy directory {directory}")
            return INVALID
        return directory


# --------------------------------------------------------------------------- the schema


def _checks_something(v: Mapping[str, Any], at: Path, report: Report) -> None:
    """An `expect` with no field, or only empty lists and mappings, would pass whatever came."""
    if all(value in ([], {}) for value in v.values()):
        report.add(at, "states nothing to check; give allowed, message, warnings, audit or patched")


def _expect(v: Mapping[str, Any]) -> Expect:
    patched = v.get("patched", {})
    audit = tuple(v.get("audit", ()))
    return Expect(v.get("allowed"), v.get("message"), tuple(v.get("warnings", ())), patched, audit)


EXPECT = Obj(
    {
        "allowed": Bool(),
        "message": Regex(),
        "warnings": ListOf(Regex(), "regular expressions"),
        "audit": ListOf(Regex(), "regular expressions"),
        "patched": Patched(),
    },
    check=_checks_something,
    make=_expect,
)


def _patched_fields_exist(v: Mapping[str, Any], at: Path, report: Report) -> None:
    """A path in `expect.patched` the target minor's schema cannot hold (`resourcess`) would
    compare None with None and pass whatever the webhook did."""
    expect, obj = v.get("expect"), v.get("object")
    if not isinstance(expect, Expect) or not isinstance(obj, dict):
        return
    for path in expect.patched:
        steps = [int(i) if i else name for name, i in PATH_STEP.findall(path)]
        why = missing_field(str(obj.get("kind")), steps)
        if why is not None:
            report.add((*at, "expect", "patched", path), f"cannot exist: {why}")


CASE = Obj(
    {
        "name": TEXT,
        "object": Manifest(),
        "state": OBJECTS,
        "operation": OneOf(tuple(Operation), Operation),
        "namespace": NAMESPACE,
        "expect": EXPECT,
    },
    required=("object", "expect"),
    check=_patched_fields_exist,
)


def _has_cases(v: Mapping[str, Any], at: Path, report: Report) -> None:
    if v.get("cases") == []:
        report.add((*at, "cases"), "a suite needs at least one case")


SPEC = Obj(
    {
        "policies": PoliciesDir(),
        "state": OBJECTS,
        "cases": ListOf(CASE, "test cases", unique_by=("name",)),
    },
    required=("cases",),
    check=_has_cases,
)

DOCUMENT = Obj(
    {
        "apiVersion": OneOf((API_VERSION,)),
        "kind": OneOf((SUITE_KIND,)),
        "metadata": METADATA,
        "spec": SPEC,
    },
    required=("apiVersion", "kind", "metadata", "spec"),
)


# --------------------------------------------------------------------------- reading


def is_suite(data: JSON, near: bool = False) -> bool:
    """A PolicyTestSuite document; with `near`, also a misspelt kind that is no policy kind."""
    kind = data.get("kind") if isinstance(data, dict) else None
    if not isinstance(kind, str) or kind in KINDS:
        return False
    return kind == SUITE_KIND or (near and suggest(kind, [SUITE_KIND]) is not None)


def read_suite(doc: Document, report: Report) -> Suite | None:
    """The suite in one document; None when anything in it is wrong (each problem reported)."""
    body = DOCUMENT.read(doc.data, (), report)
    if body is INVALID or report.problems:
        return None
    spec = body["spec"]
    directory = spec.get("policies") or nearest_policies(pathlib.Path(doc.source.file))
    if directory is None:
        start = policies_dir(pathlib.Path(doc.source.file), None)
        report.add(("spec",), f"no policy files in {start} or above it; name them in spec.policies")
        return None
    cases = tuple(_case(doc, i, case) for i, case in enumerate(spec["cases"]))
    name: str = body["metadata"]["name"]
    return Suite(name, doc.source, directory, tuple(spec.get("state", ())), cases)


def policies_dir(file: pathlib.Path, policies: str | None) -> pathlib.Path:
    """`spec.policies` from the suite's folder; by default the folder above `tests/`."""
    default = file.parent.parent if file.parent.name == "tests" else file.parent
    return ((file.parent / policies) if policies else default).resolve()


def nearest_policies(file: pathlib.Path) -> pathlib.Path | None:
    """The policies a suite without `spec.policies` is judged against: the folder above its
    `tests/` folder (or its own folder) when policy files are anywhere below it, else the
    nearest folder above holding policy files itself; None when there is none, so a suite
    never runs against nothing."""
    start = policies_dir(file, None)
    if any(holds_policy(p) for p in files_below(start, (".yaml", ".yml"))):
        return start
    return nearest_policy_dir(start.parent) if start.parent != start else None


def _case(doc: Document, index: int, case: Mapping[str, Any]) -> Case:
    return Case(
        name=case.get("name", f"case {index}"),
        object=case["object"],
        state=tuple(case.get("state", ())),
        operation=case.get("operation", Operation.CREATE),
        namespace=case.get("namespace", ""),
        expect=case["expect"],
        source=doc.source_of(("spec", "cases", index)),
    )


def suite_problems(documents: Iterable[Document]) -> list[PolicyProblem]:
    """What is wrong with the PolicyTestSuite documents among `documents` (`dragate lint`)."""
    problems: list[PolicyProblem] = []
    for doc in documents:
        if is_suite(doc.data, near=True):
            report = Report(doc)
            read_suite(doc, report)
            problems.extend(report.problems)
    return problems


def load_suites(paths: Sequence[str]) -> list[Suite]:
    """Every suite under `paths` (files or directories), or a PolicyError listing every problem."""
    problems: list[PolicyProblem] = []
    suites: list[Suite] = []
    for file in find_files(paths):
        try:
            documents = parse_documents(read_text(file), file)
        except YamlError as err:
            problems.append(PolicyProblem(err.source, "", err.message))
            continue
        for doc in (d for d in documents if is_suite(d.data, near=True)):
            report = Report(doc)
            suite = read_suite(doc, report)
            problems.extend(sorted(report.problems, key=lambda p: p.source.line))
            suites.extend([suite] if suite is not None else [])
    if problems:
        raise PolicyError(problems)
    return suites
