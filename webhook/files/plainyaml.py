"""libyaml's reading of plain YAML, wherever it is exactly ruamel's, at a fraction of the cost.

ruamel's pure-Python round-trip loader is most of what `check`, `lint` and `migrate` spend on
a repository. libyaml (PyYAML's C parser) reads the same text many times faster, but to YAML
1.1 rules and without ruamel's refusals. So its events are taken only for text that is
"plain", deliberately narrow so that ruamel would load it without complaint and to the same
values: no tags, anchors or aliases, no directives, only string keys and no duplicates, no
plain scalar ruamel might build into a timestamp or number it reads otherwise (or raises on,
like `2001-02-30` or `0b_`), no tab (libyaml takes some that ruamel's scanner refuses) nor any
character ruamel's reader refuses, nesting far below Python's recursion limit. Plain scalars
take the type ruamel's own YAML 1.2 resolver gives them. Anything else, and whatever libyaml
rejects, is left to ruamel: broken files fail with ruamel's message, at ruamel's line.

Positions come from the events' marks, which are where ruamel's composer puts `lc` (a key's
line and column, an item's, a collection's first line), and flow style from the events too.

Relies on (checked with ruamel.yaml 0.19.1; canaries: tests/canary/test_ruamel.py):
- `ruamel.yaml.resolver.VersionedResolver.resolve(ScalarNode, value, (True, False))`: the tag
  ruamel's round-trip loader gives a plain scalar (YAML 1.2 unless a directive says otherwise).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

import yaml
from ruamel.yaml.nodes import ScalarNode
from ruamel.yaml.resolver import VersionedResolver

from webhook.types import JSON

MAX_DEPTH = 32
"""Deeper documents go to ruamel, whose recursive composer is the one to judge them."""

LOADER: type[yaml.CSafeLoader] | None = getattr(yaml, "CSafeLoader", None)
_STRING_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]*")
_NOT_STRINGS = frozenset({"true", "false", "null", "yes", "no", "on", "off", "y", "n"})
_NUMBER_START = frozenset("0123456789+-.")
_SIMPLE_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)*[A-Za-z]*")
_DECIMAL = re.compile(r"[0-9]+\.[0-9]+")
_RESOLVER = VersionedResolver()  # ruamel's round-trip default: YAML 1.2
_TAG = "tag:yaml.org,2002:"
_NON_PRINTABLE = re.compile(  # ruamel's Reader.NON_PRINTABLE
    "[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]"
)
Step = str | int


@dataclass
class Located:
    """Where a collection's entries are: the 0-based (line, column) of each key (a mapping) or
    item (a sequence), the same for each entry that is a collection itself, and whether the
    collection is in flow style."""

    at: dict[Step, tuple[int, int]] = field(default_factory=dict)
    children: dict[Step, Located] = field(default_factory=dict)
    flow: bool = False

    def __getitem__(self, step: Step) -> Located | None:
        return self.children.get(step)


@dataclass(frozen=True)
class PlainDocument:
    """One document's data, the 0-based line it starts on, and its entries' positions."""

    data: JSON
    line: int = 0
    located: Located | None = None


def read_plain(text: str, *, documents: int | None = None) -> list[PlainDocument] | None:
    """Every document of a plain `text`, as ruamel's loader and `to_plain` give them; None when
    the text is not plain or holds more than `documents` documents."""
    if LOADER is None or "\t" in text or _NON_PRINTABLE.search(text):
        return None
    try:
        return _Builder(documents).read(yaml.parse(text, Loader=LOADER))
    except (yaml.YAMLError, _NotPlain):
        return None


def read_document(body: str) -> PlainDocument | None:
    """The one document of a plain `body` (data None when it holds none); None otherwise."""
    found = read_plain(body, documents=1)
    if found is None:
        return None
    return found[0] if found else PlainDocument(None)


def string_key(text: str) -> bool:
    """Whether a plain key is a string to YAML 1.1 and 1.2 alike (not a bool, null or number)."""
    return _STRING_KEY.fullmatch(text) is not None and text.lower() not in _NOT_STRINGS


class _NotPlain(Exception):
    pass


@dataclass
class _Open:
    """A collection being read; for a mapping, whether a key comes next and the key its next
    value goes under (with that key's line and column)."""

    value: dict[str, JSON] | list[JSON]
    located: Located
    key_next: bool = True
    key: str = ""
    key_at: tuple[int, int] = (0, 0)


class _Builder:
    """Checks a stream's events are plain, building each document's data as they come."""

    def __init__(self, documents: int | None) -> None:
        self.limit = documents
        self.stack: list[_Open] = []
        self.done: list[PlainDocument] = []
        self.root: PlainDocument | None = None

    def read(self, events: Iterable[yaml.Event]) -> list[PlainDocument]:
        for event in events:
            if isinstance(event, yaml.DocumentStartEvent):
                if event.version is not None or event.tags:
                    raise _NotPlain
                if self.limit is not None and len(self.done) >= self.limit:
                    raise _NotPlain
            elif isinstance(event, yaml.DocumentEndEvent):
                self.done.append(self.root or PlainDocument(None))
                self.root = None
            elif isinstance(event, yaml.CollectionEndEvent):
                self.stack.pop()
            elif isinstance(event, yaml.NodeEvent):
                self._node(event)
        return self.done

    def _node(self, event: yaml.NodeEvent) -> None:
        if isinstance(event, yaml.AliasEvent) or event.anchor is not None:
            raise _NotPlain
        if getattr(event, "tag", None) is not None:
            raise _NotPlain
        parent = self.stack[-1] if self.stack else None
        if parent is not None and isinstance(parent.value, dict) and parent.key_next:
            parent.key, parent.key_next = _new_key(event, parent.value), False
            parent.key_at = _at(event)
            return
        value: JSON = _value(event)
        if not isinstance(value, (dict, list)):
            self._place(parent, value, _at(event), None)
            return
        located = Located(flow=bool(getattr(event, "flow_style", False)))
        self._place(parent, value, _at(event), located)
        self.stack.append(_Open(value, located))
        if len(self.stack) > MAX_DEPTH:
            raise _NotPlain

    def _place(
        self, parent: _Open | None, value: JSON, at: tuple[int, int], located: Located | None
    ) -> None:
        step: Step
        if parent is None:
            self.root = PlainDocument(value, at[0], located)
            return
        if isinstance(parent.value, dict):
            step, at = parent.key, parent.key_at
            parent.value[step] = value
            parent.key_next = True
        else:
            step = len(parent.value)
            parent.value.append(value)
        parent.located.at[step] = at
        if located is not None:
            parent.located.children[step] = located


def _at(event: yaml.Event) -> tuple[int, int]:
    mark = event.start_mark
    return (0, 0) if mark is None else (int(mark.line), int(mark.column))


def _value(event: yaml.NodeEvent) -> JSON:
    if isinstance(event, yaml.MappingStartEvent):
        return {}
    if isinstance(event, yaml.SequenceStartEvent):
        return []
    return _scalar(event)


def _new_key(event: yaml.NodeEvent, mapping: dict[str, JSON]) -> str:
    """A string key, not seen before in its mapping (ruamel refuses duplicate keys)."""
    if not isinstance(event, yaml.ScalarEvent):
        raise _NotPlain
    value = str(event.value)
    if (not event.style and not string_key(value)) or value in mapping:
        raise _NotPlain
    return value


def _scalar(event: yaml.NodeEvent) -> JSON:
    """Quoted and block scalars are strings; a plain one is what ruamel's YAML 1.2 resolver
    makes of it, where that is a string, bool, null, a decimal integer or `digits.digits`."""
    if not isinstance(event, yaml.ScalarEvent):
        raise _NotPlain
    value = str(event.value)
    if event.style:
        return value
    if value and value[0] in _NUMBER_START and _SIMPLE_NUMBER.fullmatch(value) is None:
        raise _NotPlain  # a plain one that may be a number or date ruamel builds otherwise
    return _resolved(value)


@functools.lru_cache(maxsize=4096)
def _resolved(value: str) -> JSON:
    tag = _RESOLVER.resolve(ScalarNode, value, (True, False))
    if tag == _TAG + "str":
        return value
    if tag == _TAG + "bool":
        return value.lower() == "true"
    if tag == _TAG + "null":
        return None
    if tag == _TAG + "int" and value.isascii() and value.isdigit():
        return int(value)
    if tag == _TAG + "float" and _DECIMAL.fullmatch(value):
        return float(value)
    raise _NotPlain
