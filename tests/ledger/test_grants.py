"""The grant book: what an admission may take from a grant, and what a write stores."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import pytest
from ledger_contract import nonzero

from webhook.ledger import accounting, grants, wants
from webhook.ledger.accounting import Record, Records
from webhook.ledger.grants import Apply, GrantBook
from webhook.ledger.grantstate import (
    DEMAND_SECONDS,
    FLUSH_INTERVAL,
    LEASE_SECONDS,
    MIN_LEASE_LEFT,
    RENEW_LEFT,
    STANDING_SECONDS,
)
from webhook.ledger.tenantrecords import Rows

GPU, MIG = "gpu.nvidia.com", "mig.nvidia.com"
OWNER, OTHER = "replica-a/1-abc", "replica-b/2-def"
MINE, THEIRS = grants.grant_key(OWNER), grants.grant_key(OTHER)
T = TypeVar("T")


class Clocks:
    """Wall and monotonic time that the test moves by hand."""

    def __init__(self) -> None:
        self.wall = 1_000_000.0
        self.mono = 500.0

    def advance(self, seconds: float) -> None:
        self.wall += seconds
        self.mono += seconds


def book_at(clocks: Clocks) -> GrantBook:
    return GrantBook(OWNER, clock=lambda: clocks.wall, monotonic=lambda: clocks.mono)


def keep(records: Records) -> tuple[Records, None]:
    return records, None


def planned(book: GrantBook, records: Records, apply: Apply[T]) -> tuple[Records, T]:
    """`GrantBook.plan` of tenant "t" on `records` as read: the records to write and what
    `apply` answered. The totals the planned rows carry (stored with the write, and what the
    grant was sized from) are always the recount of their records."""
    rows, result = book.plan("t", Rows(records), apply)
    assert nonzero(rows.totals) == nonzero(accounting.totals(rows.records)), rows.records
    return rows.records, result


def stored_grant(book: GrantBook, clocks: Clocks, devices: dict[str, int]) -> None:
    """Give the book a stored grant of `devices`, as a landed write would."""
    for seed in ("claim:x/seed-1", "claim:x/seed-2"):
        book.note("t", {seed: {c: n // 2 or 1 for c, n in devices.items()}}, LIMITS)
    written, _ = planned(book, {}, keep)
    book.landed("t")
    assert written.get(MINE) is not None, "the seed admission sized no grant"
    grant = book._grants["t"]
    grant.size = dict(devices)  # the exact size the case needs, as if stored so
    grant.admitted.clear()


LIMITS = {GPU: 100, MIG: 100}


# ------------------------------------------------------------------ admissions


@pytest.mark.parametrize(
    ("grant", "holds", "admitted"),
    [
        ({GPU: 4}, {"claim:a/x": {GPU: 4}}, True),
        ({GPU: 4}, {"claim:a/x": {GPU: 5}}, False),
        ({GPU: 4}, {"claim:a/x": {GPU: 2}, "claim:a/y": {GPU: 2}}, True),
        ({GPU: 4}, {"claim:a/x": {GPU: 2}, "claim:a/y": {GPU: 3}}, False),
        ({GPU: 4}, {"claim:a/x": {MIG: 1}}, False),
        ({GPU: 4, MIG: 1}, {"claim:a/x": {GPU: 1, MIG: 1}}, True),
        ({GPU: 4}, {"claim:a/x": {"unlimited.example.com": 9}}, True),
        ({GPU: 4}, {"claim:a/x": {GPU: 0}}, True),
    ],
    ids=[
        "fits-exactly",
        "one-over",
        "two-holders-fit",
        "two-holders-over",
        "class-without-grant",
        "two-classes",
        "class-without-limit-takes-nothing",
        "no-devices",
    ],
)
def test_an_admission_takes_from_the_grant_only_what_fits(
    grant: dict[str, int], holds: dict[str, dict[str, int]], admitted: bool
) -> None:
    clocks = Clocks()
    book = book_at(clocks)
    stored_grant(book, clocks, grant)
    assert book.admit("t", holds, LIMITS) is admitted
    state = book._grants["t"]
    assert bool(state.queued) is admitted
    if not admitted:
        assert not any(state.used.values()), "a refused admission took nothing"


def test_admissions_add_up_until_the_grant_is_used() -> None:
    clocks = Clocks()
    book = book_at(clocks)
    stored_grant(book, clocks, {GPU: 3})
    answers = [book.admit("t", {f"claim:a/c{i}": {GPU: 1}}, LIMITS) for i in range(5)]
    assert answers == [True, True, True, False, False]


def test_the_same_holder_admitted_again_takes_nothing_more() -> None:
    clocks = Clocks()
    book = book_at(clocks)
    stored_grant(book, clocks, {GPU: 2})
    assert book.admit("t", {"pod:u/gpu": {GPU: 2}}, LIMITS)
    assert book.admit("t", {"pod:u/gpu": {GPU: 2}}, LIMITS)
    assert book._grants["t"].used == {GPU: 2}


@pytest.mark.parametrize(
    ("left", "admitted"),
    [
        (LEASE_SECONDS, True),
        (MIN_LEASE_LEFT + 0.5, True),
        (MIN_LEASE_LEFT - 0.5, False),
        (0, False),
    ],
    ids=["fresh", "just-enough", "too-short", "expired"],
)
def test_no_admission_from_a_lease_about_to_end(left: float, admitted: bool) -> None:
    clocks = Clocks()
    book = book_at(clocks)
    stored_grant(book, clocks, {GPU: 4})
    book._grants["t"].expires_at = clocks.wall + left
    assert book.admit("t", {"claim:a/x": {GPU: 1}}, LIMITS) is admitted


# ------------------------------------------------------------------ a write in flight

FlightEnd = Callable[[GrantBook], None]
ENDS: dict[str, FlightEnd] = {
    "landed": lambda b: b.landed("t"),
    "missed": lambda b: b.missed("t"),
    "unknown": lambda b: b.unknown("t"),
}


@pytest.mark.parametrize("end", list(ENDS), ids=list(ENDS))
@pytest.mark.parametrize("new_size", [0, 1, 2, 6], ids=["to-0", "to-1", "to-2", "to-6"])
def test_admissions_during_a_write_are_covered_however_it_ends(end: str, new_size: int) -> None:
    """Stored grant 4, two devices queued; the write in flight stores them and sets the grant
    to `new_size`. Whatever it does, the devices admitted meanwhile fit what is then stored."""
    clocks = Clocks()
    book = book_at(clocks)
    stored_grant(book, clocks, {GPU: 4})
    assert book.admit("t", {"claim:a/q1": {GPU: 2}}, LIMITS)

    def sized(records: Records) -> tuple[Records, None]:
        return records, None

    book._size = lambda grant, rows, now: {GPU: new_size} if new_size else {}  # type: ignore[method-assign]
    planned(book, {}, sized)
    during = sum(book.admit("t", {f"claim:a/d{i}": {GPU: 1}}, LIMITS) for i in range(8))
    assert during == min(2, new_size)  # min(old grant - taken, new size)
    ENDS[end](book)
    grant = book._grants["t"]
    stored_size = new_size if end == "landed" else 4
    unstored = sum(d[GPU] for d in grant.queued.values())
    assert unstored <= stored_size, "admitted holders not covered by the stored grant"
    assert grant.used.get(GPU, 0) == unstored
    assert grant.size.get(GPU, 0) <= stored_size, "the book believes in more than is stored"


def test_a_landed_write_takes_its_holders_off_the_queue() -> None:
    clocks = Clocks()
    book = book_at(clocks)
    stored_grant(book, clocks, {GPU: 4})
    book.admit("t", {"claim:a/x": {GPU: 1}}, LIMITS)
    written, _ = planned(book, {}, keep)
    book.landed("t")
    assert "claim:a/x" in written and written["claim:a/x"].expires_at is not None
    assert book._grants["t"].queued == {}
    assert book._grants["t"].used.get(GPU, 0) == 0


def test_a_pods_name_is_shown_while_queued_and_written_with_its_holder() -> None:
    clocks = Clocks()
    book = book_at(clocks)
    stored_grant(book, clocks, {GPU: 4})
    assert book.admit("t", {"pod:u/gpu": {GPU: 1}}, LIMITS, names={"pod:u/gpu": "a/train-0"})
    assert book.overlay("t", {})["pod:u/gpu"].name == "a/train-0"
    written, _ = planned(book, {}, keep)
    book.landed("t")
    assert written["pod:u/gpu"].name == "a/train-0"
    assert book._grants["t"].names == {}


def test_a_holder_stored_by_someone_else_keeps_its_record() -> None:
    """A queued holder the reconciler already confirmed stays confirmed (never renewed)."""
    clocks = Clocks()
    book = book_at(clocks)
    stored_grant(book, clocks, {GPU: 4})
    book.admit("t", {"claim:a/x": {GPU: 1}}, LIMITS)
    written, _ = planned(book, {"claim:a/x": Record({GPU: 1})}, keep)
    assert written["claim:a/x"] == Record({GPU: 1})


# ------------------------------------------------------------------ sizing


def sized_after(
    demand: int, records: Records, *, limit: int = 10, clocks: Clocks | None = None
) -> int:
    clocks = clocks or Clocks()
    book = book_at(clocks)
    book.note("t", {}, {GPU: limit})  # an admission of no devices: sizes nothing
    if demand:
        book.note("t", {"claim:a/seed": {GPU: demand}}, {GPU: limit})
    written, _ = planned(book, records, keep)
    mine = written.get(MINE)
    return mine.devices.get(GPU, 0) if mine is not None else 0


def holders(devices: int, *, pending: bool = False) -> Records:
    expires = 2_000_000.0 if pending else None
    return {f"claim:a/h{i}": Record({GPU: 1}, expires) for i in range(devices)}


@pytest.mark.parametrize(
    ("demand", "records", "size"),
    [
        (1, {}, 2),
        (3, {}, 5),  # twice the demand (6) is more than half the free capacity (10 // 2)
        (1, holders(8), 1),
        (1, holders(9), 0),
        (1, holders(10), 0),
        (0, {}, 0),
        (2, {**holders(2), THEIRS: Record({GPU: 4}, 2_000_000.0)}, 2),
        (2, {**holders(2), THEIRS: Record({GPU: 6}, 2_000_000.0)}, 1),
        (2, {**holders(2), THEIRS: Record({GPU: 6}, 1.0)}, 4),  # theirs expired
        (2, {wants.want_key(OTHER): Record({}, 2_000_000.0)}, 0),
        (2, {wants.want_key(OTHER): Record({}, 1.0)}, 4),  # their want expired
        (2, {wants.want_key(OWNER): Record({}, 2_000_000.0)}, 4),  # my own want
        (1, holders(12), 0),  # over a lowered limit
    ],
    ids=[
        "twice-the-demand",
        "half-the-free",
        "near-the-limit",
        "one-left",
        "full",
        "no-demand-gives-back",
        "other-grant-counts",
        "other-grant-halves",
        "other-grant-expired",
        "other-wants",
        "other-want-expired",
        "own-want-ignored",
        "over-lowered-limit",
    ],
)
def test_a_grant_is_sized_by_demand_within_half_the_free_capacity(
    demand: int, records: Records, size: int
) -> None:
    assert sized_after(demand, records) == size


def test_the_write_deciding_a_first_admission_takes_a_grant_for_the_next() -> None:
    """A burst pays one write on its request path: the next admission fits the grant."""
    clocks = Clocks()
    book = book_at(clocks)
    book.note("t", {"claim:a/x": {GPU: 1}}, {GPU: 100})
    written, _ = planned(book, {}, keep)
    book.landed("t")
    assert written[MINE].devices == {GPU: 2}
    assert book.admit("t", {"claim:a/y": {GPU: 1}}, {GPU: 100})


def test_a_grant_keeps_its_size_while_the_tenant_admits_then_goes_back() -> None:
    """Twice the burst's demand; past the demand window still that size (standing), under
    half of what is left free; nothing once idle for STANDING_SECONDS."""
    clocks = Clocks()
    book = book_at(clocks)
    sizes = []
    book.note("t", {"claim:a/x": {GPU: 3}}, {GPU: 100})
    book.note("t", {"claim:a/y": {GPU: 3}}, {GPU: 100})
    for advance, records in ((0.0, {}), (DEMAND_SECONDS + 0.01, {}), (1.0, holders(80))):
        clocks.advance(advance)
        written, _ = planned(book, records, keep)
        book.landed("t")
        sizes.append(written[MINE].devices[GPU] if MINE in written else 0)
    clocks.advance(STANDING_SECONDS)
    written, _ = planned(book, {}, keep)
    assert sizes == [12, 12, 10]
    assert MINE not in written


def test_a_want_seen_on_the_watch_gives_the_grant_back_at_once() -> None:
    clocks = Clocks()
    book = book_at(clocks)
    stored_grant(book, clocks, {GPU: 4})
    book.admit("t", {"claim:a/x": {GPU: 1}}, LIMITS)
    book.wanted("t")
    assert book.due() == ["t"], "due at once, flush interval or not"
    assert book.next_due_in() == 0.0
    written, _ = planned(book, {}, keep)
    assert MINE not in written and "claim:a/x" in written
    book.landed("t")
    assert not book._grants["t"].give_back, "given back: later writes size it as usual"
    assert book.due() == []


def test_a_wanted_grant_whose_flush_failed_waits_before_trying_again() -> None:
    """The flusher sleeps until the retry, instead of spinning on a grant it cannot give back."""
    clocks = Clocks()
    book = book_at(clocks)
    stored_grant(book, clocks, {GPU: 4})
    book.wanted("t")
    book.retry_later("t", 0.5)
    assert book.due() == []
    assert book.next_due_in() == pytest.approx(0.5)


def test_a_want_for_a_tenant_without_a_grant_changes_nothing() -> None:
    clocks = Clocks()
    book = book_at(clocks)
    book.wanted("t")
    book.note("u", {"claim:a/x": {GPU: 1}}, LIMITS)
    book.wanted("u")
    assert book.due() == [] and not book._grants["u"].give_back


def test_a_want_during_a_write_that_sets_a_grant_gives_it_back_after() -> None:
    clocks = Clocks()
    book = book_at(clocks)
    stored_grant(book, clocks, {GPU: 4})
    book.admit("t", {"claim:a/x": {GPU: 1}}, LIMITS)
    written, _ = planned(book, {}, keep)
    assert written[MINE].devices
    book.wanted("t")
    book.landed("t")
    assert book.due() == ["t"]
    assert MINE not in planned(book, written, keep)[0]


def test_the_stored_grant_is_never_counted_as_used_by_the_plan() -> None:
    """The jobs of a batch may use the process's own grant: it is taken out before them."""
    clocks = Clocks()
    book = book_at(clocks)
    seen: list[Records] = []

    def look(records: Records) -> tuple[Records, None]:
        seen.append(records)
        return records, None

    planned(book, {MINE: Record({GPU: 4}, clocks.wall + 50), **holders(1)}, look)
    assert MINE not in seen[0]


