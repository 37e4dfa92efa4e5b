"""The rewrite as a JSON patch (RFC 6902), in time linear in the size of the object.

A general list diff (jsonpatch's) looks for moved items and costs quadratic time: a Pod with
4,000 containers took seconds. The rewrite never reorders anything, so lists of equal length are
compared item by item and a list whose length changed is replaced whole. A member equal on
both sides (one comparison in C) is not descended into: most of a rewritten Pod is unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

Operation = dict[str, Any]


def make_patch(old: Any, new: Any) -> list[Operation]:
    """Operations that turn `old` into `new`."""
    return list(_diff(old, new, ""))


def _diff(old: Any, new: Any, path: str) -> Iterator[Operation]:
    if type(old) is not type(new):
        yield {"op": "replace", "path": path, "value": new}
    elif isinstance(old, dict):
        yield from _diff_dicts(old, new, path)
    elif isinstance(old, list):
        if len(old) != len(new):
            yield {"op": "replace", "path": path, "value": new}
            return
        for index, (before, after) in enumerate(zip(old, new, strict=True)):
            yield from _diff(before, after, f"{path}/{index}")
    elif old != new:
        yield {"op": "replace", "path": path, "value": new}


def _diff_dicts(old: dict[str, Any], new: dict[str, Any], path: str) -> Iterator[Operation]:
    for key in old:
        if key not in new:
            yield {"op": "remove", "path": f"{path}/{_escape(key)}"}
    for key, value in new.items():
        if key not in old:
            yield {"op": "add", "path": f"{path}/{_escape(key)}", "value": value}
        elif old[key] != value or type(old[key]) is not type(value):
            yield from _diff(old[key], value, f"{path}/{_escape(key)}")


def _escape(key: Any) -> str:
    """A JSON pointer token: `~` and `/` escaped (annotation keys have slashes)."""
    return str(key).replace("~", "~0").replace("/", "~1")
