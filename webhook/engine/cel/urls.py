"""Kubernetes' URL CEL library (k8s.io/apiserver/pkg/cel/library urls.go).

`url(s)` accepts what Go's `url.ParseRequestURI` accepts (see `request_uri`): an absolute
URL (`scheme:...`) or an absolute path (`/...`). The getters return Go's
views: `getHost` keeps the port, `getHostname` drops it and IPv6 brackets, `getQuery` maps
each key to all its values.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

import celpy.celtypes as ct

from webhook.engine.cel.errors import CelFunctionError
from webhook.engine.cel.request_uri import request_uri_error
from webhook.engine.cel.values import expect, register_value_type


class URL:
    """kubernetes.URL: the parsed text."""

    CEL_TYPE_NAME = "kubernetes.URL"
    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __eq__(self, other: object) -> bool:
        return isinstance(other, URL) and self.text == other.text

    def __hash__(self) -> int:
        return hash(self.text)

    def __str__(self) -> str:
        return self.text


register_value_type(URL)


def parse_url(value: Any) -> URL:
    text = str(expect(value, ct.StringType, "url"))
    error = request_uri_error(text)
    if error is not None:
        raise CelFunctionError(f"URL parse error during conversion from string: {error}")
    return URL(text)


def _parts(value: Any) -> Any:
    return urlsplit(expect(value, URL, "url method").text)


def _host(value: Any) -> str:
    return str(_parts(value).netloc.rpartition("@")[2])


def _hostname(value: Any) -> str:
    host = _host(value)
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host[1:]
    return host.partition(":")[0]


def _port(value: Any) -> str:
    host = _host(value)
    tail = host[host.find("]") + 1 :] if host.startswith("[") else host
    return tail.partition(":")[2]


_ESCAPED_PATH_CHARS = frozenset("-._~$&+,/:;=@!'()*[]%")
_PATH_SAFE = "/$&+,:;=@-._~"


def _escaped_path(value: Any) -> str:
    """Go's EscapedPath: the path as written when it is validly escaped, else re-escaped."""
    raw = str(_parts(value).path)
    if all((c.isascii() and c.isalnum()) or c in _ESCAPED_PATH_CHARS for c in raw):
        return raw
    return quote(unquote(raw), safe=_PATH_SAFE)


def _query(value: Any) -> ct.MapType:
    pairs = parse_qs(_parts(value).query, keep_blank_values=True)
    return ct.MapType(
        {ct.StringType(k): ct.ListType([ct.StringType(v) for v in vs]) for k, vs in pairs.items()}
    )


def is_url(value: Any) -> ct.BoolType:
    return ct.BoolType(request_uri_error(str(expect(value, ct.StringType, "isURL"))) is None)


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "url": parse_url,
    "isURL": is_url,
    "getScheme": lambda v: ct.StringType(_parts(v).scheme),
    "getHost": lambda v: ct.StringType(_host(v)),
    "getHostname": lambda v: ct.StringType(_hostname(v)),
    "getPort": lambda v: ct.StringType(_port(v)),
    "getEscapedPath": lambda v: ct.StringType(_escaped_path(v)),
    "getQuery": _query,
}