@pytest.mark.parametrize(
    ("left", "renewed"),
    [(RENEW_LEFT + 5, False), (RENEW_LEFT - 5, True)],
    ids=["far-from-its-end", "near-its-end"],
)
def test_an_unchanged_grant_is_renewed_only_near_its_end(left: float, renewed: bool) -> None:
    clocks = Clocks()
    book = book_at(clocks)
    book.note("t", {"claim:a/x": {GPU: 1}}, {GPU: 10})
    book.note("t", {}, {GPU: 10})
    stored = {MINE: Record({GPU: 2}, clocks.wall + left)}
    written, _ = planned(book, stored, keep)
    assert (written == stored) is not renewed
    assert written[MINE].expires_at == pytest.approx(
        clocks.wall + (LEASE_SECONDS if renewed else left)
    )


def test_a_closing_book_gives_every_grant_back() -> None:
    clocks = Clocks()
    book = book_at(clocks)
    book.note("t", {"claim:a/x": {GPU: 1}}, {GPU: 10})
    book.closing = True
    written, _ = planned(book, {MINE: Record({GPU: 2}, clocks.wall + 55)}, keep)
    assert MINE not in written


# ------------------------------------------------------------------ wants


@pytest.mark.parametrize(
    ("records", "holds", "blocked"),
    [
        ({THEIRS: Record({GPU: 3}, 2e6), **holders(6)}, {"claim:a/x": {GPU: 2}}, True),
        ({THEIRS: Record({GPU: 3}, 2e6), **holders(9)}, {"claim:a/x": {GPU: 2}}, False),
        (holders(9), {"claim:a/x": {GPU: 2}}, False),
    ],
    ids=["only-grants-block", "holders-block-anyway", "no-grants"],
)
def test_a_refusal_asks_for_grants_back_only_when_they_block(
    records: Records, holds: dict[str, dict[str, int]], blocked: bool
) -> None:
    now = 1_000_000.0
    kept, answer, retry = wants.reserve_or_want(
        records, holds, {GPU: 10}, now=now, pending_seconds=120, owner=OWNER
    )
    assert not answer.granted
    assert retry is blocked
    want = kept.get(wants.want_key(OWNER))
    assert (want is not None) is blocked
    if want is not None:
        assert want.devices == {} and want.expires_at == now + wants.WANT_SECONDS


