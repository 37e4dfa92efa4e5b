"""Notes are kubectl warnings: short, one line, each naming what changed or why not."""

from __future__ import annotations

MAX_NOTE = 120


def note(text: str) -> str:
    """`text` on one line, cut to what kubectl shows comfortably."""
    line = " ".join(text.split())
    return line if len(line) <= MAX_NOTE else line[: MAX_NOTE - 1] + "…"
