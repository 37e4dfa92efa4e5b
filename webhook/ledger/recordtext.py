"""A tenant's records as one string: how a TenantUsage stores them (`spec.records`).

The API server pays for every field of a custom resource on every write: it decodes the
object into nested maps, prunes and validates each field against the CRD schema and computes
the managed fields, all in proportion to the number of fields. With one map entry per holder
a write's cost would grow with the holders, many times that of a ConfigMap of the same
size. One string is one field whatever the holders, so a write costs about as much at a
thousand holders as at a few (tests/bench/kube_ledger_bench.py; docs/benchmarks.md).

One line per holder, sorted by key, fields separated by one space:

    <holder key> <class>=<devices>[,<class>=<devices>...][,@<namespace>/<name>=0] [<expiresAt>]

`-` stands for no devices; `expiresAt` (unix seconds, Python's shortest round-trip float
text) is present while the holder is pending. A Pod's holders carry the Pod's name as an
entry of no devices (`holdernames`), which the version before reads as a class holding 0;
lines without it (written before, or for claims, whose key is their name) show their key.
Holder keys (claim:<namespace>/<name>, pod:<uid>/<podClaimName>), names and DeviceClass
names never hold spaces, `=` or `,`, so nothing needs quoting; a key or class that would is
refused rather than written ambiguously.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Mapping

from webhook.ledger import holdernames
from webhook.ledger.accounting import Record, Records
from webhook.types import FactsUnavailable

MAX_BYTES = 1_000_000
"""The longest `spec.records` written: etcd refuses requests over 1.5 MiB, and the object
carries metadata besides. About 16,000 holders with typical names (60 bytes a line, a
Pod's with its name about 90); at least 2,700 claims with the longest names Kubernetes
allows (a 63-character namespace and a 253-character claim name, pending: ~360 bytes a
line), and 2,100 Pod holders (a 63-character pod claim name and the Pod's longest
`namespace/name` beside it: ~460 bytes)."""

_CLASS_SEPARATORS = (" ", "\n", "=", ",")


class Unstorable(FactsUnavailable):
    """The records cannot be written: too many holders for one object, or a bad name."""


class Lines:
    """Holder key -> its record and its line, as `decode` read or `encode` wrote them last:
    the next `encode` formats only the records that changed (the same Record object reuses
    its line). Two maps rather than one of pairs, so that telling the changed records from
    the others and joining the lines run over every holder without a Python step each."""

    def __init__(self) -> None:
        self.records: dict[str, Record] = {}
        self.text: dict[str, str] = {}

    def copy(self) -> Lines:
        """An independent copy (`encode` refreshes the lines it is given in place)."""
        copied = Lines()
        copied.records, copied.text = dict(self.records), dict(self.text)
        return copied

    def remember(self, key: str, record: Record, line: str) -> None:
        self.records[key] = record
        self.text[key] = line

    def keep_only(self, records: Mapping[str, Record]) -> None:
        """Forget the holders `records` no longer has."""
        if len(self.records) > len(records):
            for key in self.records.keys() - records.keys():
                del self.records[key], self.text[key]


def encode(records: Mapping[str, Record], tenant: str = "", lines: Lines | None = None) -> str:
    """The records as lines; raises Unstorable past MAX_BYTES or for an unquotable name.

    On the hot path of every grant write, on the serving loop: with `lines` (refreshed in
    place: it only ever maps a record to its own line, checked) only new or changed records
    are formatted and checked; finding them and joining the lines are each one pass of C over
    the holders.
    """
    known = lines if lines is not None else Lines()
    keys = sorted(records)
    held = map(records.__getitem__, keys)
    fresh = itertools.compress(keys, map(operator.is_not, held, map(known.records.get, keys)))
    changed = {key: records[key] for key in fresh}
    _check_names(changed)
    for key, record in changed.items():
        known.remember(key, record, _line(key, record))
    known.keep_only(records)
    text = "".join(map(known.text.__getitem__, keys))
    if len(text) > MAX_BYTES:
        raise Unstorable(
            f"tenant {tenant!r}: {len(records)} holders need {len(text)} bytes, over the "
            f"TenantUsage limit of {MAX_BYTES} bytes; delete unused claims or split the tenant"
        )
    return text


def _line(key: str, record: Record) -> str:
    devices = holdernames.with_name(record.devices, record.name) if record.name else record.devices
    if len(devices) == 1:
        ((name, count),) = devices.items()
        held = f"{name}={int(count)}"
    else:
        held = ",".join(f"{c}={int(n)}" for c, n in sorted(devices.items())) or "-"
    if record.expires_at is None:
        return f"{key} {held}\n"
    return f"{key} {held} {record.expires_at!r}\n"


def _check_names(records: Mapping[str, Record]) -> None:
    """Raise Unstorable unless every line of `records` splits back into its fields."""
    bad = [key for key in records if " " in key or "\n" in key]
    if bad:
        raise Unstorable(f"holder key {bad[0]!r} cannot be stored (space or line break)")
    classes = {name for record in records.values() for name in record.devices}
    classes.update(holdernames.MARK + r.name for r in records.values() if r.name)
    for name in classes:
        if not name or any(c in name for c in _CLASS_SEPARATORS):
            raise Unstorable(f"device class {name!r} cannot be stored (space, '=', ',')")


def decode(text: str, where: str = "spec.records", lines: Lines | None = None) -> Records:
    """The records of `encode`'s text (each line remembered in `lines` when given); raises
    Unstorable for a line it did not write."""
    records: Records = {}
    for number, line in enumerate(text.split("\n"), 1):
        if line:
            try:
                key, record = _parse(line)
            except ValueError as error:
                raise Unstorable(f"{where} line {number} {line!r}: {error}") from error
            records[key] = record
            if lines is not None:
                lines.remember(key, record, line + "\n")
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
    if holdernames.MARK not in fields[1]:
        return fields[0], Record(devices, expires)
    plain, holder_name = holdernames.split(devices)
    return fields[0], Record(plain, expires, holder_name)
