"""Telling from a document's text alone that `dragate migrate` leaves it as it is.

Loading a document with ruamel's round-trip loader is most of what a migration costs, and most
documents in a repository (Services, ConfigMaps, CPU-only workloads) never change. The rewriter
acts only on objects whose keys contain one of its mappings' resource names or prefixes
(`webhook.rewrite.resource_markers`); the CLI adds the `kind` value it looks for among
existing documents. Such a key or value is in the text verbatim: line folding only ever adds
spaces or newlines, which no marker holds, and only an escape in a double-quoted scalar
(`"nvidia.com/\\x67pu"`) can spell it otherwise. So a body is skipped when no marker is in its
text, it cannot hold an escape, and libyaml reads it as at most one plain document that ruamel
loads the same way.

"Plain" is deliberately narrow, so that a skipped body can never be one ruamel would reject:
no tags, anchors or aliases, no directives, only string keys and no duplicates, no plain
scalar ruamel might build into a timestamp or number (it raises on `2001-02-30` or `0b_`), no
tab (libyaml takes some that ruamel's scanner refuses) nor any character ruamel's reader
refuses, nesting far below Python's recursion limit. Everything else, and whatever libyaml
rejects, goes through ruamel as before: broken files fail with the same message, at the same
line.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import yaml

MAX_DEPTH = 32
"""Deeper documents go to ruamel, whose recursive composer is the one to judge them."""

_LOADER: type[yaml.CSafeLoader] | None = getattr(yaml, "CSafeLoader", None)
_SAFE_MARKER = re.compile(r"[A-Za-z0-9._/-]+")
_STRING_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_./-]*")
_NOT_STRINGS = frozenset({"true", "false", "null", "yes", "no", "on", "off", "y", "n"})
_NUMBER_START = frozenset("0123456789+-.")
_SIMPLE_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)*[A-Za-z]*")
_NON_PRINTABLE = re.compile(  # ruamel's Reader.NON_PRINTABLE
    "[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]"
)


def skipper(markers: Sequence[str]) -> Callable[[str], bool] | None:
    """A `skip` rule for `parse_stream`, or None when it cannot be made safely.

    None without libyaml, or when a marker holds anything but letters, digits and `._/-`
    (a space or quote could be folded or escaped into a key without showing in the text).
    """
    if _LOADER is None or not markers or not all(_SAFE_MARKER.fullmatch(m) for m in markers):
        return None
    wanted = tuple(dict.fromkeys(markers))

    def skip(body: str) -> bool:
        if any(marker in body for marker in wanted) or ("\\" in body and '"' in body):
            return False
        return plain_document(body)

    return skip


def plain_document(body: str) -> bool:
    """Whether libyaml reads `body` as at most one document that ruamel surely loads alike."""
    if _LOADER is None or "\t" in body or _NON_PRINTABLE.search(body):
        return False
    try:
        return _plain_events(yaml.parse(body, Loader=_LOADER))
    except yaml.YAMLError:
        return False


@dataclass
class _Open:
    """A collection being read: for a mapping, whether a key comes next and the keys so far."""

    mapping: bool
    key_next: bool = True
    keys: set[str] = field(default_factory=set)


def _plain_events(events: Iterable[yaml.Event]) -> bool:
    stack: list[_Open] = []
    documents = 0
    for event in events:
        if isinstance(event, yaml.DocumentStartEvent):
            documents += 1
            if documents > 1 or event.version is not None or event.tags:
                return False
        elif isinstance(event, yaml.CollectionEndEvent):
            stack.pop()
        elif isinstance(event, yaml.NodeEvent):
            if not _accept(event, stack[-1] if stack else None):
                return False
            if isinstance(event, yaml.CollectionStartEvent):
                stack.append(_Open(isinstance(event, yaml.MappingStartEvent)))
                if len(stack) > MAX_DEPTH:
                    return False
    return True


def _accept(event: yaml.NodeEvent, parent: _Open | None) -> bool:
    """Whether one node is plain; records it as its parent mapping's key or value."""
    if isinstance(event, yaml.AliasEvent) or event.anchor is not None:
        return False
    if getattr(event, "tag", None) is not None:
        return False
    if parent is not None and parent.mapping:
        parent.key_next = not parent.key_next
        if not parent.key_next:  # this node is a key
            return _new_key(event, parent)
    return not isinstance(event, yaml.ScalarEvent) or _plain_value(event)


def _new_key(event: yaml.NodeEvent, parent: _Open) -> bool:
    """A string key, not seen before in its mapping (ruamel refuses duplicate keys)."""
    if not isinstance(event, yaml.ScalarEvent):
        return False
    value = event.value
    if not event.style and not string_key(value):
        return False
    if value in parent.keys:
        return False
    parent.keys.add(value)
    return True


def string_key(text: str) -> bool:
    """Whether a plain key is a string to YAML 1.1 and 1.2 alike (not a bool, null or number)."""
    return _STRING_KEY.fullmatch(text) is not None and text.lower() not in _NOT_STRINGS


def _plain_value(event: yaml.ScalarEvent) -> bool:
    """Quoted and block scalars are strings; a plain one that may be a number or date is not."""
    value = event.value
    if event.style or not value or value[0] not in _NUMBER_START:
        return True
    return _SIMPLE_NUMBER.fullmatch(value) is not None
