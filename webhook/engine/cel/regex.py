"""Regular expressions with RE2 semantics: `matches`, and Kubernetes' `find` / `findAll`.

Everything goes through google-re2, the same engine family as Go's `regexp`, so a policy never
meets catastrophic backtracking and patterns mean what they mean in the API server. Compiled
patterns are cached because the same few patterns run for every request.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any

import celpy.celtypes as ct
import re2

from webhook.engine.cel.errors import CelFunctionError
from webhook.engine.cel.values import expect

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a bad pattern is reported in the result, not on stderr


@lru_cache(maxsize=512)
def _compile(pattern: str) -> Any:
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error as error:
        reason = error.args[0] if error.args else error
        reason = reason.decode("utf-8", "replace") if isinstance(reason, bytes) else reason
        raise CelFunctionError(f"invalid regex {pattern!r}: {reason}") from None


def _args(text: Any, pattern: Any, function: str) -> tuple[str, Any]:
    subject = str(expect(text, ct.StringType, function))
    return subject, _compile(str(expect(pattern, ct.StringType, function)))


def matches(text: Any, pattern: Any) -> ct.BoolType:
    """True when the pattern matches anywhere in the text (unanchored, like CEL)."""
    subject, regex = _args(text, pattern, "matches")
    return ct.BoolType(regex.search(subject) is not None)


def find(text: Any, pattern: Any) -> ct.StringType:
    """The first match, or "" when there is none."""
    subject, regex = _args(text, pattern, "find")
    match = regex.search(subject)
    return ct.StringType(match.group(0) if match else "")


def find_all(text: Any, pattern: Any, limit: Any = None) -> ct.ListType:
    """All matches (at most `limit` when it is >= 0; 0 gives an empty list, as in Go)."""
    subject, regex = _args(text, pattern, "findAll")
    count = -1 if limit is None else int(expect(limit, ct.IntType, "findAll"))
    found: list[ct.StringType] = []
    previous_end = -1
    for match in regex.finditer(subject):
        if 0 <= count <= len(found):
            break
        if match.start() == match.end() == previous_end:
            continue  # Go drops an empty match that abuts the previous match
        found.append(ct.StringType(match.group(0)))
        previous_end = match.end()
    return ct.ListType(found)


FUNCTIONS: dict[str, Callable[..., Any]] = {"matches": matches, "find": find, "findAll": find_all}
