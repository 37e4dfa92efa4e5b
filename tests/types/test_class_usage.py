"""`ClassUsage.held_by`: what named holders hold, answered from an index, as a walk would."""

from __future__ import annotations

import pytest

from webhook.types import ClassUsage, Holder

USAGE = ClassUsage(7, (Holder("pod:a/gpu", 2), Holder("claim:ns/x", 4), Holder("pod:b/gpu", 1)))


@pytest.mark.parametrize(("keys", "held"), [
    (set(), 0),
    ({"pod:a/gpu"}, 2),
    ({"pod:a/gpu", "claim:ns/x"}, 6),
    ({"pod:unknown/gpu"}, 0),
    ({"pod:a/gpu", "pod:b/gpu", "claim:ns/x", "other"}, 7),
], ids=["none", "one", "two", "unknown", "all-and-unknown"])  # fmt: skip
def test_held_by_is_the_walk_over_every_holder(keys: set[str], held: int) -> None:
    assert USAGE.held_by(keys) == held == sum(h.devices for h in USAGE.holders if h.key in keys)


def test_the_index_changes_neither_equality_nor_repr() -> None:
    fresh = ClassUsage(7, USAGE.holders)
    USAGE.held_by({"pod:a/gpu"})
    assert fresh == USAGE and repr(USAGE) == repr(fresh) and hash(USAGE) == hash(fresh)
