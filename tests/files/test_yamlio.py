"""Reading documents: libyaml's plain reading gives ruamel's documents, lines and errors.

Every YAML file the tests hold (golden inputs, CLI fixtures, the real-world migrate corpus,
policies) and every variant of tests/migrate_cases.py is read both ways; wherever libyaml's
reading is taken, each document's data, start line and index, and the line of every value in
it, must be what ruamel's round-trip loader gives.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

import pytest
from yaml_corpus import TEXTS

from webhook.files import yamlio
from webhook.files.plainyaml import read_plain
from webhook.files.yamlio import Document, YamlError, parse_documents


def _ruamel(text: str) -> list[Document] | str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return list(yamlio._documents(text, "f.yaml"))
        except Exception as err:  # any refusal is a difference when libyaml read the text
            return f"{type(err).__name__}: {err}"


def _paths(data: Any, prefix: tuple[str | int, ...] = ()) -> Iterator[tuple[str | int, ...]]:
    yield prefix
    items = (
        data.items()
        if isinstance(data, dict)
        else enumerate(data)
        if isinstance(data, list)
        else ()
    )
    for step, value in items:
        yield from _paths(value, (*prefix, step))


def _view(docs: list[Document]) -> list[tuple[Any, ...]]:
    return [(d.data, d.source, d.index, [(p, d.line_of(p)) for p in _paths(d.data)]) for d in docs]


@pytest.mark.parametrize("text", [t for _, t in TEXTS], ids=[n for n, _ in TEXTS])
def test_plain_reading_is_ruamels(text: str) -> None:
    if read_plain(text) is None:
        return
    expected = _ruamel(text)
    assert not isinstance(expected, str), expected
    assert _view(parse_documents(text, "f.yaml")) == _view(expected)


def test_most_files_are_read_by_libyaml() -> None:
    """The proof above means something only if libyaml reads many of them: it does."""
    real = [t for n, t in TEXTS if not n.startswith("variant:")]
    assert sum(read_plain(t) is not None for t in real) >= len(real) // 2


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("a: [\n", 2),
        ("a: 1\na: 2\n", 2),
        ("a: b\n c: d\n", 2),
        ("x: &a 1\ny: *b\n", 2),
    ],
    ids=["unclosed-flow", "duplicate-key", "bad-indent", "unknown-alias"],
)
def test_broken_text_fails_as_ruamel_says(text: str, line: int) -> None:
    assert read_plain(text) is None
    with pytest.raises(YamlError) as raised:
        parse_documents(text, "f.yaml")
    assert raised.value.source.line == line
