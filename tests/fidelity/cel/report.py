"""Print each minor's agreement table and every difference; `--write-known` rewrites the
known list of the minors reported.

Usage: PYTHONPATH=.:tests python3 -m fidelity.cel.report [--minor 1.37] [--write-known]
       [--show LIBRARY]
Reasons for new entries come from `reasons.reason_for`; existing reasons are kept.
"""

from __future__ import annotations

import json
import sys

from fidelity.cel.cases import LIBRARIES
from fidelity.cel.oracle import MINORS
from fidelity.cel.reasons import reason_for
from fidelity.cel.run import Outcome, agreement_table, run_all
from fidelity.cel.test_differential import KNOWN_FILE, known_for


def _print_differences(outcomes: list[Outcome], show: str | None) -> None:
    for o in outcomes:
        if o.difference and (show is None or o.case.library == show):
            kubernetes, dragate = json.dumps(o.kubernetes)[:300], json.dumps(o.dragate)[:300]
            print(
                f"[{o.case.library}] {o.case.key}\n    {o.difference}: "
                f"k8s={kubernetes}\n    dragate={dragate}"
            )


def _known(outcomes: list[Outcome], old: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    known: dict[str, dict[str, str]] = {}
    for o in outcomes:
        if o.difference:
            kept = old.get(o.case.library, {}).get(o.case.key)
            known.setdefault(o.case.library, {})[o.case.key] = kept or reason_for(o)
    return known


def main(argv: list[str]) -> None:
    minors = [argv[argv.index("--minor") + 1]] if "--minor" in argv else list(MINORS)
    show = argv[argv.index("--show") + 1] if "--show" in argv else None
    everything = json.loads(KNOWN_FILE.read_text()) if KNOWN_FILE.exists() else {}
    for minor in minors:
        outcomes = run_all(minor)
        print(agreement_table(minor, outcomes, LIBRARIES, known_for(minor)) + "\n")
        _print_differences(outcomes, show)
        everything[minor] = _known(outcomes, known_for(minor))
    if "--write-known" in argv:
        text = json.dumps(everything, indent=1, sort_keys=True, ensure_ascii=False)
        KNOWN_FILE.write_text(text + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
