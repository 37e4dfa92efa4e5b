"""Leadership tells its listeners of every change, once, and survives a failing listener
(the election itself against a real API server: tests/e2e/test_leader.py)."""

from __future__ import annotations

from typing import cast

import pytest

from webhook.kube.api import KubeApi
from webhook.kube.leader import Leadership


def _failing() -> None:
    raise RuntimeError("a listener with a bug")


@pytest.mark.parametrize(
    ("events", "leading", "told"),
    [
        pytest.param(["started"], True, 1, id="gained"),
        pytest.param(["started", "stopped"], False, 2, id="gained-then-lost"),
        pytest.param(["stopped"], False, 0, id="lost-without-leading-is-no-change"),
        pytest.param(["started", "started"], True, 1, id="gained-twice-is-one-change"),
        pytest.param(["started", "stopped", "started"], True, 3, id="a-second-term"),
    ],
)
def test_listeners_hear_each_change_once(events: list[str], leading: bool, told: int) -> None:
    lead = Leadership(cast(KubeApi, object()), "dragate-system", identity="pod_1")
    heard: list[bool] = []
    lead.on_change(_failing)
    lead.on_change(lambda: heard.append(lead.leading()))
    for event in events:  # the election's callbacks, as LeaderElection calls them
        (lead._started if event == "started" else lead._stopped)()
    assert lead.leading() is leading
    assert len(heard) == told
    assert heard == [n % 2 == 0 for n in range(told)], "each listener sees the new state"
