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


def run_all() -> list[Outcome]:
    """Every case, the oracle asked once for the whole batch."""
    binary = oracle_binary()
    cases = all_cases(binary)
    answers = ask(binary, [case.request() for case in cases])
    outcomes = []
    for case, expected in zip(cases, answers, strict=True):
        got = answer(case)
        outcomes.append(Outcome(case, expected, got, difference(expected, got)))
    return outcomes


def agreement_table(outcomes: list[Outcome], libraries: tuple[str, ...]) -> str:
    """A Markdown table: cases and agreement per library, then the total."""
    rows = [
        "| library | cases | Kubernetes refuses at compile time | agree | agreement |",
        "|---|---:|---:|---:|---:|",
    ]
    total = agreeing = refused = 0
    for library in libraries:
        mine = [o for o in outcomes if o.case.library == library]
        agree = sum(o.difference is None for o in mine)
        refuses = sum(bool(o.kubernetes.get("compile_error")) for o in mine)
        total, agreeing, refused = total + len(mine), agreeing + agree, refused + refuses
        rows.append(
            f"| {library} | {len(mine)} | {refuses} | {agree} | {_percent(agree, len(mine))} |"
        )
    rows.append(f"| **all** | {total} | {refused} | {agreeing} | {_percent(agreeing, total)} |")
    return "\n".join(rows)


def _percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"
