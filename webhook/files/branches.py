"""Which lines of a Go template sit in exclusive branches of the same `if`/`with`/`range`.

A Helm template often writes one key in an `{{- if }}` branch and again in its `{{- else }}`
(an Ingress's `apiVersion` per Kubernetes minor): rendered, only one of them exists, so the
pair is no duplicate key. Lines are told apart by the branches they stand in: two lines are
exclusive when some block holds both, in different branches.
"""

from __future__ import annotations

import re
from collections.abc import Callable

_ACTION = re.compile(r"\{\{-?\s*(?:/\*.*?\*/\s*)?(\w+)?", re.DOTALL)
_OPENS = frozenset({"if", "with", "range", "define", "block"})
Path = tuple[tuple[int, int], ...]
"""The (block, branch) pairs holding a line, outermost first."""


def exclusive_lines(text: str) -> Callable[[int, int], bool]:
    """A test of two 1-based lines of `text`: whether they stand in different branches of one
    block, so that no rendering holds both."""
    paths = _paths(text)

    def exclusive(first: int, second: int) -> bool:
        a = paths[first - 1] if 0 < first <= len(paths) else ()
        b = paths[second - 1] if 0 < second <= len(paths) else ()
        return any(x[0] == y[0] and x[1] != y[1] for x, y in zip(a, b, strict=False))

    return exclusive


def _paths(text: str) -> list[Path]:
    """Each line's path, as it stands at the line's start and after its own actions."""
    stack: list[tuple[int, int]] = []
    blocks = 0
    out: list[Path] = []
    for line in text.split("\n"):
        for word in _ACTION.findall(line):
            if word in _OPENS:
                blocks += 1
                stack.append((blocks, 0))
            elif word == "else" and stack:
                block, branch = stack.pop()
                stack.append((block, branch + 1))
            elif word == "end" and stack:
                stack.pop()
        out.append(tuple(stack))
    return out
