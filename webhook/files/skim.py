"""Telling from a document's text alone that `dragate migrate` leaves it as it is.

Loading a document with ruamel's round-trip loader is most of what a migration costs, and most
documents in a repository (Services, ConfigMaps, CPU-only workloads) never change. The rewriter
acts only on objects whose keys contain one of its mappings' resource names or prefixes
(`webhook.rewrite.resource_markers`); the CLI adds the `kind` value it looks for among
existing documents. Such a key or value is in the text verbatim: line folding only ever adds
spaces or newlines, which no marker holds, and only an escape in a double-quoted scalar
(`"nvidia.com/\\x67pu"`) can spell it otherwise. So a body is skipped when no marker is in its
text, it cannot hold an escape, and libyaml reads it as at most one plain document
(`webhook.files.plainyaml`: one ruamel surely loads alike); it is then copied as it is, never
loaded by ruamel nor rewritten.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from webhook.files.plainyaml import LOADER, read_document

_SAFE_MARKER = re.compile(r"[A-Za-z0-9._/-]+")


def skipper(markers: Sequence[str]) -> Callable[[str], bool] | None:
    """A `skip` rule for `parse_stream`, or None when it cannot be made safely.

    None without libyaml, or when a marker holds anything but letters, digits and `._/-`
    (a space or quote could be folded or escaped into a key without showing in the text).
    """
    if LOADER is None or not markers or not all(_SAFE_MARKER.fullmatch(m) for m in markers):
        return None
    wanted = tuple(dict.fromkeys(markers))

    def skip(body: str) -> bool:
        if any(marker in body for marker in wanted) or ("\\" in body and '"' in body):
            return False
        return plain_document(body)

    return skip


def plain_document(body: str) -> bool:
    """Whether libyaml reads `body` as at most one document that ruamel surely loads alike."""
    return read_document(body) is not None
