"""The rewrite as a JSON patch (RFC 6902), in time linear in the size of the object.

A general list diff (jsonpatch's) looks for moved items and costs quadratic time: a Pod with
4,000 containers took seconds. The rewrite never reorders anything, so lists of equal length are
compared item by item and a list whose length changed is replaced whole. A member equal on
both sides (one comparison in C) is not descended into: most of a rewritten Pod is unchanged.

`apply_copied` goes the other way, for the admission fast path (`podedits`): a patch applied to
a copy that shares everything the patch does not touch.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from webhook.types import Deadline
from webhook.types.adapters import NEVER

Operation = dict[str, Any]


def make_patch(
    old: Any, new: Any, path: str = "", *, deadline: Deadline = NEVER
) -> list[Operation]:
    """Operations that turn `old` into `new` (at `path`, a JSON pointer, inside a document);
    `deadline` is passed at each."""
    if deadline is NEVER:
        return list(_diff(old, new, path))
    operations = []
    for operation in _diff(old, new, path):
        deadline.checkpoint("writing the patch")
        operations.append(operation)
    return operations


def _diff(old: Any, new: Any, path: str) -> Iterator[Operation]:
    if type(old) is not type(new):
        yield {"op": "replace", "path": path, "value": new}
    elif isinstance(old, dict):
        yield from _diff_dicts(old, new, path)
    elif isinstance(old, list):
        if len(old) != len(new):
            yield {"op": "replace", "path": path, "value": new}
            return
        for index, (before, after) in enumerate(zip(old, new, strict=True)):
            yield from _diff(before, after, f"{path}/{index}")
    elif old != new:
        yield {"op": "replace", "path": path, "value": new}


def _diff_dicts(old: dict[str, Any], new: dict[str, Any], path: str) -> Iterator[Operation]:
    for key in old:
        if key not in new:
            yield {"op": "remove", "path": f"{path}/{escape(key)}"}
    for key, value in new.items():
        if key not in old:
            yield {"op": "add", "path": f"{path}/{escape(key)}", "value": value}
        elif old[key] != value or type(old[key]) is not type(value):
            yield from _diff(old[key], value, f"{path}/{escape(key)}")


def escape(key: Any) -> str:
    """A JSON pointer token: `~` and `/` escaped (annotation keys have slashes)."""
    return str(key).replace("~", "~0").replace("/", "~1")


def unescape(token: str) -> str:
    """The key a JSON pointer token stands for (`escape` undone)."""
    return token.replace("~1", "/").replace("~0", "~") if "~" in token else token


_ATOMS = frozenset({str, int, float, bool, type(None)})


def copy_tree(node: Any) -> Any:
    """A deep copy of a JSON-shaped tree, a few times faster than `copy.deepcopy` (each review
    of a Pod copies it). Plain dicts, lists and scalars are copied here; anything else goes
    to `copy.deepcopy`. Nesting is bounded by Python's recursion limit, as with deepcopy."""
    kind = type(node)
    if kind is dict:  # scalars inline: most of a tree, and a call each otherwise
        return {k: v if type(v) in _ATOMS else copy_tree(v) for k, v in node.items()}
    if kind is list:
        return [v if type(v) in _ATOMS else copy_tree(v) for v in node]
    return node if kind in _ATOMS else copy.deepcopy(node)


Key = str | int
Trie = dict[Key, "Trie"]


@dataclass(frozen=True)
class Steps:
    """Operations parsed once, to apply to any document shaped like the one they were made for:
    the dicts and lists on their paths (a trie of keys below the root), and each operation
    with the keys to its parent (list indices as ints) and its last key."""

    copies: Trie
    operations: tuple[tuple[tuple[Key, ...], Key, Operation], ...]


def steps(root: Any, operations: Sequence[Operation], deadline: Deadline = NEVER) -> Steps:
    """`operations` (as `make_patch` writes them for `root`) made ready for `apply_copied`;
    `deadline` is passed at each.

    Raises ValueError for one `make_patch` writes only for other documents: an `add` to a
    list, or a replacement of the root itself."""
    copies: Trie = {}
    parsed = []
    for operation in operations:
        deadline.checkpoint("parsing the patch")
        node: Any = root
        keys: list[Key] = []
        for token in (unescape(t) for t in operation["path"].split("/")[1:]):
            if keys:
                node = node[keys[-1]]
            keys.append(int(token) if isinstance(node, list) else token)
        if not keys or (operation["op"] == "add" and isinstance(node, list)):
            raise ValueError(f"not an operation apply_copied takes: {operation}")
        trie = copies
        for key in keys[:-1]:
            trie = trie.setdefault(key, {})
        parsed.append((tuple(keys[:-1]), keys[-1], operation))
    return Steps(copies, tuple(parsed))


def apply_copied(
    root: Any, parsed: Steps, at: str = "", deadline: Deadline = NEVER
) -> tuple[Any, list[Operation]]:
    """`root` with the operations applied, and the operations as applied (paths under `at`),
    each carrying the value it placed, as `make_patch` between the two would.

    Copy on write: `root` is not changed; each dict or list on an operation's path is copied
    once (shallow), each value placed is a copy of its own (`copy_tree`), and everything else
    is shared with `root`, which must have the shape the steps were parsed for. `deadline` is
    passed at each operation.
    """
    if not parsed.operations:
        return root, []
    new = _copied(root, parsed.copies)
    applied = []
    for parents, last, operation in parsed.operations:
        deadline.checkpoint("applying the patch")
        node = new
        for key in parents:
            node = node[key]
        path = at + operation["path"]
        if operation["op"] == "remove":
            del node[last]
            applied.append({"op": "remove", "path": path})
        else:
            node[last] = value = copy_tree(operation["value"])
            applied.append({"op": operation["op"], "path": path, "value": value})
    return new, applied


def _copied(node: Any, below: Trie) -> Any:
    new = node.copy()
    for key, further in below.items():
        new[key] = _copied(new[key], further)
    return new
