"""Print the agreement table and every difference; `--write-known` rewrites the known list.

Usage: PYTHONPATH=tests python3 -m fidelity.cel.report [--write-known] [--show LIBRARY]
Reasons for new entries come from `reasons.reason_for`; existing reasons are kept.
"""

from __future__ import annotations

import json
import sys

from fidelity.cel.cases import LIBRARIES
from fidelity.cel.reasons import reason_for
from fidelity.cel.run import agreement_table, run_all
from fidelity.cel.test_differential import KNOWN_FILE


def main(argv: list[str]) -> None:
    outcomes = run_all()
    print(agreement_table(outcomes, LIBRARIES))
    show = argv[argv.index("--show") + 1] if "--show" in argv else None
    for o in outcomes:
        if o.difference and (show is None or o.case.library == show):
            kubernetes, dragate = json.dumps(o.kubernetes)[:300], json.dumps(o.dragate)[:300]
            print(
                f"[{o.case.library}] {o.case.key}\n    {o.difference}: "
                f"k8s={kubernetes}\n    dragate={dragate}"
            )
    if "--write-known" in argv:
        old = json.loads(KNOWN_FILE.read_text()) if KNOWN_FILE.exists() else {}
        known: dict[str, dict[str, str]] = {}
        for o in outcomes:
            if o.difference:
                kept = old.get(o.case.library, {}).get(o.case.key)
                known.setdefault(o.case.library, {})[o.case.key] = kept or reason_for(o)
        text = json.dumps(known, indent=1, sort_keys=True, ensure_ascii=False)
        KNOWN_FILE.write_text(text + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