def test_a_ledger_without_grants_never_wants() -> None:
    records = {THEIRS: Record({GPU: 3}, 2e6), **holders(6)}
    kept, answer, retry = wants.reserve_or_want(
        records, {"claim:a/x": {GPU: 2}}, {GPU: 10}, now=1e6, pending_seconds=120, owner=None
    )
    assert not answer.granted and not retry and kept == records


# ------------------------------------------------------------------ flushing


def test_a_queued_holder_is_due_once_the_flush_interval_passed() -> None:
    clocks = Clocks()
    book = book_at(clocks)
    stored_grant(book, clocks, {GPU: 4})
    book.admit("t", {"claim:a/x": {GPU: 1}}, LIMITS)
    assert book.due() == []  # the seed's flush just began
    clocks.advance(FLUSH_INTERVAL * 1.01)
    assert book.due() == ["t"]
    planned(book, {}, keep)
    assert book.due() == [], "not due while its write is in flight"


def test_the_first_holder_after_a_quiet_spell_waits_for_the_ones_after_it() -> None:
    clocks = Clocks()
    book = book_at(clocks)
    stored_grant(book, clocks, {GPU: 4})
    clocks.advance(10 * FLUSH_INTERVAL)  # long after the seed's flush
    book.admit("t", {"claim:a/x": {GPU: 1}}, LIMITS)
    assert book.due() == [], "written at once, it would take a write of its own"
    assert book.next_due_in() == pytest.approx(FLUSH_INTERVAL)
    clocks.advance(FLUSH_INTERVAL / 2)
    book.admit("t", {"claim:a/y": {GPU: 1}}, LIMITS)
    assert book.next_due_in() == pytest.approx(FLUSH_INTERVAL / 2), "the window is the first's"
    clocks.advance(FLUSH_INTERVAL / 2 + 0.001)
    assert book.due() == ["t"]
    written, _ = planned(book, {}, keep)
    assert {"claim:a/x", "claim:a/y"} <= set(written), "one write for both"


