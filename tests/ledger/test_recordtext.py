"""A TenantUsage's records as one string, and the objects around it (old format, totals)."""

from __future__ import annotations

from typing import Any

import pytest
from ledger_contract import GPU

from webhook.ledger import recordtext
from webhook.ledger.accounting import Record, Records
from webhook.ledger.recordtext import Unstorable
from webhook.ledger.tenantusage import TOTALS_KEY, records_of, tenant_usage

PENDING_AT = 1764567890.1234567


@pytest.mark.parametrize(
    ("records", "text"),
    [
        pytest.param({}, "", id="empty"),
        pytest.param({"claim:a/x": Record({GPU: 2})}, f"claim:a/x {GPU}=2\n", id="confirmed"),
        pytest.param(
            {"claim:a/x": Record({GPU: 1}, PENDING_AT)},
            f"claim:a/x {GPU}=1 {PENDING_AT!r}\n",
            id="pending-keeps-every-digit",
        ),
        pytest.param(
            {"pod:u-1/gpu": Record({"b.example": 1, "a.example": 3})},
            "pod:u-1/gpu a.example=3,b.example=1\n",
            id="classes-sorted",
        ),
        pytest.param({"claim:a/none": Record({}, 5.0)}, "claim:a/none - 5.0\n", id="no-devices"),
        pytest.param(
            {"claim:b/y": Record({GPU: 1}), "claim:a/x": Record({GPU: 1})},
            f"claim:a/x {GPU}=1\nclaim:b/y {GPU}=1\n",
            id="holders-sorted",
        ),
        pytest.param(
            {"pod:u-1/gpu": Record({GPU: 2}, PENDING_AT, "team-a/train-0")},
            f"pod:u-1/gpu @team-a/train-0=0,{GPU}=2 {PENDING_AT!r}\n",
            id="a-pods-name-as-an-entry-of-no-devices",
        ),
        pytest.param(
            {"pod:u-1/gpu": Record({}, None, "team-a/train-0")},
            "pod:u-1/gpu @team-a/train-0=0\n",
            id="a-name-without-devices",
        ),
    ],
)
def test_records_round_trip_through_their_text(records: Records, text: str) -> None:
    assert recordtext.encode(records) == text
    assert recordtext.decode(text) == records


@pytest.mark.parametrize(
    ("key", "devices"),
    [
        pytest.param("claim:a/with space", {GPU: 1}, id="space-in-key"),
        pytest.param("claim:a/x", {"gpu=x": 1}, id="equals-in-class"),
        pytest.param("claim:a/x", {"gpu,x": 1}, id="comma-in-class"),
        pytest.param("claim:a/x\nclaim:a/forged", {GPU: 1}, id="newline-in-key"),
    ],
)
def test_a_name_that_would_need_quoting_is_refused_not_written(
    key: str, devices: dict[str, int]
) -> None:
    with pytest.raises(Unstorable, match="cannot be stored"):
        recordtext.encode({key: Record(devices)})


def test_remembered_lines_format_only_the_records_that_changed() -> None:
    """`lines` from a read is reused for the records kept; the text is the same either way.
    A record refused is not remembered: it is checked again however often it is written."""
    stored = {f"claim:a/{n}": Record({GPU: 1}, PENDING_AT) for n in range(3)}
    lines = recordtext.Lines()
    records = recordtext.decode(recordtext.encode(stored), lines=lines)
    records["claim:a/1"] = Record({GPU: 2})  # changed: a new Record, formatted again
    records["claim:a/9"] = Record({"x=y": 1})  # new, with a class that cannot be stored
    for _ in range(2):
        with pytest.raises(Unstorable, match="'x=y'"):
            recordtext.encode(records, lines=lines)
    records["claim:a/8 x"] = Record({GPU: 1})  # a key that cannot be stored
    del records["claim:a/9"]
    for _ in range(2):
        with pytest.raises(Unstorable, match="'claim:a/8 x'"):
            recordtext.encode(records, lines=lines)
    del records["claim:a/8 x"]
    kept = lines.copy()
    assert recordtext.encode(records, lines=lines) == recordtext.encode(records)
    assert lines.text["claim:a/0"] is kept.text["claim:a/0"]  # the line as read, not re-made
    assert lines.text["claim:a/1"] == f"claim:a/1 {GPU}=2\n"
    del records["claim:a/2"]
    assert recordtext.encode(records, lines=lines) == recordtext.encode(records)
    assert set(lines.records) == set(lines.text) == set(records), "dropped holders forgotten"


@pytest.mark.parametrize(
    "line",
    [
        pytest.param("claim:a/x", id="no-devices-field"),
        pytest.param(f"claim:a/x {GPU}=two", id="count-not-a-number"),
        pytest.param(f"claim:a/x {GPU}=-1", id="negative-count"),
        pytest.param(f"claim:a/x {GPU}=1 soon", id="expiry-not-a-number"),
        pytest.param(f"claim:a/x {GPU}=1 5.0 extra", id="extra-field"),
        pytest.param("claim:a/x =1", id="no-class"),
    ],
)
def test_a_line_it_did_not_write_fails_closed_with_its_number(line: str) -> None:
    with pytest.raises(Unstorable, match=r"spec.records line 2 "):
        recordtext.decode(f"claim:a/ok {GPU}=1\n{line}\n")


