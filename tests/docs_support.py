"""Reading the repository's Markdown, and webhook/'s docstrings and comments, as the
documentation tests need them.

One parser for the link test and the README test, so both agree on what a fenced block, a
heading and an anchor are. Deliberately small: CommonMark corner cases the docs do not use
(setext headings, indented code, reference links) are not recognised.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"^\s*(```|~~~)\s*([\w+-]*)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
SKIPPED_DIRS = {"build", "dist", "node_modules", "__pycache__"}


@dataclass(frozen=True)
class Line:
    """One line of prose (outside fenced code), with its 1-based number."""

    number: int
    text: str


@dataclass(frozen=True)
class Block:
    """A fenced code block: its info string, its first line's number, its text."""

    lang: str
    line: int
    text: str


def markdown_files() -> list[Path]:
    """Every Markdown file of the repository, outside hidden and build directories."""
    return sorted(
        path
        for path in REPO.rglob("*.md")
        if not any(
            part.startswith(".") or part in SKIPPED_DIRS or part.endswith(".egg-info")
            for part in path.relative_to(REPO).parts[:-1]
        )
    )


def prose(text: str) -> Iterator[Line]:
    """The lines outside fenced code blocks."""
    fenced = False
    for number, line in enumerate(text.splitlines(), start=1):
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            yield Line(number, line)


def blocks(text: str) -> list[Block]:
    """The fenced code blocks, in order, de-indented by their fence's indentation."""
    found: list[Block] = []
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        indent = len(lines[index]) - len(lines[index].lstrip())
        end = index + 1
        while end < len(lines) and not FENCE.match(lines[end]):
            end += 1
        body = "".join(line[indent:] + "\n" for line in lines[index + 1 : end])
        found.append(Block(opening.group(2), index + 2, body))
        index = end + 1
    return found


def headings(text: str) -> list[str]:
    """The heading texts, in order (fenced `# comments` are not headings)."""
    return [match.group(2) for line in prose(text) if (match := HEADING.match(line.text))]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation gone, spaces as dashes."""
    text = heading.strip().lower().replace("`", "")
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every anchor GitHub makes for a document's headings (repeats get -1, -2, ...)."""
    seen: dict[str, int] = {}
    result: set[str] = set()
    for heading in headings(text):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        result.add(base if count == 0 else f"{base}-{count}")
    return result


def section(text: str, heading: str) -> str:
    """A section's text, from its heading to the next heading of the same or a higher level."""
    found = [(line.number, match) for line in prose(text) if (match := HEADING.match(line.text))]
    lines = text.splitlines()
    for index, (start, match) in enumerate(found):
        if match.group(2) == heading:
            level = len(match.group(1))
            end = next(
                (number for number, later in found[index + 1 :] if len(later.group(1)) <= level),
                len(lines) + 1,
            )
            return "\n".join(lines[start - 1 : end - 1]) + "\n"
    raise LookupError(f"no section {heading!r}")


def relative(path: Path) -> str:
    """A repository path as the failure messages print it."""
    return path.relative_to(REPO).as_posix()


def remarks(text: str) -> Iterator[tuple[int, str]]:
    """A module's docstrings and comments with the line each starts on.

    Docstrings are every string statement: a module's, class's or function's, and the ones
    that document an attribute or constant after its assignment."""
    for node in ast.walk(ast.parse(text)):
        if (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            yield node.value.lineno, node.value.value
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string
