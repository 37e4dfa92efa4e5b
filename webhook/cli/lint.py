"""`dragate lint PATH...`: DRA mistakes in manifests and policy files, before a cluster sees them.

Reading is done here; judging is `webhook.lint` (pure: dicts in, findings with paths out);
this module turns each finding's path into `file:line`. Policy documents
(`apiVersion: dragate.io/v1alpha1`) also go through the policy loader, whose problems become
findings of rule `policy`. A file that cannot be read or parsed is reported and the rest are
still linted; the exit code then says 2. A directory is walked as `webhook.files.manifests.walk`
walks it: files there that hold no Kubernetes object are skipped and counted.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TextIO

import click

from webhook.cli import exits
from webhook.cli.inputs import EXCLUDE_OPTION, KUBE_VERSION_OPTION, snapshot, state_option
from webhook.cli.lintreport import RENDERERS, Located, Tally
from webhook.engine.cel import selector_error
from webhook.files.manifests import STDIN, Found, objects_in, parse_found, walk
from webhook.files.yamlio import Document, YamlError
from webhook.lint import ERROR, PARSE, POLICY, RULES, WARNING, Finding, Known, lint_object
from webhook.lint.objects import POLICY_API_VERSION, dig, is_resource_kind
from webhook.lint.rules.cel import use_selector_compiler
from webhook.policy.kinds import KINDS
from webhook.policy.kubetypes import pinned_schemas
from webhook.policy.loading import PolicyError, PolicyProblem, load_policies, parse_policies
from webhook.policy.policysets import policy_files_in
from webhook.policy.schema import suggest
from webhook.policy.suites import SUITE_KIND, suite_problems
from webhook.policy.target import kube_version
from webhook.rewrite.mappings import native_resources
from webhook.types import Object
from webhook.types.kubeversions import SUPPORTED


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
    seen: set[str] = field(default_factory=set)  # every file read (the skipped apart)
    skipped: list[str] = field(default_factory=list)  # walked files holding no object


POLICY_GROUP = POLICY_API_VERSION.partition("/")[0]
POLICY_KINDS = frozenset({*KINDS, SUITE_KIND})

# --------------------------------------------------------------------------- command


@click.command("lint")
@KUBE_VERSION_OPTION
@click.option(
    "-o", "--output", type=click.Choice(sorted(RENDERERS)), default="text", show_default=True
)
@click.option("--strict", is_flag=True, help="Exit 1 on warnings too.")
@click.option(
    "--ignore", "ignored", multiple=True, metavar="RULE", help="Skip a rule (repeatable)."
)
@click.option("--list-rules", is_flag=True, help="List the rules and exit.")
@click.option(
    "--skip-foreign",
    is_flag=True,
    help="Skip named files that hold no Kubernetes object, as a walk skips them "
    "(for pre-commit, which names each changed file).",
)
@EXCLUDE_OPTION
@state_option("Snapshot of cluster objects; its DeviceClasses are the classes that exist.")
@click.argument("paths", nargs=-1, metavar="PATH...")
def command(  # noqa: PLR0917  (click passes options by keyword)
    output: str,
    strict: bool,
    ignored: tuple[str, ...],
    list_rules: bool,
    skip_foreign: bool,
    exclude: tuple[str, ...],
    state_file: str | None,
    paths: tuple[str, ...],
) -> None:
    """Check DRA manifests (claims, templates, classes, Pods and workloads, Namespaces) and
    dragate policy files for mistakes, with `file:line`, a rule id and a suggested fix.

    PATH may be a file, a directory (searched recursively for *.yaml, *.yml, *.json; files
    there that hold no Kubernetes object are skipped) or `-`. Exit 0 when clean (warnings
    allowed unless --strict), 1 on findings, 2 when a file cannot be read or parsed (unless
    `--ignore parse`).
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
    classes = snapshot(state_file).device_classes()
    extended = native_resources(classes.values())
    run = lint_paths(paths, sys.stdin, exclude, classes, extended, skip_foreign=skip_foreign)
    results = [r for r in run.results if r.rule not in ignored]
    tally = Tally(files=len(run.seen), skipped=len(run.skipped))
    click.echo(RENDERERS[output](results, tally), nl=False)
    sys.exit(exit_code(results, strict))


def exit_code(results: Sequence[Located], strict: bool) -> int:
    """From the findings shown, so the exit code says what the summary says."""
    if any(r.rule == PARSE.id for r in results):
        return exits.BAD_INPUT
    failing = {ERROR, WARNING} if strict else {ERROR}
    return exits.FINDINGS if any(r.severity in failing for r in results) else exits.OK


# --------------------------------------------------------------------------- linting