def test_records_past_the_limit_are_refused_with_a_clear_message() -> None:
    """The object must stay under etcd's request limit: refuse, never write half."""
    line = len(f"claim:ns/c-00000 {GPU}=1\n")
    holders = recordtext.MAX_BYTES // line + 1
    records = {f"claim:ns/c-{n:05d}": Record({GPU: 1}) for n in range(holders)}
    with pytest.raises(Unstorable, match=rf"'big': {holders} holders need .* delete unused"):
        recordtext.encode(records, "big")
    fits = dict(list(records.items())[:-1])
    assert recordtext.decode(recordtext.encode(fits)) == fits


def test_longest_kubernetes_names_leave_room_for_the_holders_promised() -> None:
    """MAX_BYTES' docstring promises 2,700 holders with the longest names allowed."""
    namespace, name = "n" * 63, "c" * 250
    records = {
        f"claim:{namespace}/{name}{n:03d}": Record({GPU: 8}, PENDING_AT) for n in range(2700)
    }
    assert len(recordtext.encode(records)) <= recordtext.MAX_BYTES


def test_longest_pod_names_leave_room_for_the_holders_promised() -> None:
    """MAX_BYTES' docstring promises 2,100 Pod holders with the longest names allowed."""
    pod = "n" * 63 + "/" + "p" * 253
    records = {f"pod:{n:036d}/{'c' * 63}": Record({GPU: 8}, PENDING_AT, pod) for n in range(2100)}
    assert len(recordtext.encode(records)) <= recordtext.MAX_BYTES


def _parse_as_the_version_before(line: str) -> tuple[str, dict[str, int], float | None]:
    """How a replica of the version before names were stored parsed a line (copied)."""
    fields = line.split(" ")
    assert len(fields) in (2, 3)
    devices: dict[str, int] = {}
    if fields[1] != "-":
        for item in fields[1].split(","):
            name, _, count = item.partition("=")
            devices[name] = int(count)
            assert name and devices[name] >= 0
    return fields[0], devices, float(fields[2]) if len(fields) == 3 else None


def test_the_version_before_reads_a_named_line_as_a_class_holding_nothing() -> None:
    """During a rolling upgrade an older replica reads the lines written here."""
    record = Record({GPU: 2}, PENDING_AT, "team-a/train-0")
    (line,) = recordtext.encode({"pod:u-1/gpu": record}).splitlines()
    key, devices, expires = _parse_as_the_version_before(line)
    assert (key, expires) == ("pod:u-1/gpu", PENDING_AT)
    assert devices == {GPU: 2, "@team-a/train-0": 0}


@pytest.mark.parametrize(
    "line",
    [f"pod:u-1/gpu {GPU}=2", f"pod:u-1/gpu {GPU}=2 {PENDING_AT!r}"],
    ids=["confirmed", "pending"],
)
def test_lines_written_before_names_were_kept_have_none(line: str) -> None:
    (record,) = recordtext.decode(line).values()
    assert record.name is None and dict(record.devices) == {GPU: 2}


def test_an_object_is_written_as_records_plus_the_totals_for_older_readers() -> None:
    records = {"claim:a/x": Record({GPU: 2}, PENDING_AT), "claim:a/y": Record({GPU: 3})}
    spec = tenant_usage("t", records, "7")["spec"]
    assert spec["records"] == recordtext.encode(records)
    assert spec["holders"] == {TOTALS_KEY: {"devices": {GPU: 5}}}
    assert records_of({"spec": spec}) == records


def _old_format(holders: dict[str, Any]) -> dict[str, Any]:
    return {"spec": {"tenant": "t", "holders": holders}}


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        pytest.param(
            _old_format({"claim:a/x": {"devices": {GPU: 2}, "expiresAt": 9.5}}),
            {"claim:a/x": Record({GPU: 2}, 9.5)},
            id="before-records-holders-are-read",
        ),
        pytest.param(
            _old_format({TOTALS_KEY: {"devices": {GPU: 5}}, "claim:a/z": {"devices": {GPU: 1}}}),
            {TOTALS_KEY: Record({GPU: 5}), "claim:a/z": Record({GPU: 1})},
            id="written-over-by-an-older-replica-totals-still-count",
        ),
        pytest.param(_old_format({}), {}, id="empty"),
        pytest.param({"spec": {"tenant": "t", "records": ""}}, {}, id="records-empty"),
    ],
)
def test_objects_of_every_format_are_read(obj: dict[str, Any], expected: Records) -> None:
    assert records_of(obj) == expected


def test_totals_read_back_as_a_holder_keep_counting_in_the_next_totals() -> None:
    """An older replica dropped `records` but kept the totals: the count must not shrink."""
    migrated = records_of(_old_format({TOTALS_KEY: {"devices": {GPU: 5}}}))
    migrated["claim:a/new"] = Record({GPU: 1}, PENDING_AT)
    assert tenant_usage("t", migrated, "8")["spec"]["holders"][TOTALS_KEY] == {"devices": {GPU: 6}}
