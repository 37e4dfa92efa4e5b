"""A request the event loop already buffered whole, answered through the WSGI app directly.

The loop (slowclients.py, framing.py) has read and framed every byte of a review before it is
answered; gunicorn's `handle` then parses the same bytes again with its Python parser, builds
its environ and a Response object around the app, a large share of a small review's CPU
(docs/benchmarks.md). Here the buffered bytes become the WSGI environ in one pass and the
app's answer one write.

Only the requests the API server sends take this way: `POST <origin-form> HTTP/1.1` with a
Content-Length body, token header names without underscores, printable values, within
gunicorn's own limits, no `Expect`, `Upgrade` or `Transfer-Encoding` headers and no
`Connection` other than `keep-alive` (HTTP/1.1's default, which `requests` sends).
Anything else (`parse` returns None) is left to gunicorn, which answers or refuses it as it does
any request, so nothing gunicorn refuses is accepted here (tests/fuzz/test_fuzz_buffered.py
holds every environ built here to gunicorn's own).

Relies on (checked with gunicorn 27.0.1; canaries: tests/canary/test_gunicorn.py):
- `gunicorn.SERVER_SOFTWARE`: the environ's SERVER_SOFTWARE, as gunicorn sets it.
"""

from __future__ import annotations

import functools
import re
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from email.utils import formatdate
from io import BytesIO
from typing import Any
from urllib.parse import unquote_to_bytes

from gunicorn import SERVER_SOFTWARE

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
_TOKEN = re.compile(rb"[!#$%&'*+\-.^`|~0-9A-Za-z]+\Z")
_VALUE = re.compile(rb"[\t\x20-\x7e\x80-\xff]*\Z")
_TARGET = re.compile(rb"/[\x21\x22\x24-\x7e]*\Z")  # no fragment (#)
_LEFT_TO_GUNICORN = frozenset({b"expect", b"upgrade", b"transfer-encoding"})
_SET_BY_SERVER = frozenset({"content-length", "connection", "date", "transfer-encoding"})


@dataclass(frozen=True)
class Limits:
    """gunicorn's request limits (`limit_request_line`, `_fields`, `_field_size`; 0: none)."""

    line: int
    fields: int
    field_size: int

    @classmethod
    def of(cls, cfg: Any) -> Limits:
        """The limits a gunicorn Config applies, so nothing it refuses is taken here."""
        return cls(cfg.limit_request_line, cfg.limit_request_fields, cfg.limit_request_field_size)


@dataclass(frozen=True)
class BufferedRequest:
    """A POST the loop buffered: its target, header fields (lower-case names) and body."""

    target: str
    fields: tuple[tuple[bytes, bytes], ...]
    body: bytes


def parse(data: bytes, limits: Limits) -> BufferedRequest | None:
    """The request in `data` (one whole request, as framing.py ended it), or None when it is
    not one this module answers."""
    head_end = data.find(b"\r\n\r\n")
    if head_end < 0:
        return None
    line, *lines = data[:head_end].split(b"\r\n")
    method, _, rest = line.partition(b" ")
    target, _, version = rest.partition(b" ")
    if method != b"POST" or version != b"HTTP/1.1" or not _TARGET.match(target):
        return None
    if _over(len(line), limits.line) or _over(len(lines), limits.fields):
        return None
    fields = _fields(lines, limits.field_size)
    if fields is None:
        return None
    body = data[head_end + 4 :]
    if [v for n, v in fields if n == b"content-length"] != [str(len(body)).encode()]:
        return None
    return BufferedRequest(target.decode("latin-1"), fields, body)


def _over(size: int, limit: int) -> bool:
    return 0 < limit < size


def _fields(lines: list[bytes], field_size: int) -> tuple[tuple[bytes, bytes], ...] | None:
    fields = []
    for line in lines:
        name, colon, value = line.partition(b":")
        lower = name.lower()
        if not colon or _over(len(line), field_size) or not _TOKEN.match(name):
            return None
        value = value.strip(b" \t")
        if lower in _LEFT_TO_GUNICORN or not _VALUE.match(value):
            return None
        if lower == b"connection" and value.lower() != b"keep-alive":
            return None
        fields.append((lower, value))
    return tuple(fields)


