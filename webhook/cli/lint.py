"""`dragate lint PATH...`: DRA mistakes in manifests and policy files, before a cluster sees them.

Reading is done here; judging is `webhook.lint` (pure: dicts in, findings with paths out);
this module turns each finding's path into `file:line`. Policy documents
(`apiVersion: dragate.io/v1alpha1`) also go through the policy loader, whose problems become
findings of rule `policy`. A file that cannot be read or parsed is reported and the rest are
still linted; the exit code then says 2.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TextIO

import click

from webhook.cli import exits
from webhook.engine.cel import selector_error
from webhook.files.manifests import STDIN, find_files, objects_in, read_text
from webhook.files.yamlio import Document, YamlError, parse_documents
from webhook.lint import ERROR, PARSE, POLICY, RULES, WARNING, Finding, lint_object
from webhook.lint.objects import POLICY_API_VERSION
from webhook.lint.rules.cel import use_selector_compiler
from webhook.policy.loading import PolicyError, PolicyProblem, load_policies, parse_policies
from webhook.policy.suites import suite_problems


@dataclass(frozen=True)
class Located:
    """A finding placed in a file, ready to print."""

    file: str
    line: int
    severity: str
    rule: str
    message: str
    fix: str = ""
    path: str = ""

    def sort_key(self) -> tuple[str, int, str, str]:
        return (self.file, self.line, self.rule, self.message)

    def text(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        fix = f" (fix: {self.fix})" if self.fix else ""
        return f"{where}: {self.severity} {self.rule}: {self.message}{fix}"

    def as_json(self) -> dict[str, object]:
        return {
            "file": self.file,
            "line": self.line,
            "severity": self.severity,
            "rule": self.rule,
            "path": self.path,
            "message": self.message,
            "fix": self.fix,
        }


@dataclass
class FileRead:
    """What one input file held: its text, its policy documents, its other objects."""

    name: str  # as shown: the path, or <stdin>
    path: str  # as given: the path, or -
    text: str = ""
    policies: list[Document] = field(default_factory=list)
    objects: list[Document] = field(default_factory=list)
    others: list[Document] = field(default_factory=list)  # non-policy documents, any shape


@dataclass
class Run:
    files: list[FileRead] = field(default_factory=list)
    results: list[Located] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)  # every file looked at
    broken: set[str] = field(default_factory=set)  # files with a read or parse problem

    @property
    def unreadable(self) -> int:
        return len(self.broken)


# --------------------------------------------------------------------------- command


@click.command("lint")
@click.option(
    "-o", "--output", type=click.Choice(["text", "json"]), default="text", show_default=True
)
@click.option("--strict", is_flag=True, help="Exit 1 on warnings too.")
@click.option(
    "--ignore", "ignored", multiple=True, metavar="RULE", help="Skip a rule (repeatable)."
)
@click.option("--list-rules", is_flag=True, help="List the rules and exit.")
@click.argument("paths", nargs=-1, metavar="PATH...")
def command(
    output: str, strict: bool, ignored: tuple[str, ...], list_rules: bool, paths: tuple[str, ...]
) -> None:
    """Check DRA manifests (claims, templates, classes, Pods and workloads, Namespaces) and
    dragate policy files for mistakes, with `file:line`, a rule id and a suggested fix.

    PATH may be a file, a directory (searched recursively for *.yaml, *.yml, *.json) or `-`.
    Exit 0 when clean (warnings allowed unless --strict), 1 on findings, 2 when a file cannot
    be read or parsed.
    """
    if list_rules:
        for info in sorted(RULES.values(), key=lambda r: r.id):
            click.echo(f"{info.id:26} {info.severity:8} {info.summary}")
        return
    if not paths:
        raise click.UsageError("give at least one PATH (a file, a directory, or -)")
    unknown = sorted(set(ignored) - set(RULES))
    if unknown:
        raise click.UsageError(f"unknown rule(s) for --ignore: {', '.join(unknown)}")
    run = lint_paths(paths, sys.stdin)
    results = [r for r in run.results if r.rule not in ignored]
    click.echo(
        render_json(results, run) if output == "json" else render_text(results, run), nl=False
    )
    sys.exit(exit_code(results, run, strict))


def exit_code(results: Sequence[Located], run: Run, strict: bool) -> int:
    if run.unreadable:
        return exits.BAD_INPUT
    failing = {ERROR, WARNING} if strict else {ERROR}
    return exits.FINDINGS if any(r.severity in failing for r in results) else exits.OK


# --------------------------------------------------------------------------- linting


def lint_paths(paths: Sequence[str], stdin: TextIO | None = None) -> Run:
    """Read every file, lint every object and policy; problems become `parse` findings."""
    use_selector_compiler(selector_error)  # selectors are type- and cost-checked as Kubernetes does
    run = Run()
    for path in find_files(paths):
        read = _read(path, stdin, run)
        if read is None:
            continue
        run.files.append(read)
        for doc in read.objects + read.policies:
            run.results.extend(_locate(doc, f) for f in lint_object(doc.data))
    run.results.extend(policy_findings(run.files))
    run.results.extend(suite_findings(run.files))
    run.results.sort(key=Located.sort_key)
    return run


def _read(path: str, stdin: TextIO | None, run: Run) -> FileRead | None:
    name = "<stdin>" if path == STDIN else path
    run.seen.add(name)
    try:
        text = read_text(path, stdin)
        documents = parse_documents(text, name)
    except YamlError as err:
        _unreadable(run, err)
        return None
    read = FileRead(name, path, text)
    for doc in documents:
        if isinstance(doc.data, dict) and doc.data.get("apiVersion") == POLICY_API_VERSION:
            read.policies.append(doc)
            continue
        read.others.append(doc)
        try:
            read.objects.extend(objects_in([doc]))
        except YamlError as err:
            _unreadable(run, err)
    return read


def _unreadable(run: Run, err: YamlError) -> None:
    run.broken.add(err.source.file)
    run.results.append(Located(err.source.file, err.source.line, ERROR, PARSE.id, err.message))


def _locate(doc: Document, finding: Finding) -> Located:
    return Located(
        file=doc.source.file,
        line=doc.line_of(finding.path),
        severity=finding.severity,
        rule=finding.rule,
        message=finding.message,
        fix=finding.fix,
        path=finding.dotted_path(),
    )


# --------------------------------------------------------------------------- policies


def policy_findings(files: Iterable[FileRead]) -> list[Located]:
    """What the policy loader says about the policy documents, as `policy` findings.

    Files holding only policies are loaded together, as `serve --policies` would load them,
    so duplicate names and clashing tenants across files are found too. A file that mixes
    policies with other objects (or `-`) is loaded alone, and only problems inside its
    policy documents are kept.
    """
    with_policies = [f for f in files if f.policies]
    pure = [f for f in with_policies if not f.others and f.path != STDIN]
    mixed = [f for f in with_policies if f not in pure]
    found: list[Located] = []
    if pure:
        found.extend(_load([f.path for f in pure], None))
    for read in mixed:
        ranges = _policy_lines(read)
        found.extend(
            p
            for p in _load(None, (read.text, read.name))
            if p.file != read.name or not p.line or any(a <= p.line < b for a, b in ranges)
        )
    return found


def _load(paths: list[str] | None, text: tuple[str, str] | None) -> list[Located]:
    """The loader's problems for some files, or for one text; [] when the policies are valid."""
    try:
        if paths is not None:
            load_policies(paths)
        elif text is not None:
            parse_policies(*text)
    except PolicyError as err:
        return [
            Located(
                p.source.file,
                p.source.line,
                ERROR,
                POLICY.id,
                f"{p.path}: {p.message}" if p.path else p.message,
                path=p.path,
            )
            for p in err.problems
        ]
    except Exception as err:
        file = paths[0] if paths else text[1] if text else "<policies>"
        return [Located(file, 0, ERROR, POLICY.id, f"the policy loader failed: {err!r}")]
    return []