def lint_paths(
    paths: Sequence[str],
    stdin: TextIO | None = None,
    exclude: Sequence[str] = (),
    classes: Iterable[str] = (),
    extended: Iterable[str] = (),
    *,
    skip_foreign: bool = False,
) -> Run:
    """Read every file, lint every object and policy; problems become `parse` findings.

    The DeviceClasses known are `classes` (a snapshot's) and those among the inputs, wherever
    they stand: every file is read before any object is judged; so are the extended resource
    names they map (`extended`, a snapshot's, and the inputs' `extendedResourceName`s).
    Fields are judged against the process's target minor (`--kube-version`). With
    `skip_foreign`, a named file holding no Kubernetes object is skipped as a walked one is.
    """
    use_selector_compiler(selector_error)  # selectors are type- and cost-checked as Kubernetes does
    run = Run()
    for found in walk(paths, exclude):
        read = _read(replace(found, named=False) if skip_foreign else found, stdin, run)
        if read is not None:
            run.files.append(read)
    in_files = device_classes_in(run.files)
    known = Known(
        frozenset(classes) | frozenset(in_files),
        frozenset(extended) | native_resources(in_files.values()),
        kube_version(),
        {minor: pinned_schemas(minor) for minor in SUPPORTED},
    )
    for read in run.files:
        for doc in read.objects + read.policies:
            run.results.extend(_locate(doc, f) for f in lint_object(doc.data, known))
    run.results.extend(policy_findings(run.files))
    run.results.extend(suite_findings(run.files))
    run.results.sort(key=Located.sort_key)
    return run


def device_classes_in(files: Iterable[FileRead]) -> dict[str, Object]:
    """The DeviceClass objects the files hold, by name."""
    return {
        name: doc.data
        for read in files
        for doc in read.objects
        if isinstance(doc.data, dict)
        and is_resource_kind(doc.data, "DeviceClass")
        and isinstance(name := dig(doc.data, ("metadata", "name")), str)
    }


def _read(found: Found, stdin: TextIO | None, run: Run) -> FileRead | None:
    path = found.path
    name = "<stdin>" if path == STDIN else path
    try:
        parsed = parse_found(found, stdin)
    except YamlError as err:
        run.seen.add(name)
        _unreadable(run, err)
        return None
    if parsed is None:
        run.skipped.append(name)
        return None
    run.seen.add(name)
    read = FileRead(name, path, parsed.text)
    for doc in parsed.documents:
        if is_policy_like(doc.data):
            read.policies.append(doc)
            continue
        read.others.append(doc)
        try:
            read.objects.extend(objects_in([doc]))
        except YamlError as err:
            _unreadable(run, err)
    return read


def is_policy_like(data: object) -> bool:
    """Whether the policy loader judges a document: dragate's apiVersion, a group close to
    `dragate.io` (`dragte.io/v1alpha1`), or a dragate kind with no group or a near one
    (`v1` + `kind: Tenant`), so a wrong header is an error, never a clean pass. A kind of
    another group (Capsule's `capsule.clastix.io` Tenant) is that group's object."""
    if not isinstance(data, dict):
        return False
    version = data.get("apiVersion")
    if version == POLICY_API_VERSION:
        return True
    group = version.rpartition("/")[0] if isinstance(version, str) else ""
    near = bool(group) and suggest(group, [POLICY_GROUP]) is not None
    return near or (not group and str(data.get("kind")) in POLICY_KINDS)


def _unreadable(run: Run, err: YamlError) -> None:
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

    Files holding only policies are loaded by policy set, as `serve --policies` would load
    each: the set of a file is its directory's policy files (`webhook.policy.policysets`), the
    ones not given read from disk, so duplicate names and clashing tenants across a set's
    files are found, and two directories (two clusters) may define the same Tenant; a
    problem in a file read from disk is shown only when it names a given file. A file
    that mixes policies with other objects (or `-`) is loaded alone, and only problems
    inside its policy documents are kept.
    """
    with_policies = [f for f in files if f.policies]
    pure = [f for f in with_policies if not f.others and f.path != STDIN]
    mixed = [f for f in with_policies if f not in pure]
    found: list[Located] = []
    given = {f.path for f in pure}
    for paths in policy_sets(pure, {_key(f.path) for f in mixed}):
        found.extend(p for p in _load(paths, None) if _concerns(p, given))
    for read in mixed:
        ranges = _policy_lines(read)
        found.extend(
            p
            for p in _load(None, (read.text, read.name))
            if p.file != read.name or not p.line or any(a <= p.line < b for a, b in ranges)
        )
    return found


def policy_sets(pure: Iterable[FileRead], mixed: set[Path]) -> list[list[str]]:
    """The files of each set the given policy files belong to, sorted by name: the given
    ones as given, their directories' other policy files (not `mixed`) as found on disk."""
    given: dict[Path, dict[Path, str]] = {}
    for read in pure:
        given.setdefault(_key(read.path).parent, {})[_key(read.path)] = read.path
    sets = []
    for directory, named in given.items():
        on_disk = {
            p: str(Path(next(iter(named.values()))).parent / p.name)
            for p in map(_key, policy_files_in(directory))
            if p not in mixed
        }
        members = {**on_disk, **named}
        sets.append([members[p] for p in sorted(members)])
    return sets


def _concerns(problem: Located, given: set[str]) -> bool:
    """A set's problem is shown when it lies in a given file, or in a file read from disk
    and names a given file: a duplicate of a given Tenant is the given file's problem."""
    return problem.file in given or any(f"{name}:" in problem.message for name in given)


def _key(path: str | Path) -> Path:
    return Path(path).resolve()


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
