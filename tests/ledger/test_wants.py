"""Wants as written and as read back off a watch event: the wanted label, the want lines."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.kube.api import KubeApi
from webhook.ledger import recordtext, wants
from webhook.ledger.accounting import Record, Records
from webhook.ledger.grants import GrantBook
from webhook.ledger.tenantusage import WANTED_LABEL, tenant_usage
from webhook.ledger.wantwatch import WantWatch

NOW = 1_000_000.0
GPU = "gpu.nvidia.com"


def records(**wanted: float) -> Records:
    """Two holders, a grant, and a want per owner (`b_1="expiry"` for `want:b/1`)."""
    found: Records = {
        "claim:a/x": Record({GPU: 1}),
        "grant:a/1-aaa": Record({GPU: 2}, NOW + 50),
        "pod:u/gpu": Record({GPU: 1}, NOW + 100),
    }
    for owner, expires in wanted.items():
        found[wants.want_key(owner.replace("_", "/"))] = Record({}, expires)
    return found


@pytest.mark.parametrize(
    ("wanted", "owners"),
    [
        ({}, set()),
        ({"b_1": NOW + 2}, {"b/1"}),
        ({"b_1": NOW - 1}, set()),
        ({"b_1": NOW + 2, "c_2": NOW + 1, "d_3": NOW - 5}, {"b/1", "c/2"}),
    ],
    ids=["none", "one-live", "one-expired", "live-and-expired"],
)
def test_the_live_wants_are_read_from_the_records_text(
    wanted: dict[str, float], owners: set[str]
) -> None:
    text = recordtext.encode(records(**wanted))
    assert wants.wanting(text, NOW) == owners
    labels = tenant_usage("t", records(**wanted), "7", now=NOW)["metadata"].get("labels")
    assert labels == ({WANTED_LABEL: "true"} if owners else None)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "want:b/1 - 1000002.0",  # the last line, no line break
        "want:b/1 - 1000002.0\nzz g=1\n",  # the first line
        "claim:a/want:x g=1\nwant:b/1 - 1000002.0\n",  # `want:` inside another key
        "want:b/1 - soon\n",  # not a number: not live
        "want:b/1 -\n",  # no expiry: not a want this version writes
    ],
    ids=["empty", "last-line", "first-line", "inside-a-key", "bad-expiry", "no-expiry"],
)
def test_want_lines_are_found_wherever_they_are(text: str) -> None:
    live = "1000002.0" in text and "soon" not in text
    assert wants.wanting(text, NOW) == ({"b/1"} if live else set())


def test_without_a_clock_no_want_is_read_and_no_label_written() -> None:
    metadata = tenant_usage("t", records(b_1=NOW + 2), "7")["metadata"]
    assert "labels" not in metadata and metadata["resourceVersion"] == "7"


class Book(GrantBook):
    """A real book that also notes which tenants it was told are wanted."""

    def __init__(self, owner: str) -> None:
        super().__init__(owner)
        self.told: list[str] = []

    def wanted(self, tenant: str) -> None:
        self.told.append(tenant)
        super().wanted(tenant)


def event(tenant: Any, text: Any) -> dict[str, Any]:
    return {"metadata": {"name": str(tenant)}, "spec": {"tenant": tenant, "records": text}}


@pytest.mark.parametrize(
    ("obj", "told"),
    [
        (event("t", recordtext.encode(records(b_2=NOW + 2))), ["t"]),
        (event("t", recordtext.encode(records(a_1=NOW + 2))), []),  # its own want
        (event("t", recordtext.encode(records(b_2=NOW - 2))), []),  # expired
        (event("t", recordtext.encode(records(a_1=NOW + 2, b_2=NOW + 2))), ["t"]),
        (event(None, recordtext.encode(records(b_2=NOW + 2))), []),
        (event("t", None), []),
    ],
    ids=["another-wants", "own-want", "expired", "both", "no-tenant", "no-records"],
)
def test_the_watch_tells_the_book_of_another_process_s_live_want(
    obj: dict[str, Any], told: list[str]
) -> None:
    book = Book("a/1")
    watch = WantWatch(KubeApi(api_client=None), book, clock=lambda: NOW)
    watch._seen("MODIFIED", obj)
    watch._seen("DELETED", obj)  # leaving the wanted set asks for nothing
    assert book.told == told
