"""Which strings Go's `url.ParseRequestURI` refuses, and with which message.

Kubernetes' `url()`, `isURL()` and `format.uri()` all ask Go's parser, and `format.uri()`
hands its error text to the user, so the checks and messages follow net/url's request-URI
path: control bytes, an optional scheme, no fragment splitting, the authority (userinfo,
host characters, port) only after a scheme, and well-formed percent escapes.
"""

from __future__ import annotations

import re

_HEX = frozenset("0123456789abcdefABCDEF")
_HOST_SAFE = frozenset("!$&'()*+,;=:[]<>\"-_.~")
_USERINFO_SAFE = frozenset("-._:~!$&'()*+,;=%@")
_PORT = re.compile(r"(:[0-9]*)?")


def go_quote(text: str) -> str:
    """Go's %q for the common cases: printable text kept, quotes and controls escaped."""
    escapes = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r"}
    return (
        '"'
        + "".join(escapes.get(c) or (c if c.isprintable() else f"\\x{ord(c):02x}") for c in text)
        + '"'
    )


def _scheme_and_rest(text: str) -> tuple[str, str] | str:
    """(scheme, rest), or the error; a string not starting like a scheme has none."""
    for at, char in enumerate(text):
        if char.isascii() and char.isalpha():
            continue
        if char.isascii() and (char.isdigit() or char in "+-."):
            if at == 0:
                return "", text
            continue
        if char == ":":
            return "missing protocol scheme" if at == 0 else (text[:at], text[at + 1 :])
        return "", text
    return "", text


def _unescape_error(text: str, host: bool) -> str | None:
    for at, char in enumerate(text):
        if char == "%":
            escape = text[at : at + 3]
            if len(escape) < 3 or not set(escape[1:]) <= _HEX:
                return f"invalid URL escape {go_quote(escape)}"
            if host and int(escape[1], 16) < 8 and escape != "%25":
                return f"invalid URL escape {go_quote(escape)}"
        elif host and char.isascii() and not char.isalnum() and char not in _HOST_SAFE:
            return f"invalid character {go_quote(char)} in host name"
    return None


def _host_error(host: str) -> str | None:
    if host.startswith("["):
        close = host.rfind("]")
        if close < 0:
            return "missing ']' in host"
        port = host[close + 1 :]
    else:
        colon = host.rfind(":")
        port = host[colon:] if colon >= 0 else ""
    if not _PORT.fullmatch(port):
        return f"invalid port {go_quote(port)} after host"
    return _unescape_error(host, host=True)


def _authority_error(authority: str) -> str | None:
    userinfo, at, host = authority.rpartition("@")
    error = _host_error(host)
    if error is None and at:
        if not all((c.isascii() and c.isalnum()) or c in _USERINFO_SAFE for c in userinfo):
            return "net/url: invalid userinfo"
        error = _unescape_error(userinfo, host=False)
    return error


def request_uri_error(text: str) -> str | None:
    """Why Go's ParseRequestURI refuses `text` (the part after `parse "..."`), or None."""
    if any(ord(c) < 0x20 or c == "\x7f" for c in text):
        return "net/url: invalid control character in URL"
    if not text or text == "*":
        return "empty url" if not text else None
    split = _scheme_and_rest(text)
    if isinstance(split, str):
        return split
    scheme, rest = split
    rest = rest.partition("?")[0]  # the query is kept raw, never checked
    if not rest.startswith("/"):
        return None if scheme else "invalid URI for request"
    if scheme and rest.startswith("//"):
        authority, slash, path = rest[2:].partition("/")
        error = _authority_error(authority)
        if error is not None:
            return error
        rest = slash + path
    return _unescape_error(rest, host=False)
