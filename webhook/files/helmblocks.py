"""Keeping a migrated Helm template's edits inside the template blocks they belong to.

`webhook.files.gotemplates` turns each line of template actions into a YAML comment, so the
in-place editor migrates the YAML between them. A comment carries no structure, though, and a
new entry lands after the last entry of its block, before any comment lines: it can fall inside
a `{{- with .Values.nodeSelector }} ... {{- end }}` that only renders when the value is set, or
between `labels:` and the `{{ include ... | nindent 8 }}` that fills it. So after the edit every
changed line must sit in the same template block as the GPU lines it replaces. A new entry that
does not is slid down across the action lines that follow it (block ends, comments, and output
lines that fill the entry before it), which leaves the masked YAML as it was; the file is
refused (TemplateFile) when that cannot place it, when an action line moved or vanished, when
GPU lines sit in different blocks, or when a removed key was filled by an output line.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from webhook.files.gotemplates import Action, Masked, TemplateFile

Context = tuple[tuple[int, int], ...]
_INNER = re.compile(r"\{\{-?\s*(.*?)\s*-?\}\}", re.DOTALL)
_OPENERS = ("if ", "if(", "with ", "range ", "define ", "block ")
_QUIET = re.compile(r"^(?:/\*.*\*/|\$[\w.]*\s*:?=.*)$", re.DOTALL)
_INDENT = re.compile(r"\bn?indent\s+(\d+)")
_ANNOTATION = re.compile(r"^\s*(?:annotations:|dragate\.io/rewritten:.*)\s*$")


@dataclass(frozen=True)
class Line:
    """One line of the masked text: the action it stands for, if any, and its block."""

    action: Action | None
    context: Context
    after: Context  # the block the next line is in


def kinds(action: Action) -> list[str]:
    """What each action of the run does to blocks: open, branch, end, quiet or output."""
    found = []
    for inner in _INNER.findall(action.original):
        if inner.startswith(_OPENERS):
            found.append("open")
        elif inner.startswith("else"):
            found.append("branch")
        elif inner == "end":
            found.append("end")
        else:
            found.append("quiet" if _QUIET.match(inner) else "output")
    return found


def lines_of(text: str, masked: Masked) -> list[Line]:
    """Each masked line with its template block (the stack of open actions and branches)."""
    starts = {a.stand_in.split("\n", 1)[0]: a for a in masked.actions}
    stack: list[tuple[int, int]] = []
    out = []
    for number, raw in enumerate(text.split("\n")):
        action = starts.get(raw.strip())
        before = tuple(stack)
        for kind in kinds(action) if action else ():
            _apply(stack, kind, number)
        out.append(Line(action, before, tuple(stack)))
    return out


def _apply(stack: list[tuple[int, int]], kind: str, number: int) -> None:
    if kind == "open":
        stack.append((number, 0))
    elif kind == "branch" and stack:
        stack[-1] = (stack[-1][0], stack[-1][1] + 1)
    elif kind == "end" and stack:
        stack.pop()


def settle(before: str, after: str, masked: Masked) -> str:
    """`after` (the migrated masked text) with its new entries in the GPU lines' block."""
    _require_actions_kept(after, masked)
    old, new = before.split("\n"), after.split("\n")
    old_lines = lines_of(before, masked)
    ops = difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes()
    removed = [
        i for tag, i1, i2, _, _ in ops if tag in ("delete", "replace") for i in range(i1, i2)
    ]
    _require_filled_keys_kept(old, old_lines, set(removed))
    home = _home(old_lines, removed, masked)
    for tag, i1, _, j1, j2 in reversed(ops):
        if tag == "insert":
            new = _placed(new, old, old_lines, (i1, j1, j2), home)
    return "\n".join(new)


def _require_actions_kept(after: str, masked: Masked) -> None:
    where = -1
    for action in masked.actions:
        found = after.find(action.stand_in)
        if found <= where or after.count(action.stand_in) != 1:
            raise TemplateFile(f"the edit would move the template line {action.line}")
        where = found


def _home(lines: Sequence[Line], removed: list[int], masked: Masked) -> Context:
    """The block of every removed line (the GPU lines), which must be one."""
    blocks = {lines[i].context for i in removed}
    if len(blocks) > 1:
        first = sorted(removed)[0] + 1
        raise TemplateFile(f"GPU lines from line {first} on lie in different template blocks")
    return blocks.pop() if blocks else ()


