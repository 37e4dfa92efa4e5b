"""The Kubernetes minors dragate targets, owned here so every layer agrees on them.

A target minor picks the pinned OpenAPI schemas rule variables are typed with
(`schemas-<minor>.json` in `webhook/defaults/kube/`). A person names it (`--kube-version`), or a
cluster does (`/version`); a cluster outside the range is served as its nearest minor.
"""

from __future__ import annotations

import re

from webhook.types.basics import DragateError

SUPPORTED = ("1.35", "1.36", "1.37")
NEWEST = SUPPORTED[-1]
_VERSION = re.compile(r"v?(\d+)\.(\d+)(?:\.\d+)?(?:[-+].*)?")


class UnsupportedKubeVersion(DragateError):
    """A named Kubernetes version dragate has no schemas for."""


def supported_minor(text: str) -> str:
    """`1.36`, `v1.36` or `v1.36.3+k3s1` as `1.36`; anything unsupported is refused."""
    found = _VERSION.fullmatch(text.strip())
    minor = f"{int(found.group(1))}.{int(found.group(2))}" if found else None
    if minor not in SUPPORTED:
        raise UnsupportedKubeVersion(
            f"Kubernetes {text.strip() or repr(text)} is not supported"
            f" (supported: {', '.join(SUPPORTED)})"
        )
    return minor


def nearest_supported(major: str, minor: str) -> str:
    """The supported minor nearest an API server's `/version` (`minor` may be `36+`); a
    version that does not read as numbers is taken as the newest."""
    digits = re.match(r"\d+", minor)
    if major.strip() != "1" or digits is None:
        return NEWEST
    wanted = int(digits.group(0))
    return min(SUPPORTED, key=lambda s: abs(int(s.split(".")[1]) - wanted))


def minor_number(minor: str) -> int:
    """`1.36` as 36, for ordering minors."""
    return int(minor.split(".")[1])