def test_only_the_holder_that_opens_a_flush_window_wakes_the_flusher() -> None:
    clocks = Clocks()
    book = book_at(clocks)
    stored_grant(book, clocks, {GPU: 4})
    book.queued_signal.clear()
    book.admit("t", {"claim:a/x": {GPU: 1}}, LIMITS)
    assert book.queued_signal.is_set()
    book.queued_signal.clear()
    book.admit("t", {"claim:a/y": {GPU: 1}}, LIMITS)
    assert not book.queued_signal.is_set(), "its write is already scheduled with the first"


def test_the_flush_after_a_burst_sizes_the_grant_for_the_whole_burst() -> None:
    clocks = Clocks()
    book = book_at(clocks)
    stored_grant(book, clocks, {GPU: 8})
    book._grants["t"].peak = {}
    for i in range(4):
        assert book.admit("t", {f"claim:a/c{i}": {GPU: 1}}, LIMITS)
    clocks.advance(FLUSH_INTERVAL * 1.01)
    assert book.due() == ["t"]
    written, _ = planned(book, {}, keep)
    assert written[MINE].devices[GPU] == 8, "twice the 4 devices of the burst it writes"


def test_an_idle_grant_is_due_to_be_given_back() -> None:
    clocks = Clocks()
    book = book_at(clocks)
    stored_grant(book, clocks, {GPU: 4})
    book.admit("t", {"claim:a/x": {GPU: 1}}, LIMITS)
    book.admit("t", {"claim:a/y": {GPU: 1}}, LIMITS)
    planned(book, {}, keep)
    book.landed("t")
    assert book._grants["t"].holds_any()
    assert book.due() == []
    clocks.advance(STANDING_SECONDS - 0.5)
    assert book.due() == [], "idle, but standing: never written just to renew it"
    assert book.next_due_in() == pytest.approx(0.5)
    clocks.advance(0.6)
    assert book.due() == ["t"]
    assert MINE not in planned(book, {}, keep)[0], "idle for STANDING_SECONDS: given back"


