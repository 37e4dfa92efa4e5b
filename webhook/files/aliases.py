"""A bound on how much YAML aliases may expand: the "billion laughs" guard.

ruamel's loader builds an aliased node once and shares it, so parsing is linear; but turning
the tree into plain values copies every alias, and nine lines of `&a [*b, *b, ...]` become
10^9 nodes. In a policy file that froze the reload thread (memory climbing, /readyz still
"current", later changes never picked up). So before copying, the expanded size is measured
in one linear pass over the shared tree and a document whose aliases add more than
MAX_ALIAS_GROWTH nodes is refused like any other invalid YAML. Anchors used the ordinary way
(a shared `resources:` block, a merge key) add a few dozen.

Relies on (checked with ruamel.yaml 0.19.1; canaries: tests/canary/test_ruamel.py):
- `ruamel.yaml aliases shared`: an alias loads as the anchored object itself, and one to an
  enclosing node as null (so the tree has no cycle).
"""

from __future__ import annotations

from typing import Any

MAX_ALIAS_GROWTH = 10_000
"""Nodes (each KiB of a long string counts as one more) that copying aliases may add."""
LONG_STRING = 1024
"""Strings this long are counted by size and by identity: one aliased often costs its copies."""


class AliasBomb(ValueError):
    """A document whose aliases expand beyond the bound."""


def check_alias_growth(root: Any) -> None:
    """Raise AliasBomb when the plain copy of `root` would exceed its own size by too much."""
    sizes = _Sizes()
    expanded = sizes.total(root)
    growth = expanded - sizes.physical
    if growth > MAX_ALIAS_GROWTH:
        raise AliasBomb(
            f"aliases expand to {growth} more nodes than the document has (at most "
            f"{MAX_ALIAS_GROWTH}); write the repeated values out instead"
        )


class _Sizes:
    """Expanded sizes of shared nodes, memoized by identity, and the size without sharing."""

    def __init__(self) -> None:
        self.physical = 0
        self._totals: dict[int, int] = {}  # ruamel never builds a cycle: an alias to an
        # enclosing node loads as null

    def total(self, node: Any) -> int:
        if isinstance(node, dict):
            return self._shared(node, [*node.keys(), *node.values()])
        if isinstance(node, list):
            return self._shared(node, node)
        if isinstance(node, str) and len(node) >= LONG_STRING:
            return self._shared(node, [], own=1 + len(node) // LONG_STRING)
        self.physical += 1  # small scalars: counted wherever they appear, shared or not
        return 1

    def _shared(self, node: Any, children: list[Any], own: int = 1) -> int:
        key = id(node)
        if key in self._totals:
            return self._totals[key]
        self.physical += own
        total = own + sum(self.total(child) for child in children)
        self._totals[key] = total
        return total
