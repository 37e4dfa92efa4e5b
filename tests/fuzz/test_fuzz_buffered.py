"""Fuzzing `buffered.parse` against gunicorn's parser: whatever it takes from the loop's
bytes, gunicorn accepts too and turns into the same environ (tests/admission/test_buffered.py
has the cases by name)."""

from __future__ import annotations

from admission.test_buffered import DEFAULTS, IGNORED, gunicorn_environ, request
from fuzz.fuzz_support import fuzz_settings
from hypothesis import given
from hypothesis import strategies as st

from webhook.admission.buffered import environ, parse

TOKEN = st.text("aZ-.!~0", min_size=1, max_size=8).map(str.encode)
NAME = st.one_of(TOKEN, TOKEN, TOKEN, st.text("aZ-_ 0:\t", max_size=8).map(str.encode))
TEXT = st.text(' \taz09;,=/"', max_size=12).map(str.encode)
VALUE = st.one_of(TEXT, TEXT, st.binary(max_size=12)).filter(lambda v: not {13, 10} & set(v))
FIELD = st.tuples(NAME, VALUE).map(lambda nv: nv[0] + b":" + nv[1])
TARGET = st.text("/az%?=&.~#", max_size=12).map(lambda t: b"/" + t.encode())
METHOD = st.sampled_from([b"POST", b"POST", b"POST", b"post", b"GET", b"POST "])


@fuzz_settings(400)
@given(
    fields=st.lists(FIELD, max_size=5),
    target=TARGET,
    method=METHOD,
    version=st.sampled_from([b"HTTP/1.1", b"HTTP/1.1", b"HTTP/1.0", b"HTTP/1.1 "]),
    body=st.binary(max_size=20),
)
def test_what_parse_takes_gunicorn_reads_the_same(
    fields: list[bytes], target: bytes, method: bytes, version: bytes, body: bytes
) -> None:
    data = request(*fields, line=method + b" " + target + b" " + version, body=body)
    parsed = parse(data, DEFAULTS)
    if parsed is None:
        return
    theirs = gunicorn_environ(data)  # raises on whatever gunicorn refuses
    mine = environ(parsed, "sock", ("10.0.0.7", 51234), ("0.0.0.0", 8443), multiprocess=True)
    assert {k: v for k, v in mine.items() if k not in IGNORED} == {
        k: v for k, v in theirs.items() if k not in IGNORED
    }
    assert theirs["wsgi.input"].read() == body
