"""The write epoch: one counter for every process and thread using a ledger file.

Checked against what it promises readers: two views of one file agree, a bump in another
process is seen, and a file deleted and made again never yields an epoch equal to one read
before it, so no remembered rows can outlive the file they were checked against.
"""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

import pytest

from webhook.ledger.epoch import FOLLOW_SECONDS, SIZE, WriteEpoch, after
from webhook.types import FactsUnavailable


def _bump_in_another_process(path: str) -> None:
    WriteEpoch(path).bump()


def test_two_views_of_one_file_share_the_counter(tmp_path: Path) -> None:
    path = str(tmp_path / "ledger.epoch")
    first, second = WriteEpoch(path), WriteEpoch(path)
    start = first.current()
    assert second.current() == start == first.current()
    assert first.bump() == after(start) == second.current()


def test_a_bump_in_another_process_is_seen(tmp_path: Path) -> None:
    path = str(tmp_path / "ledger.epoch")
    epoch = WriteEpoch(path)
    start = epoch.current()
    process = multiprocessing.get_context("spawn").Process(
        target=_bump_in_another_process, args=(path,)
    )
    process.start()
    process.join(60)
    assert process.exitcode == 0
    assert epoch.current() == after(start)


def test_a_file_made_again_never_repeats_an_earlier_epoch(tmp_path: Path) -> None:
    """Each view looks the path up again once FOLLOW_SECONDS have passed, not before."""
    path, now = str(tmp_path / "ledger.epoch"), [0.0]
    epoch, other = WriteEpoch(path, lambda: now[0]), WriteEpoch(path, lambda: now[0])
    seen = {epoch.current(), epoch.bump()}
    os.unlink(path)
    assert other.current() in seen  # within the window: still the file it maps
    now[0] += FOLLOW_SECONDS
    fresh = other.current()  # follows: makes the file again, its count back at 0
    assert fresh not in seen and fresh[2] == 0 and os.path.getsize(path) == SIZE
    assert epoch.current() == fresh  # the first view follows the new file too
    assert other.bump() == epoch.current() == after(fresh)


@pytest.mark.parametrize(("size", "count"), [(0, 0), (3, 7), (SIZE, 7)],
                         ids=["empty", "short", "full"])  # fmt: skip
def test_a_short_file_is_extended_and_a_full_one_kept(
    tmp_path: Path, size: int, count: int
) -> None:
    """The first bytes of a count 7 (little-endian, as x86 and arm64 store it)."""
    path = tmp_path / "ledger.epoch"
    path.write_bytes((7).to_bytes(SIZE, "little")[:size])
    assert WriteEpoch(str(path)).current()[2] == count and path.stat().st_size == SIZE


def test_an_unusable_place_is_unavailable(tmp_path: Path) -> None:
    with pytest.raises(FactsUnavailable, match="ledger epoch"):
        WriteEpoch(str(tmp_path / "missing-dir" / "ledger.epoch"))
