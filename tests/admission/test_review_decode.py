"""The review body is read as `json` reads it, whichever decoder does the work."""

from __future__ import annotations

import json

import pytest

from webhook.admission.review import BadReview, _decode

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
