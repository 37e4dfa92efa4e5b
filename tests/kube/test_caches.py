"""KubeState's readiness without an API server: when its caches refuse to answer, and that a
healthy verdict is reused only while no cache could have turned stale."""

from __future__ import annotations

from typing import cast

import pytest

from webhook.kube.api import KubeApi
from webhook.kube.caches import KubeState
from webhook.types import FactsUnavailable

STALE_AFTER = 10.0


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _state(*, synced: bool = True) -> tuple[KubeState, Clock]:
    clock = Clock()
    state = KubeState(cast(KubeApi, None), stale_after=STALE_AFTER, clock=clock)
    for cache in state._caches.values() if synced else ():
        cache.synced.set()
    return state, clock


def _answers(state: KubeState) -> bool:
    try:
        state.namespace("default")
    except FactsUnavailable:
        return False
    return True


@pytest.mark.parametrize(
    ("failing_for", "later", "answers"),
    [
        pytest.param(None, 0.0, True, id="none-failing"),
        pytest.param(None, 500.0, True, id="none-failing-much-later"),
        pytest.param(5.0, 0.0, True, id="failing-briefly"),
        pytest.param(5.0, 5.0, True, id="failing-exactly-stale-after"),
        pytest.param(5.0, 5.1, False, id="failing-longer-than-stale-after"),
        pytest.param(11.0, 0.0, False, id="stale-already"),
    ],
)
def test_a_cache_failing_longer_than_stale_after_refuses(
    failing_for: float | None, later: float, answers: bool
) -> None:
    """Asked first at `now` (the verdict then reused), then `later` seconds on."""
    state, clock = _state()
    if failing_for is not None:
        state._caches["ResourceSlice"].failing_since = clock.now - failing_for
    _answers(state)
    clock.now += later
    assert _answers(state) is answers


def test_a_cache_that_starts_failing_after_a_healthy_verdict_is_refused_in_time() -> None:
    """The healthy verdict lasts stale_after from when it was found, so a failure that starts
    just after is seen as soon as it is stale_after old."""
    state, clock = _state()
    assert _answers(state)
    clock.now += 3.0
    state._caches["ResourceClaim"].failing_since = clock.now
    clock.now += STALE_AFTER
    assert _answers(state)  # failing exactly stale_after: not stale yet
    clock.now += 0.01
    with pytest.raises(FactsUnavailable, match="ResourceClaim cache stale for 10s"):
        state.claims()


def test_the_caches_are_not_asked_again_while_the_verdict_holds() -> None:
    """Healthy, it is reused: a cache flag flipped behind its back (which `synced` never is)
    is not seen until the bound passes."""
    state, clock = _state()
    assert _answers(state)
    state._caches["Namespace"].synced.clear()
    clock.now += STALE_AFTER - 0.01
    assert _answers(state)
    clock.now += 0.01
    assert not _answers(state)


def test_an_unsynced_cache_is_never_remembered_as_healthy() -> None:
    state, _ = _state(synced=False)
    with pytest.raises(FactsUnavailable, match="not synced yet"):
        state.namespace("default")
    for cache in state._caches.values():
        cache.synced.set()
    assert _answers(state) and state.synced()
    assert state.health()["ready"] is True
