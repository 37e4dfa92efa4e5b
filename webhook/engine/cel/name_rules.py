"""Kubernetes' string validations behind the named-format CEL library, with their messages.

The rules and message texts are those of k8s.io/apimachinery's `util/validation` and
`api/validation` (and kube-openapi's strfmt for the OpenAPI formats), because a CEL
`format.<name>().validate(s)` returns those very strings to the user. Since Kubernetes 1.35
qualified names and label values are checked by `api/validate/content` (lengths "in bytes",
"a valid label key"), the names of objects still by `util/validation` ("characters").
Each function returns the list of problems, empty when the string is valid. Lengths are in
bytes and patterns match the whole string, as Go's `len` and anchored `regexp` do.
"""

from __future__ import annotations

import re
from collections.abc import Callable

_QNAME = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QNAME_MESSAGE = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start "
    "and end with an alphanumeric character"
)
_LABEL_VALUE = f"({_QNAME})?"
_LABEL_VALUE_MESSAGE = (
    "a valid label must be an empty string or consist of alphanumeric "
    "characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character"
)
_DNS1123_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL_MESSAGE = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric "
    "characters or '-', and must start and end with an alphanumeric "
    "character"
)
_DNS1123_SUBDOMAIN = _DNS1123_LABEL + "(\\." + _DNS1123_LABEL + ")*"
_DNS1123_SUBDOMAIN_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case "
    "alphanumeric characters, '-' or '.', and must start and end "
    "with an alphanumeric character"
)
_DNS1035_LABEL = "[a-z]([-a-z0-9]*[a-z0-9])?"
_DNS1035_LABEL_MESSAGE = (
    "a DNS-1035 label must consist of lower case alphanumeric characters "
    "or '-', start with an alphabetic character, and end with an "
    "alphanumeric character"
)
_LABEL_MAX, _SUBDOMAIN_MAX = 63, 253

Rule = Callable[[str], list[str]]


def _matches(pattern: str, value: str) -> bool:
    return re.fullmatch(pattern, value) is not None


def _size(value: str) -> int:
    return len(value.encode("utf-8", "surrogatepass"))


def regex_error(message: str, pattern: str, *examples: str) -> str:
    """apimachinery's RegexError: the message, the examples, then the pattern."""
    if not examples:
        return f"{message} (regex used for validation is '{pattern}')"
    shown = " or ".join(f"'{example}', " for example in examples)
    return f"{message} (e.g. {shown}regex used for validation is '{pattern}')"


def max_len_error(length: int) -> str:
    return f"must be no more than {length} characters"


def content_max_len_error(length: int) -> str:
    """apimachinery's `api/validate/content` (label keys and values since Kubernetes 1.35)."""
    return f"must be no more than {length} bytes"


def _content_subdomain(value: str) -> list[str]:
    """A label key's prefix: a DNS subdomain, its length message in bytes."""
    problems = dns1123_subdomain(value)
    if _size(value) > _SUBDOMAIN_MAX:
        problems[0] = content_max_len_error(_SUBDOMAIN_MAX)
    return problems


def dns1123_label(value: str) -> list[str]:
    errors = [max_len_error(_LABEL_MAX)] if _size(value) > _LABEL_MAX else []
    if not _matches(_DNS1123_LABEL, value):
        if _matches(_DNS1123_SUBDOMAIN, value):
            errors.append("must not contain dots")
        else:
            errors.append(regex_error(_DNS1123_LABEL_MESSAGE, _DNS1123_LABEL, "my-name", "123-abc"))
    return errors


def dns1123_subdomain(value: str) -> list[str]:
    errors = [max_len_error(_SUBDOMAIN_MAX)] if _size(value) > _SUBDOMAIN_MAX else []
    if not _matches(_DNS1123_SUBDOMAIN, value):
        errors.append(regex_error(_DNS1123_SUBDOMAIN_MESSAGE, _DNS1123_SUBDOMAIN, "example.com"))
    return errors


def dns1035_label(value: str) -> list[str]:
    errors = [max_len_error(_LABEL_MAX)] if _size(value) > _LABEL_MAX else []
    if not _matches(_DNS1035_LABEL, value):
        errors.append(regex_error(_DNS1035_LABEL_MESSAGE, _DNS1035_LABEL, "my-name", "abc-123"))
    return errors


def _qualified_name_error(qualifier: str) -> str:
    return qualifier + regex_error(_QNAME_MESSAGE, _QNAME, "MyName", "my.name", "123-abc")


def qualified_name(value: str) -> list[str]:
    parts = value.split("/")
    if len(parts) > 2:
        return [
            _qualified_name_error("a valid label key ")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    errors: list[str] = []
    if len(parts) == 2:
        prefix = parts[0]
        problems = _content_subdomain(prefix) if prefix else ["must be non-empty"]
        errors.extend("prefix part " + problem for problem in problems)
    name = parts[-1]
    if not name:
        errors.append("name part must be non-empty")
    elif _size(name) > _LABEL_MAX:
        errors.append("name part " + content_max_len_error(_LABEL_MAX))
    if not _matches(_QNAME, name):
        errors.append(_qualified_name_error("name part "))
    return errors


def label_value(value: str) -> list[str]:
    errors = [content_max_len_error(_LABEL_MAX)] if _size(value) > _LABEL_MAX else []
    if not _matches(_LABEL_VALUE, value):
        errors.append(
            regex_error(_LABEL_VALUE_MESSAGE, _LABEL_VALUE, "MyValue", "my_value", "12345")
        )
    return errors


def as_prefix(rule: Rule) -> Rule:
    """A name used with generateName may end in '-': apimachinery masks that before checking.

    The mask drops the last two bytes and appends 'a', exactly as `maskTrailingDash` does.
    """

    def check(value: str) -> list[str]:
        if len(value) > 1 and value.endswith("-"):
            value = value[:-2] + "a"
        return rule(value)

    return check
