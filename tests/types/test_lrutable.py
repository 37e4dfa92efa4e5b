"""The rewriter's bounded, thread-safe memo table."""

from __future__ import annotations

import threading

import pytest

from webhook.types.lrutable import LruTable


def test_the_least_recently_used_entry_goes_first() -> None:
    table: LruTable[str, int] = LruTable(2)
    table.put("a", 1)
    table.put("b", 2)
    assert table.get("a") == 1  # a use: "b" is now the oldest
    table.put("c", 3)
    assert (table.get("a"), table.get("b"), table.get("c")) == (1, None, 3)
    assert len(table) == 2


def test_storing_a_key_again_replaces_its_value() -> None:
    table: LruTable[str, int] = LruTable(2)
    table.put("a", 1)
    table.put("a", 2)
    assert table.get("a") == 2 and len(table) == 1


def test_clear_forgets_everything() -> None:
    table: LruTable[str, int] = LruTable(3)
    table.put("a", 1)
    table.clear()
    assert table.get("a") is None and len(table) == 0


def test_a_table_holds_at_least_one_entry() -> None:
    with pytest.raises(ValueError, match="at least one"):
        LruTable(0)


def test_threads_never_see_a_wrong_value_nor_grow_it_past_its_size() -> None:
    table: LruTable[int, str] = LruTable(16)
    failures: list[int] = []

    def work(offset: int) -> None:
        for n in range(2000):
            key = (n * 7 + offset) % 64
            found = table.get(key)
            if found is not None and found != f"v{key}":
                failures.append(key)
            table.put(key, f"v{key}")
            if len(table) > 16:
                failures.append(-1)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures and len(table) == 16
