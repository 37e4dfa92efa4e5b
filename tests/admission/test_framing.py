"""Where a request ends, chunk by chunk: when the event loop may hand it to a thread, and what
it refuses itself. The server-level proof (hostile clients do not starve reviews) is in
tests/reliability/test_slow_clients.py and test_attacks.py.
"""

from __future__ import annotations

import json

import pytest

from webhook.admission.framing import HEADER_LIMIT, Progress, RequestReader, error_response

LIMIT = 1000
POST = b"POST /validate?timeout=10s HTTP/1.1\r\nHost: dragate\r\n"
CHUNKED = POST + b"Transfer-Encoding: chunked\r\n\r\n"
MORE, WHOLE, REFUSED = Progress.MORE, Progress.WHOLE, Progress.REFUSED

CASES = {
    # id: (chunks as they arrive, progress after the last one, refusal code or None)
    "headers-not-ended": ([POST], MORE, None),
    "get-without-body": ([b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"], WHOLE, None),
    "body-half-there": ([POST + b"Content-Length: 10\r\n\r\n12345"], MORE, None),
    "body-all-there": ([POST + b"Content-Length: 10\r\n\r\n12345", b"67890"], WHOLE, None),
    "header-end-split-across-chunks": ([POST + b"Content-Length: 2\r\n\r", b"\n{}"], WHOLE, None),
    "field-names-any-case": ([POST + b"CONTENT-LENGTH:  3 \r\n\r\n{}"], MORE, None),
    "body-at-the-limit": ([POST + b"Content-Length: 1000\r\n\r\n", b" " * LIMIT], WHOLE, None),
    "declared-over-the-limit": ([POST + b"Content-Length: 1001\r\n\r\n"], REFUSED, 400),
    "declared-a-terabyte": ([POST + b"Content-Length: 1000000000000\r\n\r\n"], REFUSED, 400),
    "bad-content-length": ([POST + b"Content-Length: ten\r\n\r\n"], REFUSED, 400),
    "negative-content-length": ([POST + b"Content-Length: -1\r\n\r\n"], REFUSED, 400),
    "two-content-lengths": (
        [POST + b"Content-Length: 1\r\nContent-Length: 2\r\n\r\n"],
        REFUSED,
        400,
    ),
    "length-and-chunked": (
        [POST + b"Content-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n"],
        REFUSED,
        400,
    ),
    "other-transfer-coding": ([POST + b"Transfer-Encoding: gzip, chunked\r\n\r\n"], REFUSED, 501),
    "headers-past-the-limit": ([POST + b"X: " + b"a" * HEADER_LIMIT], REFUSED, 431),
    "expect-100-continue": (
        [POST + b"Expect: 100-continue\r\nContent-Length: 9\r\n\r\n"],
        MORE,
        None,
    ),
    "chunked-no-body-yet": ([CHUNKED], MORE, None),
    "chunked-whole": ([CHUNKED + b"2\r\n{}\r\n0\r\n\r\n"], WHOLE, None),
    "chunked-byte-by-byte": (
        [CHUNKED, *(bytes([b]) for b in b"2;x=y\r\n{}\r\n0\r\n\r\n")],
        WHOLE,
        None,
    ),
    "chunked-with-trailers": ([CHUNKED + b"1\r\n{\r\n1\r\n}\r\n0\r\nX-T: 1\r\n\r\n"], WHOLE, None),
    "chunked-last-chunk-no-trailer-end": ([CHUNKED + b"2\r\n{}\r\n0\r\n"], MORE, None),
    "chunked-over-the-limit": ([CHUNKED + b"3e8\r\n" + b" " * 1000 + b"\r\n1\r\n"], REFUSED, 400),
    "chunked-huge-size-line": ([CHUNKED + b"ffffffffffff\r\n"], REFUSED, 400),
    "chunked-bad-size": ([CHUNKED + b"zz\r\n"], REFUSED, 400),
    "chunked-data-without-crlf": ([CHUNKED + b"2\r\n{}XX0\r\n\r\n"], REFUSED, 400),
    "chunked-endless-size-line": ([CHUNKED + b"1" + b";" * 2000], REFUSED, 400),
}


@pytest.mark.parametrize(("chunks", "progress", "code"), CASES.values(), ids=CASES.keys())
def test_request_reader(chunks: list[bytes], progress: Progress, code: int | None) -> None:
    reader = RequestReader(LIMIT)
    results = [reader.feed(chunk) for chunk in chunks]
    assert results[-1] is progress
    assert (reader.refusal.code if reader.refusal else None) == code
    assert bytes(reader.data) == b"".join(chunks)


def test_error_response_is_json_with_connection_close() -> None:
    raw = error_response(400, "body of 2 bytes exceeds the 1-byte limit")
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 BAD REQUEST\r\n")
    assert b"Content-Type: application/json" in head and b"Connection: close" in head
    assert int(head.split(b"Content-Length: ")[1].split(b"\r\n")[0]) == len(body)
    assert json.loads(body) == {"code": 400, "message": "body of 2 bytes exceeds the 1-byte limit"}
