"""How `dragate check` prints verdicts: a table for people, JSON/YAML for tools, JUnit for CI."""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ruamel.yaml import YAML


@dataclass(frozen=True)
class Row:
    """One object's verdict; `as_dict` is the documented JSON contract."""

    kind: str
    namespace: str
    name: str
    allowed: bool
    reasons: tuple[str, ...]
    warnings: tuple[str, ...]
    patched: Any
    tenant: str
    source: str
    audit: tuple[str, ...] = ()  # rules broken under Audit: admitted and recorded
    modes: tuple[str, ...] = ()  # "warn", "audit": why an object breaking rules was admitted

    @property
    def result(self) -> str:
        """`allow`, `DENY`, or `allow (warn)` / `allow (audit)` for rules broken and admitted."""
        if not self.allowed:
            return "DENY"
        return f"allow ({', '.join(self.modes)})" if self.modes else "allow"

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "allowed": self.allowed,
            "reasons": list(self.reasons),
            "warnings": list(self.warnings),
            "patched": self.patched,
            "tenant": self.tenant,
            "source": self.source,
            "audit": list(self.audit),
        }


def render_json(rows: Sequence[Row]) -> str:
    return json.dumps([r.as_dict() for r in rows], indent=2) + "\n"


def render_yaml(rows: Sequence[Row]) -> str:
    out = io.StringIO()
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    yaml.dump([r.as_dict() for r in rows], out)
    return out.getvalue()


def render_text(rows: Sequence[Row]) -> str:
    """A table, each object with the `file:line` it came from, its denials and warnings."""
    header = ("RESULT", "KIND", "NAMESPACE", "NAME", "TENANT", "SOURCE")
    table = [header] + [
        (
            r.result,
            r.kind,
            r.namespace or "-",
            r.name or "-",
            r.tenant or "-",
            r.source or "-",
        )
        for r in rows
    ]
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    lines = []
    for i, line in enumerate(table):
        lines.append(
            "  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip()
        )
        if i:
            lines.extend(_details(rows[i - 1]))
    denied = sum(not r.allowed for r in rows)
    lines.append(f"\n{len(rows)} objects: {len(rows) - denied} allowed, {denied} denied")
    return "\n".join(lines) + "\n"


def _details(row: Row) -> list[str]:
    details = [f"    deny: {reason}" for reason in row.reasons]
    details += [f"    warn: {warning}" for warning in row.warnings]
    details += [f"    audit: {entry}" for entry in row.audit]
    if row.patched is not None:
        details.append("    mutated: legacy GPU resources rewritten into DRA claims")
    return details


def render_junit(rows: Sequence[Row]) -> str:
    suite = ET.Element(
        "testsuite",
        name="dragate check",
        tests=str(len(rows)),
        failures=str(sum(not r.allowed for r in rows)),
    )
    for row in rows:
        case = ET.SubElement(
            suite, "testcase", classname=row.kind, name=f"{row.namespace}/{row.name}"
        )
        if not row.allowed:
            failure = ET.SubElement(case, "failure", message=row.reasons[0] if row.reasons else "")
            failure.text = "\n".join(row.reasons)
        said = [*row.warnings, *(f"audit: {entry}" for entry in row.audit)]
        if said:
            ET.SubElement(case, "system-out").text = "\n".join(said)
    ET.indent(suite)
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"


RENDERERS: dict[str, Callable[[Sequence[Row]], str]] = {
    "text": render_text,
    "json": render_json,
    "yaml": render_yaml,
    "junit": render_junit,
}
