"""The remembered process id is the kernel's, in the parent and in a forked child."""

from __future__ import annotations

import multiprocessing
import os

from webhook.types import processid


def _child_reports(queue: multiprocessing.Queue[tuple[int, int]]) -> None:
    queue.put((processid.current(), os.getpid()))


def test_the_id_is_taken_again_in_a_forked_child() -> None:
    assert processid.current() == os.getpid()
    context = multiprocessing.get_context("fork")
    queue: multiprocessing.Queue[tuple[int, int]] = context.Queue()
    child = context.Process(target=_child_reports, args=(queue,))
    child.start()
    remembered, actual = queue.get(timeout=60)
    child.join(60)
    assert remembered == actual != os.getpid()