def environ(
    request: BufferedRequest, sock: Any, client: Any, server: Any, *, multiprocess: bool
) -> dict[str, Any]:
    """The PEP 3333 environ gunicorn's threads build for `request` on a TLS connection."""
    path, _, query = request.target.partition("?")
    if "%" in path:
        path = unquote_to_bytes(path).decode("latin-1")
    env: dict[str, Any] = {
        "REQUEST_METHOD": "POST",
        "SCRIPT_NAME": "",
        "PATH_INFO": path,
        "QUERY_STRING": query,
        "RAW_URI": request.target,
        "SERVER_PROTOCOL": "HTTP/1.1",
        "SERVER_SOFTWARE": SERVER_SOFTWARE,
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": "https",
        "wsgi.input": BytesIO(request.body),
        "wsgi.input_terminated": True,
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": True,
        "wsgi.multiprocess": multiprocess,
        "wsgi.run_once": False,
        "gunicorn.socket": sock,
    }
    _add_headers(env, request.fields)
    _add_addresses(env, client, server)
    return env


def _add_headers(env: dict[str, Any], fields: tuple[tuple[bytes, bytes], ...]) -> None:
    for name, raw in fields:
        value = raw.decode("latin-1")
        if name == b"content-type":
            env["CONTENT_TYPE"] = value
        elif name == b"content-length":
            env["CONTENT_LENGTH"] = value
        else:
            key = "HTTP_" + name.decode("ascii").upper().replace("-", "_")
            env[key] = f"{env[key]},{value}" if key in env else value


def _add_addresses(env: dict[str, Any], client: Any, server: Any) -> None:
    if isinstance(client, tuple):
        env["REMOTE_ADDR"], env["REMOTE_PORT"] = client[0], str(client[1])
    else:
        env["REMOTE_ADDR"] = str(client)
    if isinstance(server, tuple):
        env["SERVER_NAME"], env["SERVER_PORT"] = str(server[0]), str(server[1])
    else:
        env["SERVER_NAME"], env["SERVER_PORT"] = str(server), "443"


@dataclass
class Answer:
    """The whole HTTP response to send, and the app's `close` to call once it is sent."""

    data: bytes
    close: Callable[[], None]


def respond(app: WsgiApp, env: dict[str, Any], *, keep_alive: bool) -> Answer:
    """Call the app; its status, headers and body as one HTTP/1.1 response. The server sets
    Content-Length, Date and Connection itself. What the app raises propagates (nothing has
    been written)."""
    started: list[tuple[str, list[tuple[str, str]]]] = []
    written: list[bytes] = []

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        if started and exc_info is None:
            raise AssertionError("start_response called twice without exc_info")
        started[:] = [(status, headers)]
        return written.append

    result = app(env, start_response)
    try:
        body = b"".join([*written, *result])
        if not started:
            raise AssertionError("the app returned without calling start_response")
        status, headers = started[0]
        head = _head(status, headers, len(body), keep_alive)
    except BaseException:
        _close(result)
        raise
    return Answer(head + body, lambda: _close(result))


def _head(status: str, headers: list[tuple[str, str]], length: int, keep_alive: bool) -> bytes:
    lines = [f"HTTP/1.1 {status}"]
    for name, value in headers:
        if "\r" in name or "\n" in name or "\r" in value or "\n" in value:
            raise ValueError(f"invalid response header {name!r}")
        if name.lower() not in _SET_BY_SERVER:
            lines.append(f"{name}: {value}")
    lines.append(f"Content-Length: {length}")
    lines.append(f"Date: {http_date()}")
    if not keep_alive:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _close(result: Iterable[bytes]) -> None:
    close = getattr(result, "close", None)
    if close is not None:
        close()


def http_date() -> str:
    """The Date header's value (RFC 9110 IMF-fixdate), formatted once a second."""
    return _imf_date(int(time.time()))


@functools.lru_cache(maxsize=2)
def _imf_date(second: int) -> str:
    return formatdate(second, usegmt=True)
