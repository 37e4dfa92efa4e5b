"""Run every differential case through the oracle and dragate; shared by the test and report."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fidelity.cel.cases import Case, all_cases
from fidelity.cel.compare import difference
from fidelity.cel.dragate_side import answer
from fidelity.cel.oracle import ask, oracle_binary


@dataclass(frozen=True)
class Outcome:
    """One case with both answers and how they differ (None: they agree)."""

    case: Case
    kubernetes: dict[str, Any]
    dragate: dict[str, Any]
    difference: str | None


def run_all(minor: str) -> list[Outcome]:
    """Every case of a minor's upstream tables, its oracle asked once for the whole batch,
    dragate targeting the same minor."""
    binary = oracle_binary(minor)
    cases = all_cases(binary)
    answers = ask(binary, [case.request() for case in cases])
    outcomes = []
    for case, expected in zip(cases, answers, strict=True):
        got = answer(case, minor)
        outcomes.append(Outcome(case, expected, got, difference(expected, got)))
    return outcomes


def agreement_table(
    minor: str,
    outcomes: list[Outcome],
    libraries: tuple[str, ...],
    known: dict[str, dict[str, str]],
) -> str:
    """A Markdown table for one minor: cases, agreement and listed differences per library."""
    rows = [
        f"Kubernetes {minor}",
        "",
        "| library | cases | Kubernetes refuses at compile time | agree | known differences"
        " | agreement |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    totals = [0, 0, 0, 0]
    for library in libraries:
        mine = [o for o in outcomes if o.case.library == library]
        counts = _counts(mine, known.get(library, {}))
        totals = [t + c for t, c in zip(totals, counts, strict=True)]
        rows.append(_row(library, counts))
    rows.append(_row("**all**", totals))
    return "\n".join(rows)


def _counts(mine: list[Outcome], known: dict[str, str]) -> list[int]:
    """cases, refused by Kubernetes at compile time, agreeing, listed differences."""
    return [
        len(mine),
        sum(bool(o.kubernetes.get("compile_error")) for o in mine),
        sum(o.difference is None for o in mine),
        sum(o.difference is not None and o.case.key in known for o in mine),
    ]


def _row(library: str, counts: list[int]) -> str:
    cells = " | ".join(str(c) for c in counts)
    return f"| {library} | {cells} | {_percent(counts[2], counts[0])} |"


def _percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.2f}%" if whole else "-"
