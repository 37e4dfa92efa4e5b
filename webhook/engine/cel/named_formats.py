"""Kubernetes' named-format CEL library (k8s.io/apiserver/pkg/cel/library format.go).

`format.named(name)` is an optional NamedFormat, `format.<name>()` the format itself, and
`f.validate(s)` is none when `s` is valid, else the list of Kubernetes' own messages, so a
CRD rule's messageExpression shows what the API server would. The name formats come from
`name_rules`; the OpenAPI formats (uri, uuid, byte, date, datetime) follow kube-openapi's
strfmt checks, which answer only yes or no.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import celpy.celtypes as ct

from webhook.engine.cel import name_rules
from webhook.engine.cel.optionals import NONE, Optional
from webhook.engine.cel.request_uri import go_quote, request_uri_error
from webhook.engine.cel.values import expect, register_value_type

_UUID = re.compile(
    r"[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}", re.IGNORECASE | re.ASCII
)
_BASE64 = re.compile(
    r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|"
    r"[A-Za-z0-9+/]{4})"
)
_DATE = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})")
_TIME = re.compile(r"([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))\Z")
_MONTH_DAYS = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


class NamedFormat:
    """kubernetes.NamedFormat: equal when the names are, as in the apiserver."""

    CEL_TYPE_NAME = "kubernetes.NamedFormat"
    __slots__ = ("name", "rule")

    def __init__(self, name: str, rule: name_rules.Rule) -> None:
        self.name, self.rule = name, rule

    def __eq__(self, other: object) -> bool:
        return isinstance(other, NamedFormat) and self.name == other.name

    def __hash__(self) -> int:
        return hash(self.name)

    def __str__(self) -> str:
        return self.name


register_value_type(NamedFormat)


def _is_date(text: str) -> bool:
    """Go's time.Parse("2006-01-02"): four-digit year, real month, a day the month has."""
    found = _DATE.fullmatch(text)
    if found is None:
        return False
    year, month, day = (int(part) for part in found.groups())
    if not 1 <= month <= 12:
        return False
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    return 1 <= day <= _MONTH_DAYS[month - 1] + (month == 2 and leap)


def _is_datetime(text: str) -> bool:
    """strfmt's IsDateTime: a date, a 't', then a time whose fields compare as text."""
    parts = text.lower().split("t")
    if len(text) < 4 or len(parts) < 2 or not _is_date(parts[0]):
        return False
    found = _TIME.match(parts[1])
    return found is not None and (found[1] <= "23" and found[2] <= "59" and found[3] <= "59")


def _yes_no(check: Callable[[str], bool], message: str) -> name_rules.Rule:
    return lambda text: [] if check(text) else [message]


def _uri(text: str) -> list[str]:
    error = request_uri_error(text)
    return [] if error is None else [f"parse {go_quote(text)}: {error}"]


_RULES: dict[str, tuple[str, name_rules.Rule]] = {
    "dns1123Label": ("DNS1123Label", name_rules.dns1123_label),
    "dns1123Subdomain": ("DNS1123Subdomain", name_rules.dns1123_subdomain),
    "dns1035Label": ("DNS1035Label", name_rules.dns1035_label),
    "qualifiedName": ("QualifiedName", name_rules.qualified_name),
    "dns1123LabelPrefix": ("DNS1123LabelPrefix", name_rules.as_prefix(name_rules.dns1123_label)),
    "dns1123SubdomainPrefix": (
        "DNS1123SubdomainPrefix",
        name_rules.as_prefix(name_rules.dns1123_subdomain),
    ),
    "dns1035LabelPrefix": ("DNS1035LabelPrefix", name_rules.as_prefix(name_rules.dns1035_label)),
    "labelValue": ("LabelValue", name_rules.label_value),
    "uri": ("URI", _uri),
    "uuid": (
        "uuid",
        _yes_no(lambda t: _UUID.fullmatch(t) is not None, "does not match the UUID format"),
    ),
    "byte": ("byte", _yes_no(lambda t: _BASE64.fullmatch(t) is not None, "invalid base64")),
    "date": ("date", _yes_no(_is_date, "invalid date")),
    "datetime": ("datetime", _yes_no(_is_datetime, "invalid datetime")),
}

FORMATS: dict[str, NamedFormat] = {
    key: NamedFormat(name, rule) for key, (name, rule) in _RULES.items()
}
"""The names `format.named` knows, case-sensitive, each also a `format.<name>()` function."""


def named(name: Any) -> Optional:
    found = FORMATS.get(str(expect(name, ct.StringType, "format.named")))
    return NONE if found is None else Optional(found, present=True)


def validate(receiver: Any, text: Any) -> Optional:
    named_format = expect(receiver, NamedFormat, "validate")
    problems = named_format.rule(str(expect(text, ct.StringType, "validate")))
    if not problems:
        return NONE
    return Optional(ct.ListType([ct.StringType(p) for p in problems]), present=True)


def _constant(named_format: NamedFormat) -> Callable[[], NamedFormat]:
    return lambda: named_format


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "format.named": named,
    "validate": validate,
    **{f"format.{key}": _constant(value) for key, value in FORMATS.items()},
}
