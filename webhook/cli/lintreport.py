"""How `dragate lint` prints findings: lines for people, JSON for tools, SARIF for code scanning.

SARIF 2.1.0 is what GitHub code scanning (github/codeql-action/upload-sarif) and most CI
dashboards read: one run whose `tool.driver.rules` lists every rule, and one result per finding
with its rule id, level, message and `file:line` (the file relative to the working directory,
where CI checks the repository out).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from urllib.parse import quote

from webhook.lint import ERROR, PARSE, RULES, WARNING

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
INFORMATION_URI = "https://github.com/dragate/dragate/blob/main/docs/cli.md#dragate-lint"


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


@dataclass(frozen=True)
class Tally:
    """How many files were linted, and how many a walk skipped as no Kubernetes object."""

    files: int
    skipped: int


def summary(results: Sequence[Located], tally: Tally) -> dict[str, int]:
    return {
        "files": tally.files,
        "errors": sum(r.severity == ERROR for r in results),
        "warnings": sum(r.severity == WARNING for r in results),
        "unreadable": len({r.file for r in results if r.rule == PARSE.id}),
        "skipped": tally.skipped,
    }


def render_text(results: Sequence[Located], tally: Tally) -> str:
    lines = [r.text() for r in results]
    s = summary(results, tally)
    skipped = f"; {plural(s['skipped'], 'file')} skipped: not Kubernetes objects"
    tail = skipped if s["skipped"] else ""
    if not results:
        lines.append(f"{plural(s['files'], 'file')} checked, no problems found{tail}")
    else:
        unreadable = f", {plural(s['unreadable'], 'file')} unreadable" if s["unreadable"] else ""
        lines.append(
            f"{plural(s['errors'], 'error')}, {plural(s['warnings'], 'warning')} in "
            f"{plural(s['files'], 'file')}{unreadable}{tail}"
        )
    return "\n".join(lines) + "\n"


def render_json(results: Sequence[Located], tally: Tally) -> str:
    body = {"findings": [r.as_json() for r in results], "summary": summary(results, tally)}
    return json.dumps(body, indent=2) + "\n"


def render_sarif(results: Sequence[Located], tally: Tally) -> str:
    """One SARIF 2.1.0 log; `tally` is not part of it (SARIF has no place for skipped files)."""
    rules = sorted(RULES.values(), key=lambda r: r.id)
    index = {info.id: i for i, info in enumerate(rules)}
    driver = {
        "name": "dragate",
        "version": _version(),
        "informationUri": INFORMATION_URI,
        "rules": [
            {
                "id": info.id,
                "name": info.id,
                "shortDescription": {"text": info.summary},
                "defaultConfiguration": {"level": info.severity},
            }
            for info in rules
        ],
    }
    log = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {"tool": {"driver": driver}, "results": [_sarif_result(r, index) for r in results]}
        ],
    }
    return json.dumps(log, indent=2) + "\n"


def _sarif_result(result: Located, index: dict[str, int]) -> dict[str, object]:
    location: dict[str, object] = {"artifactLocation": {"uri": artifact_uri(result.file)}}
    if result.line > 0:
        location["region"] = {"startLine": result.line}
    fix = f" (fix: {result.fix})" if result.fix else ""
    found: dict[str, object] = {
        "ruleId": result.rule,
        "level": "error" if result.severity == ERROR else "warning",
        "message": {"text": f"{result.message}{fix}"},
        "locations": [{"physicalLocation": location}],
    }
    if result.rule in index:
        found["ruleIndex"] = index[result.rule]
    return found


def artifact_uri(file: str) -> str:
    """A relative URI reference: the path from the working directory when the file is below
    it, forward slashes, percent-encoded (`<stdin>` stays a name, as code scanning shows it)."""
    path = Path(file)
    if path.is_absolute():
        try:
            path = path.relative_to(Path.cwd())
        except ValueError:
            return path.as_uri()
    return quote(path.as_posix())


def _version() -> str:
    try:
        return metadata.version("dragate")
    except metadata.PackageNotFoundError:
        return "0"


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


RENDERERS: dict[str, Callable[[Sequence[Located], Tally], str]] = {
    "text": render_text,
    "json": render_json,
    "sarif": render_sarif,
}
