"""When the event loop may hand a connection to a thread: the request has fully arrived.

The server-level proof (stalled clients do not starve reviews) is in
tests/reliability/test_slow_clients.py; this is the arithmetic, chunk by chunk.
"""

from __future__ import annotations

import pytest

from webhook.admission.slowclients import BODY_PREREAD_LIMIT, HEADER_LIMIT, RequestBuffer

POST = b"POST /validate?timeout=10s HTTP/1.1\r\nHost: dragate\r\n"
HUGE = POST + b"Content-Length: %d\r\n\r\n" % (BODY_PREREAD_LIMIT * 8)

CASES = {
    # id: (chunks as they arrive, complete after the last one)
    "headers-not-ended": ([POST], False),
    "get-without-body": ([b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"], True),
    "body-half-there": ([POST + b"Content-Length: 10\r\n\r\n12345"], False),
    "body-all-there": ([POST + b"Content-Length: 10\r\n\r\n12345", b"67890"], True),
    "header-end-split-across-chunks": ([POST + b"Content-Length: 2\r\n\r", b"\n{}"], True),
    "field-names-any-case": ([POST + b"CONTENT-LENGTH:  3 \r\n\r\n{}"], False),
    "chunked-body-read-by-the-thread": ([POST + b"Transfer-Encoding: chunked\r\n\r\n"], True),
    "expect-100-continue": ([POST + b"Expect: 100-continue\r\nContent-Length: 9\r\n\r\n"], True),
    "bad-content-length-for-the-parser": ([POST + b"Content-Length: ten\r\n\r\n"], True),
    "negative-content-length": ([POST + b"Content-Length: -1\r\n\r\n"], True),
    "headers-past-the-limit": ([POST + b"X: " + b"a" * HEADER_LIMIT], True),
    "huge-body-pre-read-up-to-the-bound": ([HUGE, b" " * BODY_PREREAD_LIMIT], True),
    "just-short-of-the-bound": ([HUGE, b" " * 1000], False),
}


@pytest.mark.parametrize("chunks, complete", CASES.values(), ids=CASES.keys())
def test_request_buffer_completes_when_a_thread_need_not_wait(
    chunks: list[bytes], complete: bool
) -> None:
    buffer = RequestBuffer()
    results = [buffer.feed(chunk) for chunk in chunks]
    assert results[-1] is complete and buffer.complete is complete
    assert bytes(buffer.data) == b"".join(chunks)
