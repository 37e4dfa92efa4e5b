"""Informer pieces the real API server cannot be made to exercise on demand.

Chunk boundaries in a watch stream are the network's choice, and backoff timing is ours;
both are tested here at our own adapter boundary (the urllib3 response we read from).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import urllib3

from webhook.sources.informer import Backoff, Unreachable, WatchStream


class Response:
    """The part of urllib3's HTTPResponse that WatchStream uses."""

    def __init__(self, chunks: list[bytes], error: Exception | None = None) -> None:
        self.chunks, self.error = chunks, error
        self.released = False

    def stream(self, decode_content: bool = True) -> Iterator[bytes]:
        yield from self.chunks
        if self.error is not None:
            raise self.error

    def release_conn(self) -> None:
        self.released = True

    def shutdown(self) -> None:
        pass


def test_events_split_across_chunks_are_joined() -> None:
    response = Response([b'{"type": "ADD', b'ED", "object": {}}\n{"type":', b' "DELETED"}\n\n'])
    events = list(WatchStream(response, "/x"))
    assert [e["type"] for e in events] == ["ADDED", "DELETED"]
    assert response.released


def test_a_dropped_connection_is_unreachable_unless_we_closed_it() -> None:
    dropped = Response([b'{"type": "ADDED"}\n'], urllib3.exceptions.ProtocolError("reset"))
    with pytest.raises(Unreachable, match="reset"):
        list(WatchStream(dropped, "/x"))
    closed = WatchStream(Response([], urllib3.exceptions.ProtocolError("reset")), "/x")
    closed.close()
    assert list(closed) == []


def test_backoff_doubles_to_a_ceiling_and_resets() -> None:
    backoff = Backoff(first=1.0, ceiling=4.0)
    delays = [backoff.next() for _ in range(5)]
    assert [0.5 <= d <= 1.0 for d in delays[:1]] == [True]
    assert all(d <= 4.0 for d in delays) and delays[-1] >= 2.0
    backoff.reset()
    assert backoff.next() <= 1.0
