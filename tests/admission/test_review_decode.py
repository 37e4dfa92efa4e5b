"""The review body is read as `json` reads it, whichever decoder does the work."""

from __future__ import annotations

import json
import random
from collections.abc import Callable

import pytest

from webhook.admission.review import BadReview, _checked_request, _decode, _request

DEEP = "[" * 3000 + "]" * 3000
BODIES = [
    pytest.param(b'{"a": 1, "b": [true, null, 1.5, "x"]}', id="plain"),
    pytest.param(b'{"a": 1, "a": 2}', id="duplicate-key"),
    pytest.param(b'{"n": 18446744073709551616}', id="int-over-64-bits"),
    pytest.param(b'{"n": -9223372036854775809}', id="int-under-64-bits"),
    pytest.param(b'{"n": 123456789012345678901234567890}', id="huge-int"),
    pytest.param(b'{"n": 1e400}', id="float-overflow"),
    pytest.param(b'{"n": NaN}', id="nan"),
    pytest.param(b'{"s": "\\ud800"}', id="lone-surrogate"),
    pytest.param(b'\xef\xbb\xbf{"a": 1}', id="bom"),
    pytest.param('{"s": "名前 \u2028"}'.encode(), id="utf-8"),
    pytest.param('{"a": 1}'.encode("utf-16"), id="utf-16"),
    pytest.param(('{"d": ' + "[" * 600 + "]" * 600 + "}").encode(), id="600-deep"),
    pytest.param(('{"d": ' + DEEP + "}").encode(), id="3000-deep"),
    pytest.param(('{"d": ' + '[{"a": ' * 300 + "1" + "}]" * 300 + "}").encode(), id="mixed-deep"),
    pytest.param(('{"d": ' + '[{"a": ' * 249 + "1" + "}]" * 249 + "}").encode(), id="mixed-499"),
    pytest.param(b'{"a": 1} x', id="trailing-data"),
    pytest.param(b"[1]", id="not-an-object"),
    pytest.param(b"", id="empty"),
]


@pytest.mark.parametrize("body", BODIES)
def test_decoded_as_json_decodes(body: bytes) -> None:
    try:
        expected: object = json.loads(body)
    except (ValueError, RecursionError) as err:
        expected = err
    try:
        got: object = _decode(body)
    except BadReview as err:
        assert not isinstance(expected, dict)
        if isinstance(expected, Exception):
            assert str(expected)[:100] in err.message
        return
    assert repr(got) == repr(expected)


class Text(str):
    pass


USUAL = {
    "kind": {"group": "", "version": "v1", "kind": "Pod"},
    "resource": {"group": "", "version": "v1", "resource": "pods"},
    "operation": "CREATE",
    "namespace": "team-a",
    "name": "p",
    "object": {"kind": "Pod"},
    "userInfo": {"username": "alice"},
}
CHANGES: list[tuple[str, str | None, object]] = [  # (id, field, value); None deletes
    ("usual", None, None),
    ("no-kind", "kind", None),
    ("kind-list", "kind", [1]),
    ("kind-kind-empty", "kind", {"kind": ""}),
    ("kind-kind-text-subclass", "kind", {"kind": Text("Pod")}),
    ("group-none", "kind", {"kind": "Pod", "group": None}),
    ("group-number", "kind", {"kind": "Pod", "group": 1}),
    ("no-resource", "resource", None),
    ("resource-empty", "resource", {"resource": ""}),
    ("operation-lower", "operation", "create"),
    ("operation-list", "operation", ["CREATE"]),
    ("operation-none", "operation", None),
    ("operation-subclass", "operation", Text("UPDATE")),
    ("namespace-number", "namespace", 3),
    ("namespace-empty", "namespace", ""),
    ("name-none", "name", None),
    ("sub-resource", "subResource", "status"),
    ("sub-resource-list", "subResource", []),
    ("object-list", "object", []),
    ("object-empty", "object", {}),
    ("old-object", "oldObject", {"kind": "Pod"}),
    ("old-object-text", "oldObject", "x"),
    ("user-info-none", "userInfo", None),
    ("user-info-empty", "userInfo", {}),
    ("user-info-list", "userInfo", []),
    ("dry-run", "dryRun", True),
    ("dry-run-false", "dryRun", False),
    ("dry-run-text", "dryRun", "true"),
    ("dry-run-zero", "dryRun", 0),
]


def _read(read: Callable[[str, dict[str, object]], object], raw: dict[str, object]) -> object:
    try:
        return read("u", raw)
    except BadReview as err:
        return ("BadReview", err.message)


@pytest.mark.parametrize(("field", "value"), [c[1:] for c in CHANGES], ids=[c[0] for c in CHANGES])
def test_the_one_pass_read_is_the_checked_one(field: str | None, value: object) -> None:
    raw = dict(USUAL)
    if field is not None:
        raw.pop(field, None)
        if value is not None:
            raw[field] = value
    assert _read(_request, raw) == _read(_checked_request, raw)


@pytest.mark.parametrize("seed", range(3), ids=[f"seed-{s}" for s in range(3)])
def test_the_one_pass_read_is_the_checked_one_for_any_mix(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(500):
        raw = dict(USUAL)
        for _, field, value in rng.sample(CHANGES[1:], rng.randrange(4)):
            assert field is not None
            raw.pop(field, None)
            if value is not None:
                raw[field] = value
        assert _read(_request, raw) == _read(_checked_request, raw), raw
