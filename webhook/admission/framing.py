"""Where an HTTP/1.1 request ends, decided from its bytes as they arrive, without a thread.

The worker's event loop (slowclients.py) feeds every byte of a request here and hands the
connection to a review thread only once the whole request is buffered: headers and body, by
Content-Length or by chunked framing alike. A request whose framing is wrong or whose body
is over the limit is refused here, with the status and message the loop answers in JSON, so
no thread ever waits on a client or reads a body it will refuse.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum
from http import HTTPStatus

HEADER_LIMIT = 64 * 1024
CHUNK_LINE_LIMIT = 1024  # a chunk-size line (hex size and extensions)
HEX_DIGITS = b"0123456789abcdefABCDEF"
_ENCODER = json.JSONEncoder(ensure_ascii=True, sort_keys=True, separators=(",", ":"))


class Progress(Enum):
    MORE = "more"  # keep reading
    WHOLE = "whole"  # a thread can take it: nothing left to wait for
    REFUSED = "refused"  # answer `RequestReader.refusal` and close


@dataclass(frozen=True)
class Refusal:
    """An HTTP error the event loop answers itself; `drain` bytes may still be on their way."""

    code: int
    message: str
    drain: int = 0


class FramingError(ValueError):
    """Bytes that are not a well-framed HTTP/1.1 request body."""


class ChunkedBody:
    """The chunked framing of a body, parsed incrementally; `end` once the last chunk and
    the trailers have arrived. Only offsets are kept: the bytes stay in the request buffer."""

    def __init__(self, start: int, max_body: int) -> None:
        self.pos = start  # where parsing resumes
        self.size = 0  # decoded body bytes so far
        self.end: int | None = None
        self._max_body = max_body
        self._data_left = -1  # bytes of chunk data (+2 for its CRLF) still expected
        self._trailers = False

    def advance(self, data: bytearray) -> None:
        """Parse what has arrived; FramingError on bad framing or a body over the limit."""
        while self.end is None:
            if self._data_left >= 0:
                if not self._skip_data(data):
                    return
            elif not self._line(data):
                return

    def _skip_data(self, data: bytearray) -> bool:
        if len(data) - self.pos < self._data_left:
            return False
        self.pos += self._data_left
        if data[self.pos - 2 : self.pos] != b"\r\n":
            raise FramingError("chunk data not followed by CRLF")
        self._data_left = -1
        return True

    def _line(self, data: bytearray) -> bool:
        found = data.find(b"\r\n", self.pos)
        limit = HEADER_LIMIT if self._trailers else CHUNK_LINE_LIMIT
        if found < 0:
            if len(data) - self.pos > limit:
                raise FramingError("chunk-size or trailer line too long")
            return False
        line, self.pos = bytes(data[self.pos : found]), found + 2
        if self._trailers:
            self.end = self.pos if not line else None
        else:
            self._chunk_size(line)
        return True

    def _chunk_size(self, line: bytes) -> None:
        digits = line.partition(b";")[0].strip()
        if not digits or len(digits) > 16 or digits.strip(HEX_DIGITS):
            raise FramingError(f"invalid chunk size {digits[:20]!r}")
        size = int(digits, 16)
        self.size += size
        if self.size > self._max_body:
            raise FramingError(f"body exceeds the {self._max_body}-byte limit")
        if size == 0:
            self._trailers = True
        else:
            self._data_left = size + 2


class RequestReader:
    """The bytes of one request as they arrive, and whether a thread can take them yet."""

    def __init__(self, max_body: int) -> None:
        self.data = bytearray()
        self.max_body = max_body
        self.refusal: Refusal | None = None
        self.expects_continue = False
        self.headers_done = False
        self.path: list[bytes] = []  # the request target, once the headers ended
        self._wanted: int | None = None  # total bytes, when the body has a Content-Length
        self._chunked: ChunkedBody | None = None
        self._scanned = 0  # where the search for the end of the headers resumes

    def feed(self, chunk: bytes) -> Progress:
        self.data += chunk
        if not self.headers_done:
            self._find_headers()
        return self.progress

    @property
    def progress(self) -> Progress:
        if self.refusal is not None:
            return Progress.REFUSED
        if self._chunked is not None:
            return self._chunked_progress()
        if self._wanted is None:
            return Progress.MORE
        return Progress.WHOLE if len(self.data) >= self._wanted else Progress.MORE

    @property
    def end(self) -> int:
        """Where this request ends in `data` once WHOLE; bytes after it are a pipelined next
        request, which the event loop reads on its own (no thread waits for its rest)."""
        if self._chunked is not None and self._chunked.end is not None:
            return self._chunked.end
        return self._wanted if self._wanted is not None else len(self.data)

    def _chunked_progress(self) -> Progress:
        assert self._chunked is not None
        try:
            self._chunked.advance(self.data)
        except FramingError as err:
            self.refusal = Refusal(400, str(err), drain=4 * self.max_body)
            return Progress.REFUSED
        return Progress.MORE if self._chunked.end is None else Progress.WHOLE

    def _find_headers(self) -> None:
        end = self.data.find(b"\r\n\r\n", max(0, self._scanned - 3))
        if end < 0:
            self._scanned = len(self.data)
            if len(self.data) > HEADER_LIMIT:
                self.refusal = Refusal(431, f"request headers exceed {HEADER_LIMIT} bytes")
            return
        self.headers_done = True
        self.path = bytes(self.data[: self.data.find(b"\r\n")]).split(b" ")[1:2]
        fields = _header_fields(bytes(self.data[:end]))
        try:
            self._frame_body(fields, end + 4)
        except FramingError as err:
            self.refusal = Refusal(400, str(err))

    def _frame_body(self, fields: list[tuple[bytes, bytes]], body_start: int) -> None:
        lengths = [v for n, v in fields if n == b"content-length"]
        codings = [v for n, v in fields if n == b"transfer-encoding"]
        self.expects_continue = any(
            n == b"expect" and v.lower() == b"100-continue" for n, v in fields
        )
        if lengths and codings:
            raise FramingError("both Content-Length and Transfer-Encoding")
        if codings:
            self._frame_chunked(codings, body_start)
        else:
            self._wanted = body_start + self._content_length(lengths)

    def _frame_chunked(self, codings: list[bytes], body_start: int) -> None:
        coding = b",".join(codings).split(b",")
        if [c.strip().lower() for c in coding] != [b"chunked"]:
            self.refusal = Refusal(501, "only Transfer-Encoding: chunked is supported")
            return
        self._chunked = ChunkedBody(body_start, self.max_body)

    def _content_length(self, lengths: list[bytes]) -> int:
        if not lengths:
            return 0
        if len(set(lengths)) > 1 or not lengths[0].isdigit() or len(lengths[0]) > 19:
            raise FramingError(f"invalid Content-Length {lengths[0][:20]!r}")
        length = int(lengths[0])
        if length > self.max_body:
            drain = length if length <= 4 * self.max_body else 0
            self.refusal = Refusal(
                400, f"body of {length} bytes exceeds the {self.max_body}-byte limit", drain
            )
        return length


def _header_fields(head: bytes) -> list[tuple[bytes, bytes]]:
    lines = head.split(b"\r\n")[1:]  # after the request line
    return [(n.strip().lower(), v.strip()) for n, _, v in (x.partition(b":") for x in lines)]


def error_response(code: int, message: str) -> bytes:
    """A whole HTTP/1.1 error reply with a JSON body shaped as the app's (`{code, message}`,
    sorted, compact): what a client gets for framing problems the app never saw."""
    body = (_ENCODER.encode({"code": code, "message": message}) + "\n").encode("ascii")
    reason = HTTPStatus(code).phrase.upper()
    head = (
        f"HTTP/1.1 {code} {reason}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode("ascii") + body
