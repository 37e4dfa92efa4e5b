"""HeldMemo: an answer is found only with the very objects it was stored with."""

from __future__ import annotations

import pytest

from webhook.engine.heldmemo import HeldMemo

A, B = {"same": "content"}, {"same": "content"}  # equal, but not the same objects


@pytest.mark.parametrize(
    ("key", "held", "found"),
    [
        ("k", (A,), "answer"),
        ("k", (B,), None),  # equal is not enough
        ("k", (), None),
        ("k", (A, A), None),
        ("other", (A,), None),
    ],
    ids=["the same objects", "equal objects", "fewer", "more", "another key"],
)
def test_an_answer_needs_the_key_and_the_same_objects(
    key: str, held: tuple[object, ...], found: str | None
) -> None:
    memo: HeldMemo[str] = HeldMemo()
    memo.put("k", (A,), "answer")
    assert memo.get(key, held) == found


def test_past_its_bound_the_table_starts_over() -> None:
    memo: HeldMemo[int] = HeldMemo(max_entries=2)
    for i in range(3):
        memo.put(i, (A,), i)
    assert len(memo) == 1 and memo.get(2, (A,)) == 2 and memo.get(0, (A,)) is None


def test_an_answer_of_another_epoch_empties_the_table_first() -> None:
    """What every entry shares (the policy set, the inventory) is kept alive once, not per
    entry: an answer stored with other shared objects starts the table over."""
    memo: HeldMemo[str] = HeldMemo(epoch=1)
    memo.put("x", (A, "x"), "old x")
    memo.put("y", (A, "y"), "old y")
    assert len(memo) == 2
    memo.put("x", (B, "x"), "new x")
    assert len(memo) == 1 and memo.get("y", (A, "y")) is None
    assert memo.get("x", (B, "x")) == "new x"
