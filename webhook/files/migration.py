"""The migration of legacy GPU requests in manifests kept in git: what `dragate migrate` does.

Black's model: with no flag it is a dry run that says what would change; `--check` makes that a
CI gate (exit 1), `--diff` shows the change, `--write` makes it (atomically, only files that
change). `-` reads standard input and prints the migrated text. The rewrite itself is the same
pure `webhook.rewrite.rewrite_object` the webhook runs at admission; this module only reads,
decides, writes and says what it did through the caller's `Say` (the CLI echoes it, in the
order said). Whatever the rewrite could not do, the legacy requests left in each file's text
are listed and fail `--check` and `--write` (`webhook.files.leftovers`): a gate that passes a
request it skipped would be worse than none. The caller loads the mappings and the cluster
snapshot, and turns the `Outcome` into an exit code.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol

from webhook.files.branches import exclusive_lines
from webhook.files.gotemplates import Masked, TemplateFile, has_placeholders, mask, tokens_in_keys
from webhook.files.helmblocks import settle
from webhook.files.helmnames import per_release, release_token
from webhook.files.leftovers import (
    MIGRATES,
    STDIN_MIGRATES,
    DocNotes,
    Finder,
    Left,
    explain,
    is_own,
    migrated_names,
    migrating,
    reads,
)
from webhook.files.manifests import STDIN, read_text, write_atomic
from webhook.files.roundtrip import Skip, Stream, new_file_text, parse_stream
from webhook.files.skim import skipper
from webhook.files.valuesdriven import ChartWork, plan_charts
from webhook.files.yamlio import YamlError, parse_documents
from webhook.rewrite import resource_markers, rewrite_object
from webhook.rewrite.mappings import native_resources
from webhook.types import LegacyResourceMapping, RewriteResult

TEMPLATE_KIND = "ResourceClaimTemplate"
Key = tuple[str, str]
Rewrite = Callable[..., RewriteResult]  # `rewrite_object`'s signature


class Say(Protocol):
    """Where the migration's lines go: standard output, or standard error with `err`."""

    def __call__(self, text: str, *, err: bool = False, nl: bool = True) -> None: ...


def _silent(text: str, *, err: bool = False, nl: bool = True) -> None:
    """Says nothing (a caller that wants only `migrate_text`'s result)."""


class Outcome(Enum):
    """How a run ended: the CLI's exit code."""

    DONE = "done"  # nothing to report (or a dry run that only lists)
    FINDINGS = "findings"  # --check found work, or legacy requests are left
    FAILED = "failed"  # a file could not be read, migrated or written


@dataclass
class Migration:
    """One file's outcome: its old and new text, what to tell the user, templates made."""

    file: str
    before: str
    after: str
    notes: list[str] = field(default_factory=list)
    denied: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    templates: list[dict[str, Any]] = field(default_factory=list)
    docs: list[DocNotes] = field(default_factory=list)  # what the rewriter said, per document

    @property
    def changed(self) -> bool:
        return self.before != self.after


@dataclass
class Run:
    mappings: Sequence[LegacyResourceMapping]
    mode: str
    templates_out: str | None
    seen: set[Key] = field(default_factory=set)  # templates emitted to --templates-out
    collected: list[dict[str, Any]] = field(default_factory=list)
    changed: int = 0
    failed: int = 0
    denied: int = 0
    skipped: int = 0  # template files
    skip: Skip | None = None  # documents that certainly stay as they are: never loaded
    finder: Finder | None = None  # legacy requests left in the text
    left: int = 0
    native: frozenset[str] = frozenset()  # names a DeviceClass maps (KEP-5004): kept by Auto
    texts: dict[str, str] = field(default_factory=dict)  # standard input, read once
    reads: list[tuple[str, Left]] = field(default_factory=list)  # templates reading a count
    migrated: set[str] = field(default_factory=set)  # legacy names some request of was migrated
    charts: ChartWork = field(default_factory=ChartWork)  # values-driven charts' new texts
    say: Say = _silent
    rewrite: Rewrite = rewrite_object  # the caller's, so it can stand in for it


def migrate_files(run: Run, files: Sequence[str], known_native: frozenset[str] | None) -> Outcome:
    """Migrate `files` in `run.mode`, saying each finding as it is made; `known_native`: the
    names the cluster's DeviceClasses map (kept, with those of `files`), None to rewrite them."""
    if known_native is not None:
        run.native = native_names(run, files, known_native)
    run.finder = Finder(run.mappings, run.native)
    run.charts = plan_charts(files, lambda f: _text(run, f), run.mappings, run.native)
    for file in [*files, *run.charts.created]:
        _process(run, file)
    return _finish(run)


def native_names(run: Run, files: Sequence[str], known: frozenset[str]) -> frozenset[str]:
    """`known` and the extended resource names the DeviceClasses among `files` declare,
    wherever they stand: every file is looked at before any is migrated."""
    found = set(known)
    for file in files:
        try:
            text = _text(run, file)
        except YamlError:
            continue  # reported when the file itself is migrated
        if "extendedResourceName" in text:
            found |= native_resources(_device_classes(text, file))
    return frozenset(found)


