"""Where waiting is forbidden (webhook/types/blocking.py): the worker loop's reviews."""

from __future__ import annotations

import threading

import pytest

from webhook.types import blocking


def test_waiting_is_allowed_outside_and_refused_inside() -> None:
    blocking.check("outside")
    with blocking.forbidden(), pytest.raises(blocking.WouldBlock, match="a ledger write"):
        blocking.check("a ledger write")
    blocking.check("after: allowed again")


def test_a_nested_forbidden_keeps_waiting_refused_until_the_outer_one_ends() -> None:
    with blocking.forbidden():
        with blocking.forbidden():
            pass
        with pytest.raises(blocking.WouldBlock):
            blocking.check("still inside the outer one")
    blocking.check("outside")


def test_other_threads_may_still_wait() -> None:
    failures: list[BaseException] = []

    def elsewhere() -> None:
        try:
            blocking.check("a pool thread's write")
        except BaseException as error:  # recorded for the assertion below
            failures.append(error)

    with blocking.forbidden():
        thread = threading.Thread(target=elsewhere)
        thread.start()
        thread.join()
    assert failures == []
