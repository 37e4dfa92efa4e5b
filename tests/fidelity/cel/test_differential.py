"""dragate's CEL against Kubernetes 1.34's (the Go oracle), case by case, per library.

A difference listed in known_differences.json (with its reason) is accepted; any other
difference fails, and so does a listed difference that no longer occurs (the list must stay
true). Regenerate the list after a deliberate change with
`PYTHONPATH=tests python3 -m fidelity.cel.report --write-known`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fidelity.cel.cases import LIBRARIES
from fidelity.cel.run import Outcome, agreement_table, run_all

KNOWN_FILE = Path(__file__).parent / "known_differences.json"


@pytest.fixture(scope="module")
def outcomes() -> list[Outcome]:
    found = run_all()
    print("\n" + agreement_table(found, LIBRARIES))
    return found


def _known(library: str) -> dict[str, str]:
    known: dict[str, dict[str, str]] = json.loads(KNOWN_FILE.read_text())
    return known.get(library, {})


@pytest.mark.parametrize("library", LIBRARIES, ids=LIBRARIES)
def test_library_agrees_with_kubernetes(outcomes: list[Outcome], library: str) -> None:
    mine = [o for o in outcomes if o.case.library == library]
    assert mine, f"no cases found for {library}: the upstream table moved or is empty"
    found = {o.case.key: o for o in mine if o.difference is not None}
    known = _known(library)
    new = {
        key: f"{o.difference}: kubernetes {o.kubernetes} / dragate {o.dragate}"
        for key, o in found.items()
        if key not in known
    }
    assert not new, f"new differences from Kubernetes: {json.dumps(new, indent=1)}"
    stale = sorted(set(known) - set(found))
    assert not stale, f"listed as known differences but now agree: {stale}"
