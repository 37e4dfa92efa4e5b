"""What a lint rule reports: a rule id, a severity, where (a path into the object), and a fix."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Severity = Literal["error", "warning"]
Path = tuple[str | int, ...]

ERROR: Severity = "error"
WARNING: Severity = "warning"


@dataclass(frozen=True)
class Finding:
    """One mistake in one object; `path` leads from the object's root to the offending value.

    The pure layer knows nothing of files: the CLI turns `path` into a line number.
    """

    rule: str
    severity: Severity
    path: Path
    message: str
    fix: str = ""

    def at(self, prefix: Path) -> Finding:
        """The same finding, for an object nested at `prefix` inside a larger one."""
        return Finding(self.rule, self.severity, prefix + self.path, self.message, self.fix)

    def dotted_path(self) -> str:
        """`spec.devices.requests[0].count` — for messages and JSON output."""
        out = ""
        for step in self.path:
            out += f"[{step}]" if isinstance(step, int) else (f".{step}" if out else step)
        return out
