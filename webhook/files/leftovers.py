"""`dragate migrate`'s account of the legacy requests it leaves: where each is and why.

Whatever the rewrite did, the migrated text is scanned for legacy resource keys
(`webhook.files.legacyscan`); each is reported as `FILE:LINE: nvidia.com/gpu left (<why>)`.
The reason comes from what stopped the rewrite: the file (a template that cannot be read as
YAML, a `values.yaml`), the line (a templated count), or the rewriter's note on the document
holding it (unknown kind, outside its pod spec, a count that is not a whole number, ...).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import PurePath

from webhook.files.legacyscan import Leftover, find_leftovers
from webhook.rewrite import resource_markers
from webhook.rewrite.mappings import find_match
from webhook.types import LegacyResourceMapping, MappingAction

ALWAYS = ("nvidia.com/gpu", "nvidia.com/mig-")
_VALUES = re.compile(r"^values[\w.-]*\.ya?ml$|[\w.-]*-values\.ya?ml$")
_WHY = (
    re.compile(r"not migrated \(([^)]*)\)"),
    re.compile(r"not migrated: ([^;]*)"),
    re.compile(r" kept[:;] (.*)$"),
    re.compile(r'"[^"]*": ([^;:]*); migrate by hand'),
)
_NAMED = re.compile(r"""^\s*(?:-\s+)?name:\s*["']?([^"'\s#]+)""")
_WARN = ("is a legacy GPU request; use", "the mapping's action is Warn")
_DENY = ("is a legacy GPU request; ask", "the mapping's action is Deny")


@dataclass
class DocNotes:
    """What the rewriter said about one document, from its first line on."""

    line: int
    notes: list[str] = field(default_factory=list)
    own: bool = False
    """A dragate document (`dragate.io/...`: a policy, a test suite): the legacy names in it
    are what a mapping maps or what a test case sends, never requests to migrate."""


def is_own(data: object) -> bool:
    """Whether a document is one of dragate's own (see `DocNotes.own`)."""
    version = data.get("apiVersion") if isinstance(data, dict) else None
    return isinstance(version, str) and version.startswith("dragate.io/")


def _in_own(line: int, docs: Sequence[DocNotes]) -> bool:
    holder = [d for d in docs if d.line <= line]
    return bool(holder) and holder[-1].own


@dataclass(frozen=True)
class Left:
    """A legacy request left in a file, with the line to look at and why it stayed."""

    line: int
    name: str
    reason: str

    def message(self, file: str) -> str:
        if self.reason in (MIGRATES, STDIN_MIGRATES):
            return f"{file}:{self.line}: {self.name}: {self.reason}"
        return f"{file}:{self.line}: {self.name} left ({self.reason})"


class Finder:
    """The legacy names in force: nvidia.com/gpu, nvidia.com/mig-*, and every mapped one."""

    def __init__(
        self, mappings: Sequence[LegacyResourceMapping], native: frozenset[str] = frozenset()
    ) -> None:
        self.mappings = mappings
        self.native = native
        self.markers = tuple(dict.fromkeys((*ALWAYS, *resource_markers(mappings))))

    def is_legacy(self, name: str) -> bool:
        """A name the mappings in force would act on. A mapping whose action is Ignore says
        the name stays as it is on purpose (a cluster that keeps a device plugin for it), and
        one kept for Kubernetes to map through a DeviceClass (Native, or Auto for a name in
        `native`) is served as DRA already: their requests are no leftovers."""
        match = find_match(name, self.mappings)
        if match is not None:
            action = match.policy.action
            return action is not MappingAction.IGNORE and not action.keeps_native(name, self.native)
        if name in self.native:
            return False
        return name == ALWAYS[0] or name.startswith(ALWAYS[1])

    def find(self, text: str) -> list[Leftover]:
        return find_leftovers(text, self.is_legacy, self.markers)


def explain(
    finder: Finder, file: str, before: str, after: str, docs: Sequence[DocNotes], *, why: str = ""
) -> list[Left]:
    """Each legacy request in `after`, at its line in `before` (the file on disk until it is
    written), with its reason: `why` the file was not migrated, when it was not."""
    old_line = _line_map(before, after)
    values = _VALUES.match(PurePath(file).name) is not None
    found = []
    lines = after.split("\n")
    for hit in finder.find(after):
        if hit.form == READ:
            continue  # no request: see `reads`
        line = old_line(hit.line)
        if _in_own(line, docs):
            continue
        owner = _owner(lines, hit.line)
        found.append(Left(line, hit.name, why or _reason(hit, line, values, docs, owner)))
    return found


def _owner(lines: list[str], line: int) -> str:
    """The `name:` nearest above `line` (its container or template), or ""."""
    for text in reversed(lines[max(0, line - 16) : line]):
        named = _NAMED.match(text)
        if named:
            return named.group(1)
    return ""


def migrating(
    finder: Finder, before: str, left: Sequence[Left], docs: Sequence[DocNotes] = ()
) -> list[Left]:
    """The legacy requests of `before` that the migration rewrites (none of `left`, none in
    dragate's own documents)."""
    kept = {(item.line, item.name) for item in left}
    return [
        Left(hit.line, hit.name, MIGRATES)
        for hit in finder.find(before)
        if hit.form != READ and (hit.line, hit.name) not in kept and not _in_own(hit.line, docs)
    ]


def reads(finder: Finder, text: str) -> list[Leftover]:
    """Template lines that read a legacy count (`index .Values.resources.limits
    "nvidia.com/gpu"`): no request, so no leftover, but wrong once the request is migrated."""
    return [hit for hit in finder.find(text) if hit.form == READ]


def migrated_names(finder: Finder, before: str, after: str) -> set[str]:
    """The legacy names `after` requests fewer times than `before`: some were migrated."""
    old, new = _requests(finder, before), _requests(finder, after)
    return {name for name in old if new.count(name) < old.count(name)}


def _requests(finder: Finder, text: str) -> list[str]:
    return [hit.name for hit in finder.find(text) if hit.form != READ]


MIGRATES = "--write migrates it"
STDIN_MIGRATES = "migrated in the output"
READ = "read"


def _reason(hit: Leftover, line: int, values: bool, docs: Sequence[DocNotes], owner: str) -> str:
    if hit.templated:
        return "templated count"
    if values:
        return "values file"
    if hit.form == "expression":
        return "resource name computed in a template"
    if hit.form == "value":
        return f"resource name as the value of {hit.holder}"
    holder = [d for d in docs if d.line <= line]
    return _from_notes(hit.name, owner, holder[-1].notes if holder else [])


def _from_notes(name: str, owner: str, notes: list[str]) -> str:
    """Why the rewriter kept `name`, from its notes on the document: a note on the container
    or template holding it (`owner`) first, then one naming the resource, then any."""
    reasons = [(text, why) for text in notes if (why := _why(text))]
    for wanted in (f'"{owner}"' if owner else None, name, ""):
        for text, why in reasons:
            if wanted is not None and wanted in text:
                return why
    return "inside a string, or a field dragate does not rewrite"


def _why(note: str) -> str:
    for pattern in _WHY:
        found = pattern.search(note)
        if found:
            return found.group(1)
    for marker, why in (_WARN, _DENY):
        if marker in note:
            return why
    return ""


def _line_map(before: str, after: str) -> Callable[[int], int]:
    if before == after:
        return lambda line: line
    old, new = before.split("\n"), after.split("\n")
    blocks = difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes()

    def old_line(line: int) -> int:
        for _, i1, i2, j1, j2 in blocks:
            if j1 <= line - 1 < j2:
                return i1 + min(line - 1 - j1, max(i2 - i1 - 1, 0)) + 1
        return line

    return old_line
