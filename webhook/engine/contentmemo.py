"""Normalized claim specs remembered by the content they are read from.

Every Pod of a workload names the same few templates, and the claims made from a template are
alike, so without a memo each review would normalize the same content again (a tenth of a
`/validate` review). The answer depends only on the object's `apiVersion` and `spec` and on
the caller's label, so it is remembered per (apiVersion, label, the spec's JSON text), a table
for templates and one for claims: content, never identity, so the Pods of many Deployments and
the managed templates a rewrite builds anew per request share an entry, and an object changed
in any way (a new resourceVersion or not) misses. (A Pod's own spec is not remembered: writing
it as JSON and comparing it costs more than reading its claims.)

JSON text tells apart what `==` conflates (1, 1.0 and True), and `==` tells apart what JSON
text conflates (NaN, infinities and None all become `null`; a tuple reads like a list): a
hit needs both the same text and content equal to a private copy of the one remembered. What
JSON cannot encode exactly (integers outside 64 bits, keys that are not strings, subclasses
of str, int, dict or list) is normalized every time. An error the content provokes is
remembered as its path and message and raised anew, so a malformed object is as cheap to deny
again; any other exception is not remembered.

Each table is bounded (entries, bytes, and the size of content worth remembering), owned by
the policy set under which the content was reviewed (`TEMPLATE_SPECS` and `CLAIM_SPECS`,
slots of its `memos`), and shared by the threads of a process: a lost race normalizes twice
and stores the same answer.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import orjson

from webhook.engine import normalize
from webhook.engine.normalize import ObjectError, template_claim_spec
from webhook.types import ClaimSpec, Object
from webhook.types.memos import Memos, Slot

T = TypeVar("T")

MAX_ENTRIES = 1024
"""Entries one table remembers; past this (or MAX_BYTES) it starts over."""
MAX_BYTES = 8 * 2**20
"""JSON text one table keeps, counted twice (the text and the private copy)."""
MAX_CONTENT_BYTES = 16 * 1024
"""Content whose JSON text is longer is normalized every time (real templates are a few
hundred bytes)."""
_STRICT = (
    orjson.OPT_PASSTHROUGH_SUBCLASS
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
)
"""Whatever orjson would write as something it is not (a str subclass as a str, a dataclass
as a map) is refused instead, so it is normalized every time."""


@dataclass(frozen=True)
class _Remembered(Generic[T]):
    content: Any  # a private deep copy of what was read, compared on every hit
    answer: T | ObjectError


Key = tuple[Hashable, bytes]


class ContentMemo(Generic[T]):
    """`compute()` remembered per (what else it reads, JSON text of the content it reads)."""

    def __init__(self, max_entries: int = MAX_ENTRIES, max_bytes: int = MAX_BYTES) -> None:
        self._table: dict[Key, _Remembered[T]] = {}
        self._bytes = 0
        self._max_entries = max_entries
        self._max_bytes = max_bytes

    def get(self, besides: Hashable, content: Any, compute: Callable[[], T]) -> T:
        """The answer of `compute()`, which must read nothing but `content` and `besides`."""
        key = _key(besides, content)
        if key is None:
            return compute()
        found = self._table.get(key)
        if found is None or content != found.content:
            found = self._remember(key, content, compute)
        if isinstance(found.answer, ObjectError):
            raise ObjectError(found.answer.path, found.answer.message)
        return found.answer

    def forget(self) -> None:
        """Empty the table (tests; nothing in the webhook needs it)."""
        self._table.clear()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._table)

    def _remember(self, key: Key, content: Any, compute: Callable[[], T]) -> _Remembered[T]:
        answer: T | ObjectError
        try:
            answer = compute()
        except ObjectError as error:
            answer = error
        found = _Remembered(copy.deepcopy(content), answer)
        size = 2 * len(key[1])
        if len(self._table) >= self._max_entries or self._bytes + size > self._max_bytes:
            self.forget()
        self._table[key] = found
        self._bytes += size
        return found


def _key(besides: Hashable, content: Any) -> Key | None:
    """What the answer depends on, or None when it cannot be written down exactly."""
    try:
        text = orjson.dumps(content, option=_STRICT)
    except orjson.JSONEncodeError:
        return None
    return (besides, text) if len(text) <= MAX_CONTENT_BYTES else None


TEMPLATE_SPECS: Slot[ContentMemo[ClaimSpec]] = Slot("template specs", ContentMemo[ClaimSpec])
CLAIM_SPECS: Slot[ContentMemo[ClaimSpec]] = Slot("claim specs", ContentMemo[ClaimSpec])


def template_spec(template: Object, label: str, memos: Memos) -> ClaimSpec:
    """`normalize.template_claim_spec(template, label)`, remembered by content in `memos`."""
    return _by_content(TEMPLATE_SPECS, template, label, memos, template_claim_spec)


def claim_spec(claim: Object, label: str, memos: Memos) -> ClaimSpec:
    """`normalize.claim_spec(claim, label)`, remembered by content in `memos`: the claims
    made from one template (a workload's) are alike."""
    return _by_content(CLAIM_SPECS, claim, label, memos, normalize.claim_spec)


def _by_content(
    slot: Slot[ContentMemo[ClaimSpec]],
    obj: Object,
    label: str,
    memos: Memos,
    read: Callable[[Object, str], ClaimSpec],
) -> ClaimSpec:
    """`read(obj, label)`, which reads only the object's `apiVersion` and `spec`."""
    api_version = obj.get("apiVersion", "")
    if type(api_version) is not str:
        return read(obj, label)
    return memos.of(slot).get((api_version, label), obj.get("spec"), lambda: read(obj, label))


def remembered(memos: Memos, slot: Slot[ContentMemo[ClaimSpec]] = TEMPLATE_SPECS) -> int:
    """Specs remembered now in `memos` (tests check the bound)."""
    return len(memos.of(slot))
