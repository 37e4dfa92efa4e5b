"""Leadership tells its listeners of every change, once, and survives a failing listener
(the election itself against a real API server: tests/e2e/test_leader.py)."""

from __future__ import annotations

import logging
from typing import cast

import pytest
from kubernetes.client.exceptions import ApiException
from kubernetes.leaderelection import leaderelection

from webhook.kube.api import KubeApi
from webhook.kube.leader import Leadership, LeaseTimes


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


class _Refusing:
    """The coordination API of a cluster that refuses this service account (RBAC) or has no
    such namespace: every call fails as the API server answers."""

    def __init__(self, status: int, reason: str) -> None:
        self.status, self.reason, self.calls = status, reason, 0

    def _fail(self, *_: object, **__: object) -> None:
        self.calls += 1
        raise ApiException(status=self.status, reason=self.reason)

    read_namespaced_lease = create_namespaced_lease = replace_namespaced_lease = _fail


class _Absent(_Refusing):
    """No Lease yet (read: 404), and creating one fails with `status`."""

    def read_namespaced_lease(self, *_: object, **__: object) -> None:
        raise ApiException(status=404, reason="Not Found", body='{"code": 404}')


@pytest.mark.parametrize(
    ("api", "failure"),
    [
        pytest.param(_Refusing(403, "Forbidden"), "read: 403 Forbidden", id="rbac-read"),
        pytest.param(_Absent(403, "Forbidden"), "create: 403 Forbidden", id="rbac-create"),
        pytest.param(_Absent(404, "Not Found"), "create: 404 Not Found", id="no-such-namespace"),
    ],
)
def test_a_lease_that_cannot_be_held_is_warned_of_once(
    api: _Refusing, failure: str, caplog: pytest.LogCaptureFixture
) -> None:
    lead = Leadership(cast(KubeApi, object()), "nowhere", identity="pod_1")
    config = lead._config()
    config.lock.api_instance.api = api
    election = leaderelection.LeaderElection(config)
    with caplog.at_level(logging.INFO, logger="dragate.kube.leader"):
        for _ in range(3):
            assert not election.try_acquire_or_renew()
    warned = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1, [r.getMessage() for r in caplog.records]
    assert "nowhere/dragate-leader" in warned[0].getMessage()
    assert failure in warned[0].getMessage()
    assert lead.failure.endswith(failure) and not lead.leading()
    lead._started()
    assert lead.failure == ""


@pytest.mark.parametrize(
    ("times", "seconds"),
    [
        pytest.param(LeaseTimes(), 19, id="client-go-defaults"),
        pytest.param(LeaseTimes(lease_duration=4, renew_deadline=3, retry_period=1), 6, id="short"),
    ],
)
def test_a_standby_takes_over_within_the_lease_and_two_retry_periods(
    times: LeaseTimes, seconds: int
) -> None:
    """One retry period to see the dead leader's last renewal, the lease measured from then,
    one retry period to see that it ran out (docs/architecture.md says 19 s)."""
    assert times.takeover_seconds == seconds