def _device_classes(text: str, file: str) -> list[dict[str, Any]]:
    try:
        documents = parse_documents(text, file)
    except YamlError:
        return []
    return [
        doc.data
        for doc in documents
        if isinstance(doc.data, dict) and doc.data.get("kind") == "DeviceClass"
    ]


def _text(run: Run, file: str) -> str:
    """A file's text; standard input is read once and kept for the migration."""
    if file != STDIN:
        return read_text(file)
    if file not in run.texts:
        run.texts[file] = read_text(file)
    return run.texts[file]


def skip_rule(mappings: Sequence[LegacyResourceMapping]) -> Skip | None:
    """Documents to copy without loading: no mapped resource name, and not a template.

    `existing_templates` must still see every ResourceClaimTemplate, so its kind is a marker
    too; see `webhook.files.skim` for why a document without markers cannot change.
    """
    return skipper((*resource_markers(mappings), TEMPLATE_KIND))


def _process(run: Run, file: str) -> None:
    text = ""
    try:
        text = "" if file in run.charts.created else _text(run, file)
        migration = (
            Migration(file, text, run.charts.texts[file])
            if file in run.charts.texts
            else migrate_text(text, _display(file), run)
        )
    except YamlError as err:
        run.say(str(err), err=True)
        run.failed += 1
        _report_left(run, file, text, text, [], why="not valid YAML")
        return
    except TemplateFile as err:
        run.say(f"{_display(file)}: template file, skipped: {err}{_by_hand(run, text)}", err=True)
        run.skipped += 1
        _report_left(run, file, text, text, [], why=f"template not migrated: {err}")
        return
    except Exception as err:
        run.say(
            f"{_display(file)}: not migrated: internal error ({type(err).__name__}: "
            f"{err}); please report it",
            err=True,
        )
        run.failed += 1
        _report_left(run, file, text, text, [], why="internal error")
        return
    for text in migration.warnings:
        run.say(f"warning: {text}", err=True)
    for text in migration.notes:
        run.say(f"{migration.file}: {text}", err=True)
    for text in migration.denied:
        run.say(f"{migration.file}: denied: {text}", err=True)
    run.denied += len(migration.denied)
    run.changed += migration.changed
    assert run.finder is not None
    run.migrated |= migrated_names(run.finder, migration.before, migration.after)
    _report(run, file, migration)
    written = run.mode == "write" and file != STDIN
    before = migration.after if written else migration.before
    _report_left(run, file, before, migration.after, migration.docs)


def _report_left(
    run: Run, file: str, before: str, after: str, docs: list[DocNotes], *, why: str = ""
) -> None:
    """List each legacy request left in `after`, at its line in the file as it now is; and
    when the file is not written, each one the migration would rewrite too."""
    assert run.finder is not None
    left = explain(run.finder, _display(file), before, after, docs, why=why)
    run.left += len(left)
    listed = [*left, *migrating(run.finder, before, left, docs)] if before != after else left
    if file == STDIN:
        listed = [
            Left(i.line, i.name, STDIN_MIGRATES) if i.reason == MIGRATES else i for i in listed
        ]
    for item in sorted(listed, key=lambda i: i.line):
        run.say(item.message(_display(file)), err=True)
    rewired = run.charts.reads.get(file, [])
    for read in rewired:
        line, now = (
            (read.new_line, "now reads") if before == after else (read.line, "--write points it at")
        )
        run.say(
            f"{_display(file)}:{line}: {read.name}: reads the count; {now} {read.expression}",
            err=True,
        )
    for hit in reads(run.finder, before):
        if any(r.line == hit.line for r in rewired):
            continue
        run.reads.append((_display(file), Left(hit.line, hit.name, "")))
        run.say(f"{_display(file)}:{hit.line}: {hit.name}: reads the count (no request)", err=True)


def _by_hand(run: Run, text: str) -> str:
    legacy = [m for m in resource_markers(run.mappings) if m and m in text]
    return f" (it mentions {legacy[0]}: migrate it by hand)" if legacy else ""


def _display(file: str) -> str:
    return "<stdin>" if file == STDIN else file


def migrate_text(text: str, file: str, run: Run) -> Migration:
    """The migrated text of one file; templates follow their workload or go to `run`.

    Go-template placeholders in scalar values are masked while the file is migrated (see
    `webhook.files.gotemplates`); raises TemplateFile when the YAML exists only rendered.
    """
    masked = mask(text) if has_placeholders(text) else None
    stream = _stream(text, file, run, masked)
    present = existing_templates(stream)
    migration = Migration(file, text, text)
    migration.warnings = [w for doc in stream.docs for w in doc.warnings]
    release = release_token(masked, file) if not run.templates_out else None
    for index, doc in enumerate(list(stream.docs)):
        migration.docs.append(DocNotes(doc.line, own=is_own(doc.data)))
        if isinstance(doc.data, dict) and not is_own(doc.data):
            _migrate_doc(stream, index, run, migration, present, release=release)
    migration.after = stream.text()
    if masked is not None:
        after = settle(masked.text, migration.after, masked) if stream.changed else migration.after
        migration.after = masked.unmask(after)
        migration.notes = [masked.unmask(n) for n in migration.notes]
        migration.denied = [masked.unmask(n) for n in migration.denied]
        for notes in migration.docs:
            notes.notes = [masked.unmask(n) for n in notes.notes]
    return migration


