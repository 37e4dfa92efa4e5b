"""libyaml's plain reading: given only where it is ruamel's data and ruamel's positions.

Each table row is checked against ruamel itself; tests/cli/test_migrate_skip.py and
tests/files/test_yamlio.py do the same over every golden input, CLI fixture and policy file,
and tests/fuzz/test_fuzz_migrate_skip.py over generated scalars and workloads.
"""

from __future__ import annotations

import pytest
from ruamel.yaml import YAML

from webhook.files.plainyaml import read_document, read_plain, string_key
from webhook.files.rtyaml import load_rt
from webhook.files.yamlio import to_plain


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("app", True),
        ("app.kubernetes.io/name", True),
        ("_x", True),
        ("True", False),
        ("no", False),
        ("null", False),
        ("1", False),
        (".inf", False),
        ("<<", False),
        ("a b", False),
    ],
    ids=[
        "word",
        "label",
        "underscore",
        "bool",
        "yaml11-bool",
        "null",
        "int",
        "inf",
        "merge",
        "space",
    ],
)
def test_string_key(text: str, expected: bool) -> None:
    assert string_key(text) is expected


SCALARS = [
    ("word", "a", "a"),
    ("quantity", "64Gi", "64Gi"),
    ("millicores", "500m", "500m"),
    ("int", "80", 80),
    ("zero", "0", 0),
    ("leading-zero", "0123", 123),
    ("float", "1.10", 1.1),
    ("version", "1.2.3", "1.2.3"),
    ("true", "true", True),
    ("title-false", "False", False),
    ("yaml11-yes", "yes", "yes"),
    ("yaml11-off", "off", "off"),
    ("null", "null", None),
    ("tilde", "~", None),
    ("empty", "", None),
    ("single-quoted-int", "'80'", "80"),
    ("double-quoted-true", '"true"', "true"),
    ("block", "|\n  line\n", "line\n"),
    ("folded", ">-\n  one\n  two\n", "one two"),
    ("multi-line-plain", "one\n  two", "one two"),
]
NOT_BUILT = [
    ("exponent", "1e3"),
    ("hex", "0x1F"),
    ("octal", "0o17"),
    ("signed", "-1"),
    ("dot-float", ".5"),
    ("infinity", ".inf"),
    ("underscores", "1_000"),
    ("date", "2001-02-03"),
    ("sexagesimal", "1:20"),
    ("trailing-dot", "1."),
    ("tag", "!!str 1"),
]


@pytest.mark.parametrize(("text", "value"), [c[1:] for c in SCALARS], ids=[c[0] for c in SCALARS])
def test_plain_data_builds_what_ruamel_loads(text: str, value: object) -> None:
    body = f"k: {text}\n"
    plain = read_document(body)
    assert plain is not None and plain.data == {"k": value}
    assert plain.data == to_plain(load_rt(body))
    assert type(value) is type(to_plain(load_rt(body))["k"])


@pytest.mark.parametrize("text", [c[1] for c in NOT_BUILT], ids=[c[0] for c in NOT_BUILT])
def test_plain_data_leaves_other_scalars_to_ruamel(text: str) -> None:
    assert read_document(f"k: {text}\n") is None


def test_nested_data_keeps_order_and_structure() -> None:
    body = "b: {x: [1, {w: 'z'}]}\na:\n- - deep\n- ''\n"
    plain = read_document(body)
    assert plain is not None and list(plain.data) == ["b", "a"]
    assert (
        plain.data == to_plain(load_rt(body)) == {"b": {"x": [1, {"w": "z"}]}, "a": [["deep"], ""]}
    )


@pytest.mark.parametrize(
    ("text", "count"),
    [
        ("", 0),
        ("# only a comment\n", 0),
        ("a: 1\n", 1),
        ("---\na: 1\n---\n---\nb: 2\n...\n", 3),
        ("- x\n---\nscalar\n", 2),
    ],
    ids=["empty", "comment", "one", "with-empty-between", "sequence-and-scalar"],
)
def test_documents_are_counted_as_ruamel_yields_them(text: str, count: int) -> None:
    found = read_plain(text)
    loaded = [to_plain(d) for d in YAML(typ="rt", pure=True).load_all(text)]
    assert found is not None and [d.data for d in found] == loaded and len(loaded) == count
    assert (read_plain(text, documents=1) is None) is (count > 1)
