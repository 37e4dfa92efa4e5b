"""A tenant's records as one string: how a TenantUsage stores them (`spec.records`).

The API server pays for every field of a custom resource on every write: it decodes the
object into nested maps, prunes and validates each field against the CRD schema and computes
the managed fields, all in proportion to the number of fields. With one map entry per holder
a write cost grew with the holders (measured on the e2e apiserver: a PUT took 11 ms at 50
holders, 57 ms at 200 and 96-165 ms at 1,000, against 3 ms for a ConfigMap of the same
size). One string is one field whatever the holders: 3-4 ms at 1,000 holders.

One line per holder, sorted by key, fields separated by one space:

    <holder key> <class>=<devices>[,<class>=<devices>...] [<expiresAt>]

`-` stands for no devices; `expiresAt` (unix seconds, Python's shortest round-trip float
text) is present while the holder is pending. Holder keys (claim:<namespace>/<name>,
pod:<uid>/<podClaimName>) and DeviceClass names never hold spaces, `=` or `,`, so nothing
needs quoting; a key or class that would is refused rather than written ambiguously.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from webhook.ledger.accounting import Record, Records
from webhook.types import FactsUnavailable

MAX_BYTES = 1_000_000
"""The longest `spec.records` written: etcd refuses requests over 1.5 MiB, and the object
carries metadata besides. About 16,000 holders with typical names (60 bytes a line); at
least 2,700 with the longest names Kubernetes allows (a 63-character namespace and a
253-character claim name, pending: ~360 bytes a line)."""

_KEY = re.compile(r"^[^\s=,]+$")
_CLASS = re.compile(r"^[^\s=,]+$")


class Unstorable(FactsUnavailable):
    """The records cannot be written: too many holders for one object, or a bad name."""


def encode(records: Mapping[str, Record], tenant: str = "") -> str:
    """The records as lines; raises Unstorable past MAX_BYTES or for an unquotable name."""
    text = "".join(_line(key, records[key]) for key in sorted(records))
    if len(text) > MAX_BYTES:
        raise Unstorable(
            f"tenant {tenant!r}: {len(records)} holders need {len(text)} bytes, over the "
            f"TenantUsage limit of {MAX_BYTES} bytes; delete unused claims or split the tenant"
        )
    return text


def _line(key: str, record: Record) -> str:
    if not _KEY.match(key):
        raise Unstorable(f"holder key {key!r} cannot be stored (spaces, '=' or ',')")
    devices = ",".join(f"{_class(c)}={int(n)}" for c, n in sorted(record.devices.items()))
    line = f"{key} {devices or '-'}"
    if record.expires_at is not None:
        line += f" {record.expires_at!r}"
    return line + "\n"


def _class(name: str) -> str:
    if not _CLASS.match(name):
        raise Unstorable(f"device class {name!r} cannot be stored (spaces, '=' or ',')")
    return name


def decode(text: str, where: str = "spec.records") -> Records:
    """The records of `encode`'s text; raises Unstorable for a line it did not write."""
    records: Records = {}
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                key, record = _parse(line)
            except ValueError as error:
                raise Unstorable(f"{where} line {number} {line!r}: {error}") from error
            records[key] = record
    return records


def _parse(line: str) -> tuple[str, Record]:
    fields = line.split(" ")
    if len(fields) not in (2, 3):
        raise ValueError("expected '<key> <class>=<devices>[,...] [<expiresAt>]'")
    devices: dict[str, int] = {}
    if fields[1] != "-":
        for item in fields[1].split(","):
            name, _, count = item.partition("=")
            devices[name] = int(count)
            if not name or devices[name] < 0:
                raise ValueError(f"bad device count {item!r}")
    expires = float(fields[2]) if len(fields) == 3 else None
    return fields[0], Record(devices, expires)
