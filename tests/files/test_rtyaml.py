"""Remembered renders: the text a fresh dump gives, told apart by type and key order."""

from __future__ import annotations

from typing import Any

import pytest
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from yaml_corpus import TEXTS

from webhook.files import rtyaml, textpatch
from webhook.files.plainyaml import read_document
from webhook.files.roundtrip import split_documents
from webhook.files.rtyaml import load_rt, remembered, render_new, render_yaml, sketch
from webhook.files.textpatch import Style, render_document
from webhook.files.treepatch import to_node
from webhook.files.yamlio import to_plain
from webhook.types import JSON

LOOK_ALIKES: list[tuple[str, JSON, JSON]] = [
    ("int-and-string", {"count": 1}, {"count": "1"}),
    ("int-and-bool", {"count": 1}, {"count": True}),
    ("int-and-float", {"count": 1}, {"count": 1.0}),
    ("null-and-string", {"v": None}, {"v": "null"}),
    ("key-order", {"a": 1, "b": 2}, {"b": 2, "a": 1}),
]


@pytest.mark.parametrize(
    ("first", "second"), [c[1:] for c in LOOK_ALIKES], ids=[c[0] for c in LOOK_ALIKES]
)
def test_look_alikes_are_rendered_apart(first: JSON, second: JSON) -> None:
    style = Style(4, 2, 4)
    fresh = {repr(o): (_fresh_new(o), _fresh_document(o, style)) for o in (first, second)}
    rtyaml._RENDERED.clear()
    for obj in (first, second, first, second):
        assert (render_new(obj, (2, 0)), render_document(obj, style)) == fresh[repr(obj)]
    assert fresh[repr(first)] != fresh[repr(second)]


def _fresh_new(obj: JSON) -> str:
    return render_yaml(to_node(obj), (2, 0))


def _fresh_document(obj: JSON, style: Style) -> str:
    return "\n".join(textpatch._dumped(to_node(obj), style)) + "\n"


def test_styles_are_rendered_apart() -> None:
    obj: JSON = {"spec": {"items": [{"name": "a"}]}}
    narrow, wide = render_document(obj, Style(2, 0, 2)), render_document(obj, Style(4, 2, 4))
    assert narrow != wide
    assert render_document(obj, Style(2, 0, 2)) == narrow


def test_the_store_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rtyaml, "_RENDERED_MAX", 3)
    rtyaml._RENDERED.clear()
    calls: list[int] = []

    def render(number: int) -> int:
        calls.append(number)
        return number

    for number in range(10):
        assert remembered("test", number, None, lambda n=number: render(n)) == number  # type: ignore[misc]
        assert len(rtyaml._RENDERED) <= 3
    assert calls == list(range(10))
    assert remembered("test", 9, None, lambda: -1) == 9


def _layout(node: Any) -> Any:
    """Everything textpatch reads of a tree: types, flow styles, key and item positions."""
    if isinstance(node, CommentedMap):
        entries = [(k, tuple(node.lc.key(k)), _layout(v)) for k, v in node.items()]
        return ("map", bool(node.fa.flow_style()), entries)
    if isinstance(node, CommentedSeq):
        items = [(i, tuple(node.lc.item(i)), _layout(v)) for i, v in enumerate(node)]
        return ("seq", bool(node.fa.flow_style()), items)
    return to_plain(node)


BODIES = [
    (f"{name}#{n}", body)
    for name, text in TEXTS
    for n, (_, body, _) in enumerate(split_documents(text))
    if read_document(body) is not None
]


@pytest.mark.parametrize("body", [b for _, b in BODIES], ids=[n for n, _ in BODIES])
def test_a_sketch_is_laid_out_as_ruamels_tree(body: str) -> None:
    plain = read_document(body)
    assert plain is not None
    assert _layout(sketch(plain.data, plain.located)) == _layout(load_rt(body))
