"""Every policy test suite in the repository, run through the same runner as `dragate test`."""

from __future__ import annotations

from pathlib import Path

import pytest

from webhook.cli.policytest import CaseResult, find_suites, run_suite

REPO = Path(__file__).resolve().parents[2]
RESULTS: list[CaseResult] = [
    result for suite in find_suites([str(REPO / "policies")]) for result in run_suite(suite)
]


def test_the_example_policies_have_suites() -> None:
    assert len(RESULTS) >= 10


@pytest.mark.parametrize("result", RESULTS, ids=[r.case for r in RESULTS])
def test_case(result: CaseResult) -> None:
    assert result.passed, "\n".join(result.failures)
