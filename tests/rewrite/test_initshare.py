"""Init containers share a claim sized as the device plugin sized the Pod."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from webhook.rewrite.initshare import Member, Role, effective_request, layout

INIT, SIDECAR, APP = Role.INIT, Role.SIDECAR, Role.APP


@pytest.mark.parametrize(
    ("members", "effective"),
    [
        ([(INIT, 8), (APP, 8)], 8),
        ([(INIT, 8), (APP, 2), (APP, 2)], 8),
        ([(INIT, 1), (APP, 4)], 4),
        ([(INIT, 2), (INIT, 6)], 6),
        ([(SIDECAR, 1), (INIT, 8), (APP, 4)], 9),
        ([(INIT, 8), (SIDECAR, 1), (APP, 4)], 8),
        ([(INIT, 8), (SIDECAR, 1), (INIT, 2), (APP, 4), (APP, 1)], 8),
    ],
    ids=[
        "init-equals-app",
        "init-above-sum",
        "app-above-init",
        "inits-only",
        "sidecar-before-init",
        "sidecar-after-init",
        "mixed",
    ],
)
def test_the_claim_holds_what_the_device_plugin_needed(
    members: list[tuple[Role, int]], effective: int
) -> None:
    shared = layout([Member(r, n) for r, n in members])
    assert shared is not None
    assert effective_request([Member(r, n) for r, n in members]) == effective
    assert shared.total == effective


@given(st.lists(st.tuples(st.sampled_from(list(Role)), st.integers(1, 4)), min_size=1, max_size=8))
def test_every_init_container_gets_what_it_asked_on_devices_nobody_else_holds(
    raw: list[tuple[Role, int]],
) -> None:
    members = [Member(r, n) for r, n in sorted(raw, key=lambda m: m[0] == APP)]
    shared = layout(members)
    if shared is None:
        assert len([m for m in members if m.role != INIT]) >= 32 or effective_request(members) > 32
        return
    assert shared.total == effective_request(members)
    for index, refs in shared.refs.items():
        running = {j for j, m in enumerate(members) if m.role == SIDECAR and j < index}
        assert not running & set(refs)
        assert sum(shared.own[j] for j in refs) + shared.extra >= members[index].count


def test_a_layout_past_32_devices_is_not_built() -> None:
    assert layout([Member(INIT, 8), *[Member(APP, 8)] * 5]) is None
