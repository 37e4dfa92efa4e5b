"""ruamel.yaml internals the YAML reading and `migrate`'s in-place editing rely on."""

from __future__ import annotations

import io
from typing import Any

import pytest
from canary.canary_support import Internal, rows, verify
from ruamel.yaml import YAML

DOCUMENT = "a: 1\n# full line\nb:\n  - x\n  - y\nf: [1, 2]\n"


def _load(text: str = DOCUMENT) -> Any:
    return YAML(typ="rt", pure=True).load(text)


def _positions() -> None:
    """lc.key(k) is the key's (line, column), lc.item(i) the item's, lc.line the start line."""
    root = _load("\n" + DOCUMENT)
    assert root.lc.key("b") == (3, 0), root.lc.key("b")
    assert root["b"].lc.item(1) == (5, 4), root["b"].lc.item(1)
    assert root.lc.line == 1, root.lc.line


def _flow_style() -> None:
    root = _load()
    assert (root.fa.flow_style(), root["f"].fa.flow_style()) == (False, True)


def _comment_slots() -> None:
    """A full-line comment after an entry hangs, as "\\n# ...", on ca.items[key][2] (a
    mapping) or ca.items[index][0] (a sequence)."""
    from ruamel.yaml.tokens import CommentToken

    root = _load("a: 1\n# one\nb:\n  - x\n  # two\n  - y\n")
    token = root.ca.items["a"][2]
    assert isinstance(token, CommentToken) and token.value == "\n# one\n", root.ca.items
    token = root["b"].ca.items[0][0]
    assert isinstance(token, CommentToken) and token.value.endswith("# two\n"), root["b"].ca.items


def _comment_written() -> None:
    """A CommentToken(value, CommentMark(0), None) hung on a slot is dumped after the entry."""
    from ruamel.yaml.comments import CommentedMap
    from ruamel.yaml.error import CommentMark
    from ruamel.yaml.tokens import CommentToken

    root = CommentedMap(a=1, b=2)
    root.ca.items["a"] = [None, None, CommentToken("\n# kept\n", CommentMark(0), None), None]
    buffer = io.StringIO()
    YAML(typ="rt", pure=True).dump(root, buffer)
    assert buffer.getvalue() == "a: 1\n# kept\nb: 2\n", buffer.getvalue()


def _load_state() -> None:
    """A load leaves one doc_infos entry and the `%YAML` version on the YAML object."""
    yaml = YAML(typ="rt", pure=True)
    yaml.load("%YAML 1.1\n---\na: 1\n")
    assert len(yaml.doc_infos) == 1 and yaml.version == (1, 1), (yaml.doc_infos, yaml.version)
    yaml.doc_infos.clear()
    yaml.version = None
    assert yaml.load("a: yes\n") == {"a": "yes"}, "a reset YAML object still reads YAML 1.1"


def _guess_indent_with_loader() -> None:
    """load_yaml_guess_indent(text, yaml=x) only calls x.load(text)."""
    from ruamel.yaml.util import load_yaml_guess_indent

    class Loaded:
        def load(self, _text: str) -> None:
            return None

    guessed = load_yaml_guess_indent("a:\n    b:\n      - 1\n", yaml=Loaded())
    assert guessed == (None, 4, 2), guessed


def _lone_scalar_dump() -> None:
    buffer = io.StringIO()
    YAML(typ="rt", pure=True).dump("x", buffer)
    assert buffer.getvalue() == "x\n...\n", buffer.getvalue()


def _compose_keeps_duplicates() -> None:
    """compose() accepts repeated keys: MappingNode.value (key, value) pairs with start_mark."""
    from ruamel.yaml.nodes import MappingNode, ScalarNode

    node = YAML(typ="rt", pure=True).compose("a: 1\nb: 2\na: 3\n")
    assert isinstance(node, MappingNode)
    keys = [(k.value, k.start_mark.line, k.start_mark.column) for k, _ in node.value
            if isinstance(k, ScalarNode)]  # fmt: skip
    assert keys == [("a", 0, 0), ("b", 1, 0), ("a", 2, 0)], keys


def _duplicate_key_refused() -> None:
    from ruamel.yaml.constructor import DuplicateKeyError

    with pytest.raises(DuplicateKeyError):
        _load("a: 1\na: 2\n")