def _require_filled_keys_kept(old: list[str], lines: Sequence[Line], removed: set[int]) -> None:
    """An output line (`{{ toYaml . | nindent 8 }}`) fills the key above it, less indented:
    removing that key would hand its output to another one."""
    for number, line in enumerate(lines):
        if line.action is None or "output" not in kinds(line.action):
            continue
        indent = _output_indent(line.action, old[number])
        parent = _parent(old, lines, number, indent)
        if parent is not None and parent in removed:
            raise TemplateFile(
                f"line {parent + 1} would go, but the template line {number + 1} fills it"
            )


def _output_indent(action: Action, raw: str) -> int:
    found = _INDENT.search(action.original)
    return int(found.group(1)) if found else len(raw) - len(raw.lstrip())


def _parent(old: list[str], lines: Sequence[Line], number: int, indent: int) -> int | None:
    for index in range(number - 1, -1, -1):
        text = old[index]
        content = lines[index].action is None and text.strip() and text.lstrip()[0] != "#"
        if content and len(text) - len(text.lstrip()) < indent:
            return index
    return None


def _placed(
    new: list[str], old: list[str], lines: Sequence[Line], hunk: tuple[int, int, int], home: Context
) -> list[str]:
    """`new` with the lines inserted at `hunk` (old index, new span) slid into `home`."""
    at, j1, j2 = hunk
    added = new[j1:j2]
    document = bool(added) and added[0].startswith("---")
    if document:
        home = _document_block(old, lines, at)
    # the rewritten-annotation only records the change: in any block it is harmless
    anywhere = all(_ANNOTATION.match(a) or not a.strip() for a in added)
    slide = _slide(old, lines, at, _indent_of(added), None if anywhere else home)
    if slide is None and document:
        raise TemplateFile(
            f"a new document after line {at} would fall outside its workload's block"
        )
    if slide is None:
        raise TemplateFile(f"a new entry after line {at} would fall in another template block")
    if slide and new[j2 : j2 + slide] != old[at : at + slide]:
        raise TemplateFile(f"a new entry after line {at} cannot be placed")
    before = lines[at + slide - 1].action if at + slide else None
    if before is not None and before.original.rstrip().endswith("-}}"):
        raise TemplateFile(f"a new entry would follow line {at + slide}, which trims it (-}}}})")
    return new[:j1] + new[j2 : j2 + slide] + added + new[j2 + slide :]


def _document_block(old: list[str], lines: Sequence[Line], at: int) -> Context:
    """The block of the document before line `at` (of its first entry): a new document that
    serves it renders exactly when it does."""
    start = at
    while start > 0 and not old[start - 1].startswith("---"):
        start -= 1
    for index in range(start, at):
        text = old[index].strip()
        if lines[index].action is None and text and not text.startswith("#"):
            return lines[index].context
    return lines[at - 1].after if at else ()


def _slide(
    old: list[str], lines: Sequence[Line], at: int, indent: int, home: Context | None
) -> int | None:
    """How many lines after `at` the insertion must move down to be in `home` (None: never;
    `home` None: any block will do).

    It may cross block ends, quiet actions, comments and output lines indented deeper than the
    entry (they fill the entry above it), never an opening action nor a sibling's output.
    """
    context = lines[at - 1].after if at else ()
    for step in range(len(old) - at + 1):
        index = at + step
        nxt = lines[index] if index < len(old) else None
        feeds_above = nxt is not None and _fills_above(nxt, old[index], indent)
        if home in (None, context) and not feeds_above:
            return step
        if nxt is None or not _crossable(nxt, old[index], indent):
            return None
        context = nxt.after
    return None


def _fills_above(line: Line, raw: str, indent: int) -> bool:
    if line.action is None:
        return False
    return "output" in kinds(line.action) and _output_indent(line.action, raw) > indent


def _crossable(line: Line, raw: str, indent: int) -> bool:
    if line.action is None:
        return not raw.strip() or raw.lstrip().startswith("#")
    found = kinds(line.action)
    if "open" in found or "branch" in found:
        return False
    return "output" not in found or _output_indent(line.action, raw) > indent


def _indent_of(added: list[str]) -> int:
    first = next((a for a in added if a.strip()), "")
    return len(first) - len(first.lstrip())
