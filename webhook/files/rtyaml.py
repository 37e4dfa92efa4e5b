"""ruamel's round-trip YAML for `migrate`: one loader and dumpers per thread, reused, and the
libyaml read-back check of what they render.

Building a ruamel YAML object costs about as much as loading a document, so each thread keeps
its own and resets what ruamel leaves on it after a load; one that failed midway is dropped,
as ruamel keeps half-done state after an exception.

Relies on (checked with ruamel.yaml 0.19.1; canaries: tests/canary/test_ruamel.py):
- `ruamel.yaml.YAML.doc_infos, YAML.version`: left by a load on a reused loader; reset after it.
- `ruamel.yaml.util.load_yaml_guess_indent(text, yaml=...)`: only calls `yaml.load` (skippable).
- `ruamel.yaml.constructor.DuplicateKeyError`: the round-trip loader's refusal of a repeat.
- `ruamel.yaml.comments.CommentedBase.lc.add_kv_line_col(key, [line, column, ...])`: what
  `lc.key(key)` and `lc.item(index)` then give.
- `ruamel.yaml.comments.CommentedBase.fa.set_flow_style()`: what `fa.flow_style()` then gives.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar, cast

import yaml as pyyaml
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.constructor import DuplicateKeyError
from ruamel.yaml.error import YAMLError
from ruamel.yaml.util import load_yaml_guess_indent

from webhook.files.plainyaml import Located
from webhook.files.treepatch import to_node
from webhook.files.yamlio import to_plain
from webhook.types import JSON

_C_LOADER = getattr(pyyaml, "CSafeLoader", None)
_RENDERED: dict[tuple[str, str, object], Any] = {}
_RENDERED_MAX = 2048
T = TypeVar("T")
_LOCAL = threading.local()  # this thread's loader and dumpers: building one costs a document


def _yaml() -> YAML:
    yaml = YAML(typ="rt", pure=True)
    yaml.preserve_quotes = True
    yaml.width = 4096
    return yaml


def load_rt(text: str) -> Any:
    """One document through ruamel's round-trip loader, the same one each time in a thread."""
    with _reused("loader", _yaml) as yaml:
        try:
            return yaml.load(text)
        finally:  # what ruamel leaves on the YAML object after a load
            yaml.doc_infos.clear()  # one per load
            yaml.version = None  # set by a `%YAML` directive, else read by the next load


@contextmanager
def _reused(name: str, make: Callable[[], YAML]) -> Iterator[YAML]:
    """This thread's `name`, made once; forgotten when it fails, as ruamel keeps half-done state
    (a constructor's pending generators, a representer's objects) after an exception."""
    cached: dict[str, YAML] = _LOCAL.__dict__.setdefault("yamls", {})
    yaml = cached.pop(name, None) or make()
    yield yaml
    cached[name] = yaml


def sketch(data: JSON, located: Located | None) -> Any:
    """ruamel's containers for plain `data` read by libyaml, with its positions and flow styles
    and no comments: all `webhook.files.textpatch` reads of a tree, without ruamel's load."""
    if isinstance(data, dict) and located is not None:
        mapping = CommentedMap()
        for key, value in data.items():
            mapping[key] = sketch(value, located[key])
            mapping.lc.add_kv_line_col(key, [*located.at[key], *located.at[key]])
        return _styled(mapping, located)
    if isinstance(data, list) and located is not None:
        sequence = CommentedSeq(sketch(v, located[i]) for i, v in enumerate(data))
        for index in range(len(data)):
            sequence.lc.add_kv_line_col(index, list(located.at[index]))
        return _styled(sequence, located)
    return data


def _styled(node: CommentedMap | CommentedSeq, located: Located) -> Any:
    if not node:  # ruamel's constructor leaves an empty collection's style unset (None)
        return node
    if located.flow:
        node.fa.set_flow_style()
    else:
        node.fa.set_block_style()
    return node


def filled_indent(
    guessed: tuple[int | None, int | None] | None, default: tuple[int, int]
) -> tuple[int, int]:
    if guessed is None:
        return default
    indent, offset = guessed
    return (
        default[0] if indent is None else int(indent),
        default[1] if offset is None else int(offset),
    )


class _Loaded:
    """Stands in for ruamel's YAML in `load_yaml_guess_indent` when the text is known to load."""

    def load(self, _text: str) -> None:
        return None


def guessed_indent(text: str, *, loads: bool) -> tuple[int | None, int | None] | None:
    """ruamel's guess, or None when the text does not load; `loads=False` skips the load."""
    try:
        _, indent, offset = load_yaml_guess_indent(text, **({} if loads else {"yaml": _Loaded()}))
    except (YAMLError, ValueError, RecursionError):
        return None
    return indent, offset


def reads_back(text: str, expected: JSON) -> bool:
    """Whether the rendered `text` loads as `expected`.

    libyaml reads it first, far faster than ruamel; ruamel decides whenever they disagree
    (YAML 1.1 and 1.2 differ on `yes`, `0o17`, `1e3`...), so a True is a reading both agree on.
    """
    if _C_LOADER is not None:
        try:
            if to_plain(pyyaml.load(text, Loader=_C_LOADER)) == expected:
                return True
        except (pyyaml.YAMLError, ValueError, TypeError, RecursionError, OverflowError):
            pass
    try:
        same: bool = to_plain(load_rt(text)) == expected
    except DuplicateKeyError:  # kept repeats that libyaml read otherwise: not the same
        return False
    return same


def render_new(obj: JSON, indent: tuple[int, int]) -> str:
    """A new document (a template) as YAML; remembered, as files repeat the same templates."""
    return remembered("document", obj, indent, lambda: render_yaml(to_node(obj), indent))


def remembered(kind: str, obj: JSON, style: object, render: Callable[[], T]) -> T:
    """What `render` gives for plain `obj` in `style`, rendered once per process.

    Files repeat the same rewrite (one mapping, a few counts, a few namespaces), and a ruamel
    dump costs milliseconds. The key is the `repr` of plain data, which tells `1` from `"1"`,
    `1.0` and `True` and keeps key order; the store is bounded (cleared when full).
    """
    key = (kind, repr(obj), style)
    found = _RENDERED.get(key)
    if found is None:
        if len(_RENDERED) >= _RENDERED_MAX:
            _RENDERED.clear()
        found = _RENDERED[key] = render()
    return cast(T, found)


def render_yaml(node: Any, indent: tuple[int, int]) -> str:
    buffer = io.StringIO()
    with _reused(f"dumper{indent}", lambda: _dumper(indent)) as yaml:
        yaml.dump(node, buffer)
    return buffer.getvalue()


def _dumper(indent: tuple[int, int]) -> YAML:
    yaml = _yaml()
    mapping, offset = indent
    yaml.indent(mapping=mapping, sequence=max(mapping, offset + 2), offset=offset)
    return yaml