def _error_marks() -> None:
    from ruamel.yaml.error import MarkedYAMLError

    with pytest.raises(MarkedYAMLError) as caught:
        _load("a: [1\nb: 2\n")
    error = caught.value
    mark = error.problem_mark or error.context_mark
    assert mark is not None and mark.line >= 1 and error.problem, (mark, error.problem)


def _aliases_shared() -> None:
    """An alias loads as the anchored object itself; one to an enclosing node as null."""
    root = _load("x: &a [1]\ny: *a\n")
    assert root["x"] is root["y"], "aliases are copies"
    assert _load("x: &b\n  y: *b\n") == {"x": {"y": None}}


def _plain_scalar_tags() -> None:
    """The resolver's tag for a plain scalar is the type the round-trip loader builds."""
    from ruamel.yaml.nodes import ScalarNode
    from ruamel.yaml.resolver import VersionedResolver

    resolver = VersionedResolver()
    tags = {v: resolver.resolve(ScalarNode, v, (True, False)) for v in ("yes", "80", "1.5", "~")}
    assert tags == {
        "yes": "tag:yaml.org,2002:str",
        "80": "tag:yaml.org,2002:int",
        "1.5": "tag:yaml.org,2002:float",
        "~": "tag:yaml.org,2002:null",
    }, tags
    loaded = _load("yes: yes\ni: 80\nf: 1.5\nn: ~\n")
    kinds = [isinstance(v, t) for v, t in zip(loaded.values(), (str, int, float), strict=False)]
    assert kinds == [True, True, True] and loaded["n"] is None, loaded


def _line_col_set() -> None:
    """Positions and flow style set by hand read back as a loaded tree's would."""
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    mapping, sequence = CommentedMap(a=1), CommentedSeq([1])
    mapping.lc.add_kv_line_col("a", [3, 4, 3, 4])
    sequence.lc.add_kv_line_col(0, [5, 6])
    assert (mapping.lc.key("a"), sequence.lc.item(0)) == ((3, 4), (5, 6))


def _flow_style_set() -> None:
    from ruamel.yaml.comments import CommentedMap

    mapping = CommentedMap(a=1)
    mapping.fa.set_flow_style()
    assert mapping.fa.flow_style() is True
    mapping.fa.set_block_style()
    assert mapping.fa.flow_style() is False


INTERNALS = [
    Internal("ruamel.yaml", "ruamel.yaml.comments.CommentedBase.lc", _positions),
    Internal("ruamel.yaml", "ruamel.yaml.comments.CommentedBase.fa.flow_style()", _flow_style),
    Internal("ruamel.yaml", "ruamel.yaml.comments.CommentedBase.ca.items", _comment_slots),
    Internal(
        "ruamel.yaml",
        "ruamel.yaml.tokens.CommentToken(value, CommentMark(column), None)",
        _comment_written,
    ),
    Internal("ruamel.yaml", "ruamel.yaml.YAML.doc_infos, YAML.version", _load_state),
    Internal(
        "ruamel.yaml",
        "ruamel.yaml.util.load_yaml_guess_indent(text, yaml=...)",
        _guess_indent_with_loader,
    ),
    Internal("ruamel.yaml", "ruamel.yaml.YAML.dump of a lone scalar", _lone_scalar_dump),
    Internal("ruamel.yaml", "ruamel.yaml.YAML.compose(text)", _compose_keeps_duplicates),
    Internal("ruamel.yaml", "ruamel.yaml.constructor.DuplicateKeyError", _duplicate_key_refused),
    Internal("ruamel.yaml", "ruamel.yaml.error.MarkedYAMLError marks", _error_marks),
    Internal("ruamel.yaml", "ruamel.yaml aliases shared", _aliases_shared),
    Internal(
        "ruamel.yaml",
        "ruamel.yaml.comments.CommentedBase.lc.add_kv_line_col(key, [line, column, ...])",
        _line_col_set,
    ),
    Internal(
        "ruamel.yaml", "ruamel.yaml.comments.CommentedBase.fa.set_flow_style()", _flow_style_set
    ),
    Internal(
        "ruamel.yaml",
        "ruamel.yaml.resolver.VersionedResolver.resolve(ScalarNode, value, (True, False))",
        _plain_scalar_tags,
    ),
]


@pytest.mark.parametrize("internal", rows(INTERNALS))
def test_ruamel_internal_still_there(internal: Internal) -> None:
    verify(internal)