def _stream(text: str, file: str, run: Run, masked: Masked | None) -> Stream:
    """The documents of `text` (read masked when it is a template, whose keys repeated in
    exclusive branches are no duplicates)."""
    try:
        stream = (
            parse_stream(text, file, run.skip)
            if masked is None
            else parse_stream(masked.text, file, None, exclusive_lines(text))
        )
    except YamlError as err:
        if masked is None:
            raise
        raise TemplateFile(
            f"line {err.source.line} not YAML until rendered ({err.message})"
        ) from None
    if masked is not None:
        for doc in stream.docs:
            found = tokens_in_keys(doc.data, masked)
            if found:
                raise TemplateFile(f"{found} stands in a key")
    return stream


def _migrate_doc(
    stream: Stream,
    index: int,
    run: Run,
    migration: Migration,
    present: set[Key],
    *,
    release: str | None = None,
) -> None:
    """Migrate document `index`; in a Helm template (`release`: the token standing for the
    release name) the templates it needs follow it, in its block, named per release."""
    result = run.rewrite(stream.docs[index].data, run.mappings, native_resources=run.native)
    if release is not None:
        result = per_release(result, release, {name for _, name in present})
    migration.notes.extend(result.notes)
    migration.denied.extend(result.denied)
    migration.docs[-1].notes = [*result.notes, *result.denied]
    if not result.changed:
        return
    stream.update(index, result.object)
    fresh = [t for t in result.templates if _key(t) not in present]
    present.update(_key(t) for t in fresh)
    if run.templates_out:
        run.collected.extend(dict(t) for t in fresh if _key(t) not in run.seen)
        run.seen.update(_key(t) for t in fresh)
    else:
        stream.append([dict(t) for t in fresh], None if release is None else index)


def existing_templates(stream: Stream) -> set[Key]:
    """ResourceClaimTemplates the file already holds (List items too), by namespace and name."""
    keys: set[Key] = set()
    for doc in stream.docs:
        data = doc.data
        items = data.get("items") if isinstance(data, dict) else None
        for obj in [data, *(items if isinstance(items, list) else [])]:
            if isinstance(obj, dict) and obj.get("kind") == TEMPLATE_KIND:
                keys.add(_key(obj))
    return keys


def _key(template: Any) -> Key:
    meta = template.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def _report(run: Run, file: str, migration: Migration) -> None:
    if run.mode == "diff":
        run.say(unified_diff(migration), nl=False)
    elif file == STDIN and run.mode in ("summary", "write"):
        run.say(migration.after, nl=False)
    elif migration.changed and run.mode == "write":
        _write_file(run, file, migration.after)
    elif migration.changed:
        run.say(f"would migrate {file}")


def unified_diff(migration: Migration) -> str:
    lines = difflib.unified_diff(
        migration.before.splitlines(keepends=True),
        migration.after.splitlines(keepends=True),
        f"a/{migration.file}",
        f"b/{migration.file}",
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def _write_file(run: Run, file: str, text: str) -> None:
    try:
        write_atomic(file, text)
    except OSError as err:
        run.say(f"{file}: cannot write: {err.strerror or err}", err=True)
        run.failed += 1
        return
    run.say(f"migrated {file}")


def _finish(run: Run) -> Outcome:
    if run.templates_out and run.collected:
        _emit_templates(run)
    for file, read in run.reads:
        if read.name in run.migrated:
            run.say(
                f"{file}:{read.line}: {read.name}: reads the count of a migrated request: "
                "change it to read the claim's count",
                err=True,
            )
    verb = "migrated" if run.mode == "write" else "would migrate"
    summary = f"{verb} {run.changed} file(s)"
    summary += f", {run.skipped} template file(s) skipped" if run.skipped else ""
    summary += f", {run.left} legacy request(s) left" if run.left else ""
    run.say(summary + (f", {run.failed} failed" if run.failed else ""), err=True)
    if run.failed:
        return Outcome.FAILED
    if run.mode == "check" and (run.changed or run.denied or run.left):
        return Outcome.FINDINGS
    if run.mode == "write" and run.left:
        return Outcome.FINDINGS
    return Outcome.DONE


def _emit_templates(run: Run) -> None:
    assert run.templates_out is not None
    text = new_file_text(run.templates_out, run.collected)
    if run.mode != "write":
        run.say(f"would write {len(run.collected)} template(s) to {run.templates_out}")
        return
    try:
        write_atomic(run.templates_out, text)
    except OSError as err:
        run.say(f"{run.templates_out}: cannot write: {err.strerror or err}", err=True)
        run.failed += 1
