"""A DeviceClass name the cluster does not have, worded once for lint, `check` and the webhook.

A misspelt class (`gpu.nvdia.com`) is accepted by the API server and then never allocated: the
claim waits for ever. Whoever knows the cluster's classes says so, with the closest known name.
Knowing no class at all says nothing: an empty list is no evidence that a name is wrong.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection
from dataclasses import dataclass

SUGGESTION_CUTOFF = 0.6
"""How alike a known name must be to be offered (difflib's ratio): one or two typed letters."""


@dataclass(frozen=True)
class UnknownClass:
    """`name` is no known DeviceClass; `suggestion` is the known one it most resembles."""

    name: str
    suggestion: str | None

    @property
    def what(self) -> str:
        return f"DeviceClass {self.name!r} does not exist"

    @property
    def hint(self) -> str:
        return f"did you mean {self.suggestion!r}?" if self.suggestion else ""

    def __str__(self) -> str:
        return f"{self.what} ({self.hint})" if self.hint else self.what


def unknown_class(name: str, known: Collection[str]) -> UnknownClass | None:
    """Why `name` is not one of the `known` DeviceClasses; None when it is one, when it is
    empty (other checks report a missing name), or when no class is known."""
    if not known or not name or name in known:
        return None
    close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=SUGGESTION_CUTOFF)
    return UnknownClass(name, close[0] if close else None)
