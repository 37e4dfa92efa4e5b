"""The workers' share: a lock file per tenant holding the last copy (real files, no mocks)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from webhook.ledger.batch import OutOfTime
from webhook.ledger.share import Copy, Share

COPY = Copy("uid-1", "42", "claim:a/x gpu.nvidia.com=1\n", 1234.5, 0.004)


def test_a_copy_left_in_a_turn_is_read_in_the_next(tmp_path: Path) -> None:
    share = Share(tmp_path)
    with share.turn("t", time.monotonic() + 1) as turn:
        assert turn.read() is None  # nobody left one yet
        turn.write(COPY)
    with share.turn("t", time.monotonic() + 1) as turn:
        assert turn.read() == COPY
        turn.write(Copy("uid-1", "43", "", 0.0, 0.0))  # shorter: nothing of the old is left
    with share.turn("t", time.monotonic() + 1) as turn:
        assert turn.read() == Copy("uid-1", "43", "", 0.0, 0.0)


def test_tenants_do_not_share_a_copy(tmp_path: Path) -> None:
    share = Share(tmp_path)
    with share.turn("a", time.monotonic() + 1) as turn:
        turn.write(COPY)
    with share.turn("b", time.monotonic() + 1) as turn:
        assert turn.read() is None


def test_a_turn_held_elsewhere_is_waited_for_until_the_deadline(tmp_path: Path) -> None:
    """flock is per open file: a second opener waits as another worker would."""
    share = Share(tmp_path)
    with (
        share.turn("t", time.monotonic() + 1),
        pytest.raises(OutOfTime, match="busy"),
        share.turn("t", time.monotonic() + 0.05),
    ):
        pass
    with share.turn("t", time.monotonic() + 0.05) as turn:  # released on leaving
        assert turn.read() is None


@pytest.mark.parametrize(
    "content",
    [b"", b"garbage", b"uid 42 notafloat 0.1\ntext", b"too few fields\n"],
    ids=["empty", "no-header", "bad-number", "wrong-field-count"],
)
def test_a_file_it_did_not_write_is_no_copy(tmp_path: Path, content: bytes) -> None:
    share = Share(tmp_path)
    with share.turn("t", time.monotonic() + 1):
        pass
    (only,) = tmp_path.iterdir()
    only.write_bytes(content)
    with share.turn("t", time.monotonic() + 1) as turn:
        assert turn.read() is None


def test_each_api_server_has_its_own_directory_and_none_when_unwritable(tmp_path: Path) -> None:
    one = Share.for_server("https://a:6443 ca1", tmp_path)
    other = Share.for_server("https://a:6443 ca2", tmp_path)  # same address, another cluster
    assert one is not None and other is not None and one.directory != other.directory
    blocked = tmp_path / "file"
    blocked.write_text("")
    assert Share.for_server("https://a:6443 ca1", blocked) is None
