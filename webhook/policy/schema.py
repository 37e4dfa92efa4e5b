"""A small declarative schema for policy documents: field name -> spec, one reading mechanism.

Policy files are written by people, so every mistake should come back with `file:line`, the
path of the field and what was expected — and all mistakes at once, not the first one. Each spec
below reads a plain value, reports what is wrong through a `Report` and returns the converted
value or `INVALID`; an `Obj` spec also catches unknown fields (with a "did you mean" for typos)
and runs its cross-field `check` before `make` turns the values into a dataclass.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from webhook.files.yamlio import Document
from webhook.types import JSON, DragateError, Source

Path = tuple[str | int, ...]


class _Invalid:
    """The value of a field that was reported as wrong; makers never see it."""

    def __repr__(self) -> str:
        return "INVALID"


INVALID: Final = _Invalid()

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


# --------------------------------------------------------------------------- problems


@dataclass(frozen=True)
class PolicyProblem:
    """One mistake in a policy file: where, which field, and what is wrong."""

    source: Source
    path: str
    message: str

    def __str__(self) -> str:
        where = f"{self.source}: {self.path}" if self.path else str(self.source)
        return f"{where}: {self.message}"


class PolicyError(DragateError):
    """Policy files that cannot be loaded; carries every problem found in every file."""

    def __init__(self, problems: Sequence[PolicyProblem]) -> None:
        self.problems = tuple(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


def format_path(path: Path) -> str:
    """`spec.quota[0].maxDevices`; other keys are quoted: `matchLabels["dragate.io/tenant"]`."""
    text = ""
    for step in path:
        if isinstance(step, int):
            text += f"[{step}]"
        elif _IDENTIFIER.match(step):
            text += f".{step}" if text else step
        else:
            text += f"[{json.dumps(step)}]"
    return text


def shown(value: JSON) -> str:
    """A value as it would read in YAML, short: `"eight"`, `-1`, `true`, `null`, `a list`."""
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, str | int | float):
        return json.dumps(value)
    return "a list" if isinstance(value, list) else "a mapping"


def suggest(word: str, choices: Sequence[str]) -> str | None:
    """The nearest choice for a typo or a wrong case (`maxDevice` -> `maxDevices`), if any."""
    folded = {c.lower(): c for c in choices}
    if word.lower() in folded:
        return folded[word.lower()]
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.7)
    return close[0] if close else None


@dataclass
class Report:
    """Collects problems for one document, turning paths into `file:line` and `a.b[0].c`."""

    doc: Document
    problems: list[PolicyProblem] = field(default_factory=list)

    def add(self, path: Path, message: str) -> None:
        self.problems.append(PolicyProblem(self.doc.source_of(path), format_path(path), message))

    def wrong(self, path: Path, expected: str, value: JSON, hint: str = "") -> _Invalid:
        """Report `expected X, got Y`; returns INVALID so a spec can `return report.wrong(...)`."""
        self.add(path, f"expected {expected}, got {shown(value)}{hint}")
        return INVALID


# --------------------------------------------------------------------------- specs


class Spec(Protocol):
    """Reads one value: the converted value, or INVALID after reporting why."""

    @property
    def noun(self) -> str: ...

    def read(self, value: JSON, at: Path, report: Report) -> Any: ...


@dataclass(frozen=True)
class Str:
    """A non-empty string, optionally matching a pattern described in words.

    The pattern is written in the syntax Python's `re` and Go's RE2 read alike (no lookaround,
    no backreferences), because it is also the CRD's `pattern` (webhook/policy/openapi.py).
    """

    pattern: re.Pattern[str] | None = None
    noun: str = "a non-empty string"
    empty: bool = False
    max_length: int | None = None

    def read(self, value: JSON, at: Path, report: Report) -> Any:
        if not isinstance(value, str) or not (value or self.empty):
            return report.wrong(at, self.noun, value)
        if self.max_length is not None and len(value) > self.max_length:
            return report.wrong(at, self.noun, value)
        if self.pattern is not None and not self.pattern.fullmatch(value):
            return report.wrong(at, self.noun, value)
        return value


@dataclass(frozen=True)
class Int:
    """A whole number with a lower bound (YAML `true` and `8.0` are not integers here)."""

    minimum: int = 0

    @property
    def noun(self) -> str:
        return f"an integer >= {self.minimum}"

    def read(self, value: JSON, at: Path, report: Report) -> Any:
        if isinstance(value, bool) or not isinstance(value, int) or value < self.minimum:
            return report.wrong(at, self.noun, value)
        return value


@dataclass(frozen=True)
class Bool:
    noun: str = "true or false"

    def read(self, value: JSON, at: Path, report: Report) -> Any:
        return value if isinstance(value, bool) else report.wrong(at, self.noun, value)


@dataclass(frozen=True)
class OneOf:
    """One of a few exact words; a wrong case or a typo gets a "did you mean"."""

    choices: tuple[str, ...]
    convert: Callable[[str], Any] = str

    @property
    def noun(self) -> str:
        return f"one of {', '.join(self.choices)}" if len(self.choices) > 1 else self.choices[0]

    def read(self, value: JSON, at: Path, report: Report) -> Any:
        if isinstance(value, str) and value in self.choices:
            return self.convert(value)
        near = suggest(value, self.choices) if isinstance(value, str) else None
        return report.wrong(at, self.noun, value, f' (did you mean "{near}"?)' if near else "")


@dataclass(frozen=True)
class ListOf:
    """A list; bad items and repeated items are reported (one bad item spoils the list)."""

    item: Spec
    noun_plural: str = "values"
    unique_by: tuple[str, ...] = ()  # for lists of mappings: fields no two items may share

    @property
    def noun(self) -> str:
        return f"a list of {self.noun_plural}"

    def read(self, value: JSON, at: Path, report: Report) -> Any:
        if not isinstance(value, list):
            return report.wrong(at, self.noun, value)
        items = [self.item.read(v, (*at, i), report) for i, v in enumerate(value)]
        _repeats([(i, v) for i, v in enumerate(value) if isinstance(v, str)], at, (), report)
        for key in self.unique_by:
            keyed = [(i, v.get(key)) for i, v in enumerate(value) if isinstance(v, dict)]
            _repeats([(i, k) for i, k in keyed if isinstance(k, str)], at, (key,), report)
        return INVALID if INVALID in items else items


def _repeats(keyed: list[tuple[int, str]], at: Path, tail: Path, report: Report) -> None:
    """Report every item whose key an earlier item already has, naming the earlier one."""
    first: dict[str, int] = {}
    for i, key in keyed:
        if key in first:
            earlier = (*at, first[key], *tail)
            where = f"{format_path(earlier)}, line {report.doc.line_of(earlier)}"
            report.add((*at, i, *tail), f'"{key}" is listed twice (first at {where})')
        first.setdefault(key, i)


@dataclass(frozen=True)
class MapOf:
    """A mapping of string keys (label keys, say) to values of one spec."""

    value: Spec
    noun: str = "a mapping"

    def read(self, value: JSON, at: Path, report: Report) -> Any:
        if not isinstance(value, dict):
            return report.wrong(at, self.noun, value)
        read = {k: self.value.read(v, (*at, k), report) for k, v in value.items()}
        return INVALID if INVALID in read.values() else read


Check = Callable[[Mapping[str, Any], Path, Report], None]
Make = Callable[[Mapping[str, Any]], Any]


@dataclass(frozen=True)
class Rule:
    """A `check` written again as the API server's CEL (`x-kubernetes-validations`).

    An object's `check` runs in Python; its rules are what the CRD asks of the same object, so
    a policy applied as a Kubernetes object is refused for the same reason as a policy file.
    """

    expression: str
    message: str


@dataclass(frozen=True)
class Obj:
    """A mapping with known fields: unknown ones are reported, required ones must be there.

    `check` sees the fields that read cleanly (cross-field rules such as "one of a or b");
    `make` builds the result unless a required field is missing or wrong. `rules` state the
    check in CEL for the CRD; a check the API server cannot judge has none (`loader_only`
    says why, and the CRD test holds every check to one or the other).
    """

    fields: Mapping[str, Spec]
    required: tuple[str, ...] = ()
    check: Check | None = None
    make: Make | None = None
    noun: str = "a mapping"
    open: bool = False  # True: other fields are someone else's business, not "unknown"
    rules: tuple[Rule, ...] = ()
    loader_only: str = ""

    def read(self, value: JSON, at: Path, report: Report) -> Any:
        if not isinstance(value, dict):
            return report.wrong(at, self.noun, value)
        typos = not self.open and self._unknown(value, at, report)
        read = {k: s.read(value[k], (*at, k), report) for k, s in self.fields.items() if k in value}
        for name in self.required:
            if name not in value:
                report.add((*at, name), "required field is missing")
        if self.check is not None and not typos:  # a typo'd field would mislead the check
            self.check(read, at, report)  # wrong fields are present as INVALID (truthy)
        values = {k: v for k, v in read.items() if v is not INVALID}
        if any(name not in values for name in self.required):
            return INVALID
        return self.make(values) if self.make is not None else values

    def _unknown(self, value: Mapping[str, JSON], at: Path, report: Report) -> bool:
        """Report fields this object does not have; True when there were any."""
        known = list(self.fields)
        unknown = [key for key in value if key not in self.fields]
        for key in unknown:
            near = suggest(key, known)
            hint = f'did you mean "{near}"?' if near else f"known fields: {', '.join(known)}"
            report.add((*at, key), f"unknown field ({hint})")
        return bool(unknown)


@dataclass(frozen=True)
class Anything:
    """A field read elsewhere (apiVersion and kind are checked before the body)."""

    noun: str = "anything"

    def read(self, value: JSON, at: Path, report: Report) -> Any:
        return value
