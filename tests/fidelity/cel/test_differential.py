"""dragate's CEL against each supported Kubernetes minor's (its Go oracle), case by case,
per library, dragate targeting the same minor.

A difference listed in known_differences.json under its minor (with its reason) is accepted;
any other difference fails, and so does a listed difference that no longer occurs (the list
must stay true). Regenerate a minor's list after a deliberate change with
`PYTHONPATH=.:tests python3 -m fidelity.cel.report --minor 1.37 --write-known`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fidelity.cel.cases import LIBRARIES
from fidelity.cel.oracle import MINORS
from fidelity.cel.run import Outcome, agreement_table, run_all

KNOWN_FILE = Path(__file__).parent / "known_differences.json"
"""minor -> library -> case key -> why dragate differs."""


def known_for(minor: str) -> dict[str, dict[str, str]]:
    known: dict[str, dict[str, dict[str, str]]] = json.loads(KNOWN_FILE.read_text())
    return known.get(minor, {})


class _Outcomes:
    """Each minor's outcomes, computed (and their table printed) the first time one is asked."""

    def __init__(self) -> None:
        self.by_minor: dict[str, list[Outcome]] = {}

    def of(self, minor: str) -> list[Outcome]:
        if minor not in self.by_minor:
            found = run_all(minor)
            print("\n" + agreement_table(minor, found, LIBRARIES, known_for(minor)))
            self.by_minor[minor] = found
        return self.by_minor[minor]


@pytest.fixture(scope="module")
def outcomes() -> _Outcomes:
    return _Outcomes()


@pytest.mark.parametrize("library", LIBRARIES, ids=LIBRARIES)
@pytest.mark.parametrize("minor", MINORS, ids=MINORS)
def test_library_agrees_with_kubernetes(outcomes: _Outcomes, minor: str, library: str) -> None:
    mine = [o for o in outcomes.of(minor) if o.case.library == library]
    assert mine, f"no cases found for {library}: the upstream table moved or is empty"
    found = {o.case.key: o for o in mine if o.difference is not None}
    known = known_for(minor).get(library, {})
    new = {
        key: f"{o.difference}: kubernetes {o.kubernetes} / dragate {o.dragate}"
        for key, o in found.items()
        if key not in known
    }
    assert not new, f"new differences from Kubernetes {minor}: {json.dumps(new, indent=1)}"
    stale = sorted(set(known) - set(found))
    assert not stale, f"listed as known differences of {minor} but now agree: {stale}"
