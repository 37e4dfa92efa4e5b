"""Deterministic, DNS-safe names for pod claims, requests and managed templates.

Names are derived only from what they stand for (class, count, selectors; container), so the
same input always gives the same name: that makes the rewrite idempotent, lets templates be
shared by every Pod that needs the same devices, and keeps `git diff` of a migration stable.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from typing import Any

DNS_LABEL_MAX = 63
TEMPLATE_PREFIX = "dragate"
_INVALID = re.compile(r"[^a-z0-9-]+")


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"))
"""`json.dumps` with these options builds an encoder per call; this one is built once."""


def short_hash(value: Any, length: int = 8) -> str:
    """A stable hex digest of a JSON-able value (keys sorted)."""
    text = _CANONICAL.encode(value)
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def dns_label(text: str, limit: int = DNS_LABEL_MAX, *, force_hash: Any = None) -> str:
    """`text` lowercased with invalid runs as '-', truncated with a hash when too long."""
    label = _INVALID.sub("-", text.lower()).strip("-") or "x"
    if force_hash is None and len(label) <= limit:
        return label
    digest = short_hash(text if force_hash is None else [text, force_hash])
    return f"{label[: limit - len(digest) - 1].rstrip('-')}-{digest}"


def class_prefix(device_class: str) -> str:
    """`gpu.nvidia.com` -> `gpu`, `mig.nvidia.com` -> `mig`: the short word people expect."""
    return dns_label(device_class.split(".", maxsplit=1)[0], 20)


def request_name(device_class: str, suffix: str) -> str:
    """`gpu` for `nvidia.com/gpu`, `mig-1g-10gb` for `nvidia.com/mig-1g.10gb`."""
    prefix = class_prefix(device_class)
    return dns_label(f"{prefix}-{suffix}" if suffix else prefix)


class UniqueNames:
    """Hands out names unique within one Pod (claims) or one claim (requests).

    `take("gpu-main")` gives `gpu-main`, then `gpu-main-2`, `gpu-main-3`, ... Each base
    remembers where its numbering stopped, so a Pod with thousands of same-named containers
    costs linear time, not a rescan per container.
    """

    def __init__(self, taken: Iterable[str] = ()) -> None:
        self._used = set(taken)
        self._next: dict[str, int] = {}

    def take(self, base: str) -> str:
        name, n = base, self._next.get(base, 2)
        while name in self._used:
            name = dns_label(f"{base}-{n}")
            n += 1
        self._next[base] = n
        self._used.add(name)
        return name


def template_name(requests: Sequence[dict[str, Any]], *, named: bool = False) -> str:
    """`dragate-gpu-nvidia-com-2`; a hash of the requests is added when there are selectors
    or when containers refer to the requests by name (`named`)."""
    parts = [_request_words(r) for r in requests]
    readable = "-".join([TEMPLATE_PREFIX, *parts])
    has_selectors = any(r["exactly"].get("selectors") for r in requests)
    return dns_label(readable, force_hash=requests if has_selectors or named else None)


def _request_words(request: dict[str, Any]) -> str:
    exactly = request["exactly"]
    cls = exactly["deviceClassName"].replace(".", "-")
    prefix = class_prefix(exactly["deviceClassName"])
    name = request["name"]
    suffix = name[len(prefix) + 1 :] if name.startswith(prefix + "-") else ""
    return "-".join(p for p in (cls, suffix, str(exactly.get("count", 1))) if p)
