"""The normalized claim spec of a ResourceClaimTemplate, remembered by the template's content.

Every Pod of a workload names the same few templates, so without a memo each review would
normalize the same objects again (a tenth of a `/validate` review). The answer depends only
on the template's `apiVersion` and `spec` and on the label the caller gives, so it is
remembered per (label, apiVersion, the spec's JSON text): content, never identity, so the
Pods of many Deployments and the managed templates a rewrite builds anew per request share
an entry, and a template changed in any way (a new resourceVersion or not) misses.

JSON text tells apart what `==` conflates (1, 1.0 and True), and `==` tells apart what JSON
text conflates (NaN, infinities and None all become `null`; a tuple reads like a list): a
hit needs both the same text and a spec equal to a private copy of the one remembered. What
JSON cannot encode exactly (integers outside 64 bits, keys that are not strings, subclasses
of str, int, dict or list) is normalized every time. An error the template provokes is
remembered as its path and message and raised anew, so a malformed template is as cheap to
deny again; any other exception is not remembered.

The table is bounded (entries, and the size of a spec worth remembering) and shared by the
threads of a process: a lost race normalizes twice and stores the same answer.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import orjson

from webhook.engine.normalize import ObjectError, template_claim_spec
from webhook.types import ClaimSpec, Object

MAX_TEMPLATE_SPECS = 1024
"""Entries remembered; past this the table starts over (templates come from users)."""
MAX_SPEC_BYTES = 16 * 1024
"""A spec whose JSON text is longer is normalized every time: the table's memory stays
under MAX_TEMPLATE_SPECS x (twice this), and real templates are a few hundred bytes."""
_STRICT = (
    orjson.OPT_PASSTHROUGH_SUBCLASS
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
)
"""Whatever orjson would write as something it is not (a str subclass as a str, a dataclass
as a map) is refused instead, so it is normalized every time."""


@dataclass(frozen=True)
class _Remembered:
    spec: Any  # a private deep copy of the template's `spec`, compared on every hit
    answer: ClaimSpec | ObjectError


Key = tuple[str, str, bytes]
_table: dict[Key, _Remembered] = {}


def template_spec(template: Object, label: str) -> ClaimSpec:
    """`normalize.template_claim_spec(template, label)`, remembered by content."""
    raw = template.get("spec")
    key = _key(template.get("apiVersion", ""), raw, label)
    if key is None:
        return template_claim_spec(template, label)
    found = _table.get(key)
    if found is None or raw != found.spec:
        found = _remember(key, template, raw, label)
    if isinstance(found.answer, ObjectError):
        raise ObjectError(found.answer.path, found.answer.message)
    return found.answer


def forget() -> None:
    """Empty the table (tests; nothing in the webhook needs it)."""
    _table.clear()


def remembered() -> int:
    """How many specs are remembered now (tests check the bound)."""
    return len(_table)


def _key(api_version: Any, raw: Any, label: str) -> Key | None:
    """What the answer depends on, or None when it cannot be written down exactly."""
    if type(api_version) is not str:
        return None
    try:
        text = orjson.dumps(raw, option=_STRICT)
    except orjson.JSONEncodeError:
        return None
    return (label, api_version, text) if len(text) <= MAX_SPEC_BYTES else None


def _remember(key: Key, template: Object, raw: Any, label: str) -> _Remembered:
    answer: ClaimSpec | ObjectError
    try:
        answer = template_claim_spec(template, label)
    except ObjectError as error:
        answer = error
    found = _Remembered(copy.deepcopy(raw), answer)
    if len(_table) >= MAX_TEMPLATE_SPECS:
        _table.clear()
    _table[key] = found
    return found