def suite_findings(files: Iterable[FileRead]) -> list[Located]:
    """PolicyTestSuite documents read as strictly as `dragate test` reads them, as `policy`."""
    documents = (doc for read in files for doc in read.policies + read.others)
    return [_suite_finding(p) for p in suite_problems(documents)]


def _suite_finding(p: PolicyProblem) -> Located:
    message = f"{p.path}: {p.message}" if p.path else p.message
    return Located(p.source.file, p.source.line, ERROR, POLICY.id, message, path=p.path)


def _policy_lines(read: FileRead) -> list[tuple[int, int]]:
    """Line ranges [start, next document's start) of each policy document in a mixed file."""
    starts = sorted(
        [(d.source.line, True) for d in read.policies]
        + [(d.source.line, False) for d in read.others]
    )
    ends = [line for line, _ in starts[1:]] + [sys.maxsize]
    return [(line, end) for (line, policy), end in zip(starts, ends, strict=True) if policy]


# --------------------------------------------------------------------------- output


def _summary(results: Sequence[Located], run: Run) -> dict[str, int]:
    return {
        "files": len(run.seen),
        "errors": sum(r.severity == ERROR for r in results),
        "warnings": sum(r.severity == WARNING for r in results),
        "unreadable": run.unreadable,
    }


def render_text(results: Sequence[Located], run: Run) -> str:
    lines = [r.text() for r in results]
    s = _summary(results, run)
    if not results:
        lines.append(f"{_plural(s['files'], 'file')} checked, no problems found")
    else:
        tail = f", {_plural(s['unreadable'], 'file')} unreadable" if s["unreadable"] else ""
        lines.append(
            f"{_plural(s['errors'], 'error')}, {_plural(s['warnings'], 'warning')} in "
            f"{_plural(s['files'], 'file')}{tail}"
        )
    return "\n".join(lines) + "\n"


def render_json(results: Sequence[Located], run: Run) -> str:
    body = {"findings": [r.as_json() for r in results], "summary": _summary(results, run)}
    return json.dumps(body, indent=2) + "\n"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"
