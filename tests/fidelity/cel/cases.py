"""The differential cases: upstream Go test tables (read at test time) and dragate's own.

Upstream expressions are read from the Go module cache of the pinned oracle modules, never
copied into the repository. Library expressions run without variables; DRA expressions run
against every device of their table, so one expression is several cases.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fidelity.cel.dra_cases import NVIDIA_DEVICES, NVIDIA_SELECTORS, UPSTREAM_DEVICES
from fidelity.cel.library_cases import (
    DURATION_EXPRESSIONS,
    FORMAT_EXPRESSIONS,
    FORMAT_VERB_EXPRESSIONS,
    OPTIONAL_ENTRY_EXPRESSIONS,
    QUANTITY_EXPRESSIONS,
    TYPE_EXPRESSIONS,
)
from fidelity.cel.oracle import extract, module_dirs


@dataclass(frozen=True)
class Case:
    """One expression in one environment (and, for selectors, against one device)."""

    library: str
    expr: str
    env: str = "library"
    device_name: str = ""
    device: Any = None

    @property
    def key(self) -> str:
        """What the known-differences list names a case by."""
        return f"{self.device_name}: {self.expr}" if self.device_name else self.expr

    def request(self) -> dict[str, Any]:
        """The oracle's JSON request for this case."""
        return {"env": self.env, "expr": self.expr, "device": self.device}


UPSTREAM_TABLES: dict[str, tuple[str, str]] = {
    "k8s cidr": ("k8s.io/apiserver", "pkg/cel/library/cidr_test.go"),
    "k8s ip": ("k8s.io/apiserver", "pkg/cel/library/ip_test.go"),
    "k8s format": ("k8s.io/apiserver", "pkg/cel/library/format_test.go"),
    "k8s quantity": ("k8s.io/apiserver", "pkg/cel/library/quantity_test.go"),
    "k8s semver": ("k8s.io/apiserver", "pkg/cel/library/semver_test.go"),
    "k8s cost_test (lists, regex, strings, urls, sets, authz...)": (
        "k8s.io/apiserver",
        "pkg/cel/library/cost_test.go",
    ),
    "ext bindings": ("github.com/google/cel-go", "ext/bindings_test.go"),
    "ext comprehensions": ("github.com/google/cel-go", "ext/comprehensions_test.go"),
    "ext encoders": ("github.com/google/cel-go", "ext/encoders_test.go"),
    "ext lists": ("github.com/google/cel-go", "ext/lists_test.go"),
    "ext math": ("github.com/google/cel-go", "ext/math_test.go"),
    "ext native": ("github.com/google/cel-go", "ext/native_test.go"),
    "ext protos": ("github.com/google/cel-go", "ext/protos_test.go"),
    "ext regex": ("github.com/google/cel-go", "ext/regex_test.go"),
    "ext sets": ("github.com/google/cel-go", "ext/sets_test.go"),
    "ext strings": ("github.com/google/cel-go", "ext/strings_test.go"),
}
"""Library name -> (Go module, test file) whose expression literals become library cases."""

DRA_UPSTREAM = "dra compile_test"
DRA_NVIDIA = "dra selectors (nvidia)"
CRD_RULES = "apiextensions validation rules (without self)"
CRD_RULES_SOURCE = ("k8s.io/apiextensions-apiserver", "pkg/apiserver/schema/cel/validation_test.go")
"""CRD x-kubernetes-validations tables: their `valid` and `errors` rules that use no `self`."""
_SELF = re.compile(r"\b(self|oldSelf)\b")

OWN_TABLES: dict[str, tuple[str, ...]] = {
    "dragate format edges": FORMAT_EXPRESSIONS,
    "dragate type values": TYPE_EXPRESSIONS,
    "dragate quantity printing": QUANTITY_EXPRESSIONS,
    "dragate durations": DURATION_EXPRESSIONS,
    "dragate string.format verbs": FORMAT_VERB_EXPRESSIONS,
    "dragate optional literal entries": OPTIONAL_ENTRY_EXPRESSIONS,
}
"""dragate's own library cases, run without variables like the upstream tables."""
LIBRARIES = (*UPSTREAM_TABLES, CRD_RULES, *OWN_TABLES, DRA_UPSTREAM, DRA_NVIDIA)


def _dedupe(cases: list[Case]) -> list[Case]:
    seen: set[tuple[str, str]] = set()
    unique = []
    for case in cases:
        if (case.library, case.key) not in seen:
            seen.add((case.library, case.key))
            unique.append(case)
    return unique


def _device_cases(library: str, exprs: list[str], devices: dict[str, Any]) -> list[Case]:
    return [
        Case(library, expr, "device", name, device)
        for expr in exprs
        for name, device in devices.items()
    ]


def all_cases(binary: Path) -> list[Case]:
    """Every case: the upstream tables of the pinned modules, then dragate's DRA table."""
    dirs = module_dirs(binary)
    cases = []
    for library, (module, path) in UPSTREAM_TABLES.items():
        found = extract(binary, [dirs[module] / path])
        cases += [Case(library, row["expr"]) for row in found]
    module, path = CRD_RULES_SOURCE
    rules = [row["expr"] for row in extract(binary, [dirs[module] / path])]
    cases += [Case(CRD_RULES, rule) for rule in rules if not _SELF.search(rule)]
    for library, exprs in OWN_TABLES.items():
        cases += [Case(library, expr) for expr in exprs]
    dra_file = dirs["k8s.io/dynamic-resource-allocation"] / "cel/compile_test.go"
    dra_exprs = [row["expr"] for row in extract(binary, [dra_file])]
    cases += _device_cases(DRA_UPSTREAM, dra_exprs, UPSTREAM_DEVICES)
    cases += _device_cases(DRA_NVIDIA, list(NVIDIA_SELECTORS), NVIDIA_DEVICES)
    return _dedupe(cases)
