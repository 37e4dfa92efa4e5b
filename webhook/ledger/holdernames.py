"""A holder's name in stored records: a zero-device entry `@<namespace>/<name>`.

A Pod's holders are keyed by its uid (what the claims generated for it refer to), so the name
a person knows it by is stored beside its devices. It is stored *among* them, as an entry
that holds nothing: a DeviceClass name never starts with `@`, and a reader of the version
before (a replica during a rolling upgrade) reads the entry as a class holding 0 devices,
which counts for nothing, instead of refusing a field it does not know. Records stored
before names were kept have no such entry: their holders show their key.
"""

from __future__ import annotations

from collections.abc import Mapping

MARK = "@"


def with_name(devices: Mapping[str, int], name: str | None) -> dict[str, int]:
    """`devices` as stored: with the name entry when there is a name."""
    stored = dict(devices)
    if name:
        stored[MARK + name] = 0
    return stored


def split(stored: Mapping[str, int]) -> tuple[dict[str, int], str | None]:
    """The devices and the name (None when none was stored) of a stored entry set."""
    devices: dict[str, int] = {}
    name = None
    for key, count in stored.items():
        if key.startswith(MARK):
            name = key[len(MARK) :]
        else:
            devices[key] = count
    return devices, name
