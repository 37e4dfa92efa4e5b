"""Remembered renders: the text a fresh dump gives, told apart by type and key order."""

from __future__ import annotations

import pytest

from webhook.files import rtyaml, textpatch
from webhook.files.rtyaml import remembered, render_new, render_yaml
from webhook.files.textpatch import Style, render_document
from webhook.files.treepatch import to_node
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
