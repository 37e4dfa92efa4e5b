"""Applying a rewrite to a ruamel round-trip tree, so that everything else in it stays.

The rewriter works on plain dicts; the file keeps comments and layout only in the ruamel tree.
The difference is computed as a minimal JSON patch on plain data and each operation is replayed
on the tree, moving the full-line comments ruamel hangs on a removed or last entry to where a
reader expects them.

Relies on (checked with ruamel.yaml 0.19.1, jsonpatch 1.33 and jsonpointer 3.1.1; canaries:
  tests/canary/test_ruamel.py and tests/canary/test_jsonpatch.py):
- `ruamel.yaml.comments.CommentedBase.ca.items`: full-line comments after an entry hang on slot 2 of
  a mapping key's list, slot 0 of a sequence index's.
- `jsonpatch.JsonPatch.patch`: the operations of `make_patch`, as dicts, replayed one by one.
- `jsonpatch.JsonPointer(pointer).parts`: the steps of an operation's path.
- `ruamel.yaml.tokens.CommentToken(value, CommentMark(column), None)`: a built comment hung on such
  a slot is dumped after the entry.
"""

from __future__ import annotations

from typing import Any

import jsonpatch
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import CommentMark
from ruamel.yaml.tokens import CommentToken

from webhook.files.yamlio import to_plain
from webhook.types import JSON


def apply_changes(root: Any, old: JSON, new: JSON) -> None:
    """Apply the minimal JSON patch from `old` to `new` onto the ruamel tree `root`."""
    pending: list[tuple[Any, str]] = []
    for op in jsonpatch.make_patch(old, new).patch:
        _apply_op(root, op, pending)
    for container, comment in pending:
        _attach_comment(container, comment)


def _apply_op(root: Any, op: dict[str, Any], pending: list[tuple[Any, str]]) -> None:
    kind = op["op"]
    if kind in ("move", "copy"):
        parent, key = _locate(root, op["from"])
        value = to_node(to_plain(parent[key]))
        if kind == "move":
            _remove(parent, key, pending)
        parent, key = _locate(root, op["path"])
        _add(parent, key, value)
        return
    parent, key = _locate(root, op["path"])
    if kind == "remove":
        _remove(parent, key, pending)
    elif kind == "add":
        _add(parent, key, to_node(op["value"]))
    elif kind == "replace":
        parent[key] = to_node(op["value"])


def _locate(root: Any, pointer: str) -> tuple[Any, Any]:
    parts = jsonpatch.JsonPointer(pointer).parts
    node = root
    for part in parts[:-1]:
        node = node[int(part)] if isinstance(node, list) else node[part]
    last = parts[-1]
    if isinstance(node, list):
        return node, len(node) if last == "-" else int(last)
    return node, last


def _add(parent: Any, key: Any, value: Any) -> None:
    """Insert; a new `metadata` goes first, where people look for it.

    Appending at the end moves the full-line comments that followed the old last entry (ruamel
    hangs them on it) to after the new one, so they stay above whatever came next.
    """
    if key == "metadata" and isinstance(parent, CommentedMap) and key not in parent:
        parent.insert(0, key, value)
        return
    appending = key == len(parent) if isinstance(parent, list) else key not in parent
    moved = _trailing_comment(parent, None, None) if appending and _nonempty(parent) else ""
    if isinstance(parent, list):
        parent.insert(key, value)
    else:
        parent[key] = value
    if moved:
        _attach_comment(parent, moved)


def _remove(parent: Any, key: Any, pending: list[tuple[Any, str]]) -> None:
    """Remove `key`, keeping the full-line comments that ruamel had hung on it."""
    comment = _trailing_comment(parent[key], parent, key)
    keys = list(range(len(parent))) if isinstance(parent, list) else list(parent)
    position = keys.index(key)
    del parent[key]
    if not comment:
        return
    if position == len(keys) - 1:
        pending.append((parent, comment))  # after the other edits: new keys may follow
    elif position > 0:
        _attach_after(parent, keys[position - 1], comment)


def _attach_after(parent: Any, key: Any, comment: str) -> None:
    if _nonempty(parent[key]):
        _attach_comment(parent[key], comment)
    else:
        _hang(parent, key, comment)


def _trailing_comment(value: Any, parent: Any, key: Any) -> str:
    holder, last = _deepest_last(value) if _nonempty(value) else (parent, key)
    token = _token(holder, last)
    if token is None or "\n" not in token.value:
        return ""
    first, rest = token.value.split("\n", 1)
    token.value = first + "\n"
    return rest


def _nonempty(value: Any) -> bool:
    return isinstance(value, (CommentedMap, CommentedSeq)) and len(value) > 0


def _deepest_last(node: Any) -> tuple[Any, Any]:
    while True:
        last = len(node) - 1 if isinstance(node, list) else list(node)[-1]
        child = node[last]
        if not _nonempty(child):
            return node, last
        node = child


def _token(holder: Any, key: Any) -> CommentToken | None:
    entry = holder.ca.items.get(key) if hasattr(holder, "ca") else None
    if not entry:
        return None
    token = entry[0] if isinstance(holder, list) else entry[2]
    return token if isinstance(token, CommentToken) else None


def _attach_comment(container: Any, comment: str) -> None:
    """Hang full-line comments after the last scalar of `container` (dropped if it is empty)."""
    if not _nonempty(container) or not comment.strip():
        return
    holder, last = _deepest_last(container)
    _hang(holder, last, comment)


def _hang(holder: Any, last: Any, comment: str) -> None:
    token = _token(holder, last)
    if token is not None:
        token.value = token.value + comment
        return
    token = CommentToken("\n" + comment, CommentMark(0), None)
    slot = [token, None] if isinstance(holder, list) else [None, None, token, None]
    holder.ca.items[last] = slot


def to_node(value: JSON) -> Any:
    """Plain data as ruamel containers, so that comments can be hung on it."""
    if isinstance(value, dict):
        node = CommentedMap()
        for k, v in value.items():
            node[k] = to_node(v)
        return node
    if isinstance(value, list):
        return CommentedSeq(to_node(v) for v in value)
    return value