def test_a_failed_flush_waits_before_it_is_due_again() -> None:
    clocks = Clocks()
    book = book_at(clocks)
    stored_grant(book, clocks, {GPU: 4})
    book.admit("t", {"claim:a/x": {GPU: 1}}, LIMITS)
    clocks.advance(FLUSH_INTERVAL * 1.01)
    book.retry_later("t", 0.5)
    assert book.due() == []
    clocks.advance(0.5)
    assert book.due() == ["t"]


def test_the_overlay_shows_queued_holders_and_not_the_own_grant() -> None:
    clocks = Clocks()
    book = book_at(clocks)
    stored_grant(book, clocks, {GPU: 4})
    book.admit("t", {"claim:a/x": {GPU: 3}}, LIMITS)
    records = {MINE: Record({GPU: 4}, clocks.wall + 50), THEIRS: Record({GPU: 2}, clocks.wall + 50)}
    shown = book.overlay("t", records)
    assert shown["claim:a/x"].devices == {GPU: 3}
    assert MINE not in shown
    assert shown[THEIRS].devices == {GPU: 2}


def test_forgotten_tenants_are_dropped_from_the_book() -> None:
    clocks = Clocks()
    book = book_at(clocks)
    book.note("t", {"claim:a/x": {GPU: 1}}, LIMITS)
    clocks.advance(STANDING_SECONDS + 1)
    book.due()
    assert "t" not in book._grants


def test_process_owners_differ_and_fit_in_a_record_key() -> None:
    first, second = grants.process_owner(), grants.process_owner()
    assert first != second
    assert not any(c in first for c in " \n")


@pytest.mark.parametrize(
    ("limit", "admitted"),
    [(LIMITS[GPU], True), (LIMITS[GPU] + 10, True), (LIMITS[GPU] - 1, False)],
    ids=["same-limit", "raised-limit", "lowered-limit"],
)
def test_a_grant_sized_under_a_higher_limit_admits_nothing(limit: int, admitted: bool) -> None:
    clocks = Clocks()
    book = book_at(clocks)
    stored_grant(book, clocks, {GPU: 4})
    assert book.admit("t", {"claim:a/x": {GPU: 1}}, {GPU: limit}) is admitted
