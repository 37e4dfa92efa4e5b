"""Wants: how a request blocked only by other processes' grants gets the capacity back.

A grant (`grants`) is quota one process set aside for itself. When another process's
request would fit if no process held a grant, it is refused for now, leaves a `want:<owner>`
record (no devices, so it counts for nothing, expiring after WANT_SECONDS) and tries again
within its budget. Every write of the records labels the TenantUsage wanted while a live
want is in them (`tenantusage.WANTED_LABEL`); every process holding a grant watches the
wanted TenantUsages (`wantwatch`) and, seeing another's want, gives its grant back with an
immediate flush (a process that writes anyway sizes its grant 0 while it sees the want), so
the request is granted, or refused by real holders. Should that watch fail, a want is still
answered by the holder's next write, at the latest when it goes idle
(`grantstate.STANDING_SECONDS`)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from webhook.ledger import accounting
from webhook.ledger.accounting import Record, Records
from webhook.types import Reservation

GRANT_PREFIX = accounting.GRANT_PREFIX
WANT_PREFIX = accounting.WANT_PREFIX
WANT_SECONDS = 2.0
"""How long a blocked request's `want:` record asks the other processes to give back."""
WANT_PAUSE = 0.02
"""A request refused for other processes' grants tries again after this, then doubling..."""
MAX_WANT_PAUSE = 0.2
"""... up to this ..."""
RETRY_ROOM = 0.1
"""... while at least this much of its budget is left besides the pause (a read and a write)."""


def want_key(owner: str) -> str:
    return WANT_PREFIX + owner


def without_grants(records: Mapping[str, Record]) -> Records:
    """The records with every process's grant left out: what quota real holders use."""
    return {k: r for k, r in records.items() if not k.startswith(GRANT_PREFIX)}


def blocked_by_grants(
    records: Mapping[str, Record],
    holds: Mapping[str, Mapping[str, int]],
    limits: Mapping[str, int],
    now: float,
) -> bool:
    """Whether `holds` would fit if no process held a grant (so it is worth waiting)."""
    return accounting.reserve(without_grants(records), holds, limits, now=now).granted


def with_want(records: Mapping[str, Record], owner: str, now: float) -> Records:
    """`records` plus this process's live want (an existing live one is kept as it is)."""
    key, updated = want_key(owner), dict(records)
    current = updated.get(key)
    if current is None or current.expires_at is None or current.expires_at <= now:
        updated[key] = Record({}, now + WANT_SECONDS)
    return updated


def reserve_or_want(
    records: Records,
    holds: Mapping[str, Mapping[str, int]],
    limits: Mapping[str, int],
    *,
    now: float,
    pending_seconds: float,
    owner: str | None,
    names: Mapping[str, str] | None = None,
) -> tuple[Records, Reservation, bool]:
    """`accounting.reserve`, answered as a Reservation; when it refuses only because of
    other processes' grants (and `owner` takes part in grants), the records carry `owner`'s
    want and the third value is True: the request is worth trying again."""
    outcome = accounting.reserve(
        records, holds, limits, now=now, pending_seconds=pending_seconds, names=names
    )
    if outcome.granted:
        return outcome.records, Reservation(True), False
    refusal = Reservation(False, accounting.usage_of(outcome.records))
    if owner is None or not blocked_by_grants(records, holds, limits, now):
        return outcome.records, refusal, False
    return with_want(outcome.records, owner, now), refusal, True


def others_want(records: Mapping[str, Record], owner: str, now: float) -> bool:
    mine = want_key(owner)
    return any(
        key.startswith(WANT_PREFIX) and key != mine and (r.expires_at or 0) > now
        for key, r in records.items()
    )


def wanting(text: str, now: float) -> set[str]:
    """The owners with a live want in a TenantUsage's `spec.records` text, read from its
    want lines alone (sorted by key, so together): a watch event carries every holder."""
    owners: set[str] = set()
    for line in _want_lines(text):
        fields = line.split(" ")
        if len(fields) == 3 and _later_than(fields[2], now):
            owners.add(fields[0].removeprefix(WANT_PREFIX))
    return owners


def _want_lines(text: str) -> Iterator[str]:
    marker = "\n" + WANT_PREFIX
    start = 0 if text.startswith(WANT_PREFIX) else text.find(marker) + 1 or -1
    while start != -1:
        end = text.find("\n", start)
        yield text[start:] if end == -1 else text[start:end]
        found = -1 if end == -1 else text.find(marker, end)
        start = -1 if found == -1 else found + 1


def _later_than(expires: str, now: float) -> bool:
    try:
        return float(expires) > now
    except ValueError:
        return False
