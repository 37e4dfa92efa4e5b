"""CEL types for the static checker, and the signatures of every function dragate offers.

A type is a name (`int`, `kubernetes.Quantity`, `dyn`, a type parameter `A`) or a tuple:
`("list", elem)`, `("map", key, value)`, `("type", of)`. Only functions Kubernetes offers new
expressions are declared here (`NEW_IN`: from which target minor); anything else is an
undeclared reference, as in the API server, even when the runtime happens to implement it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Union

CelType = Union[str, tuple["CelType", ...]]  # noqa: UP007 - a recursive alias needs Union

DYN = "dyn"
ANY = "any"
"""google.protobuf.Any: a DRA attribute's value. Checked like dyn, but a different type for
the homogeneous-literal rule (`[attr, 5]` is refused)."""
BOOL, INT, UINT, DOUBLE, STRING, BYTES = "bool", "int", "uint", "double", "string", "bytes"
NULL, DURATION, TIMESTAMP = "null_type", "google.protobuf.Duration", "google.protobuf.Timestamp"
QUANTITY, SEMVER = "kubernetes.Quantity", "kubernetes.Semver"
DEVICE = "kubernetes.DRADevice"
PARAMS = frozenset({"A", "B"})
NUMBERS = (INT, UINT, DOUBLE)


def list_of(elem: CelType) -> CelType:
    return ("list", elem)


def map_of(key: CelType, value: CelType) -> CelType:
    return ("map", key, value)


DEVICE_FIELDS: Mapping[str, CelType] = {
    "driver": STRING,
    "attributes": map_of(STRING, map_of(STRING, ANY)),
    "capacity": map_of(STRING, map_of(STRING, QUANTITY)),
}
"""The DRA selector's `device` (dynamic-resource-allocation/cel, without consumable capacity)."""

TYPE_VALUES: Mapping[str, CelType] = {
    "int": INT,
    "uint": UINT,
    "double": DOUBLE,
    "bool": BOOL,
    "string": STRING,
    "bytes": BYTES,
    "null_type": NULL,
    "list": list_of(DYN),
    "map": map_of(DYN, DYN),
    "type": "type",
}
"""Type names usable as values (`type(x) == int`)."""

OBJECT_FIELDS: Mapping[str, Mapping[str, CelType]] = {DEVICE: DEVICE_FIELDS}

VARIABLE_TYPES: Mapping[str, CelType] = {"device": DEVICE}
"""Variables with a declared type in every environment; the others are declared per
environment (`TypeEnvironment`) or `dyn` (JSON data)."""


def object_type(name: str) -> CelType:
    """A schema object (cel-go's struct kind): fields from its environment's `objects`."""
    return ("object", name)


def is_object(kind: CelType) -> bool:
    return isinstance(kind, tuple) and kind[0] == "object"


@dataclass(frozen=True)
class TypeEnvironment:
    """The declared types of one evaluation context (a policy rule on one kind of object).

    `variables` gives variables their types (those absent are dyn); `objects` gives each
    object type's fields, as Kubernetes derives them from an OpenAPI schema; `kind` is the
    kind of `object`, so `object.kind == 'Pod'` has a known value (`kindtests`).
    """

    name: str = ""
    variables: Mapping[str, CelType] = field(default_factory=dict)
    objects: Mapping[str, Mapping[str, CelType]] = field(default_factory=dict)
    kind: str = ""


UNTYPED = TypeEnvironment()


def show(kind: CelType) -> str:
    """The type as cel-go prints it in messages: list(int), map(string, dyn)."""
    if is_object(kind):
        return str(kind[1])
    if isinstance(kind, tuple):
        return f"{kind[0]}({', '.join(show(k) for k in kind[1:])})"
    return kind


Overload = tuple[CelType | None, tuple[CelType, ...], CelType]
"""(receiver type or None for a global call, parameter types, result type)."""

_A, _B = "A", "B"
_LIST_A = list_of(_A)
_COMPARABLE = (INT, UINT, DOUBLE, STRING, BYTES, BOOL, DURATION, TIMESTAMP)
_ORDER: tuple[Overload, ...] = (
    *((None, (a, b), BOOL) for a in NUMBERS for b in NUMBERS),
    *((None, (t, t), BOOL) for t in _COMPARABLE if t not in NUMBERS),
)
_ARITHMETIC = tuple((None, (t, t), t) for t in NUMBERS)


def _methods(
    receiver: CelType, table: Mapping[str, tuple[tuple[CelType, ...], CelType]]
) -> dict[str, list[Overload]]:
    return {name: [(receiver, params, result)] for name, (params, result) in table.items()}


def _merge(*tables: Mapping[str, list[Overload]]) -> dict[str, list[Overload]]:
    merged: dict[str, list[Overload]] = {}
    for table in tables:
        for name, overloads in table.items():
            merged.setdefault(name, []).extend(overloads)
    return merged


_OPERATORS: dict[str, list[Overload]] = {
    "_==_": [(None, (_A, _A), BOOL)],
    "_!=_": [(None, (_A, _A), BOOL)],
    **{op: list(_ORDER) for op in ("_<_", "_<=_", "_>_", "_>=_")},
    "_+_": [
        *_ARITHMETIC,
        (None, (STRING, STRING), STRING),
        (None, (BYTES, BYTES), BYTES),
        (None, (_LIST_A, _LIST_A), _LIST_A),
        (None, (DURATION, DURATION), DURATION),
        (None, (TIMESTAMP, DURATION), TIMESTAMP),
        (None, (DURATION, TIMESTAMP), TIMESTAMP),
    ],
    "_-_": [
        *_ARITHMETIC,
        (None, (DURATION, DURATION), DURATION),
        (None, (TIMESTAMP, TIMESTAMP), DURATION),
        (None, (TIMESTAMP, DURATION), TIMESTAMP),
    ],
    "_*_": list(_ARITHMETIC),
    "_/_": list(_ARITHMETIC),
    "_%_": [(None, (INT, INT), INT), (None, (UINT, UINT), UINT)],
    "-_": [(None, (INT,), INT), (None, (DOUBLE,), DOUBLE)],
    "!_": [(None, (BOOL,), BOOL)],
    "_&&_": [(None, (BOOL, BOOL), BOOL)],
    "_||_": [(None, (BOOL, BOOL), BOOL)],
    "_?_:_": [(None, (BOOL, _A, _A), _A)],
    "_[_]": [(None, (_LIST_A, INT), _A), (None, (map_of(_A, _B), _A), _B)],
    "@in": [(None, (_A, _LIST_A), BOOL), (None, (_A, map_of(_A, _B)), BOOL)],
}

_SIZED = (STRING, BYTES, _LIST_A, map_of(_A, _B))
_CONVERSIONS: dict[str, list[Overload]] = {
    "size": [*((None, (t,), INT) for t in _SIZED), *((t, (), INT) for t in _SIZED)],
    "int": [(None, (t,), INT) for t in (INT, UINT, DOUBLE, STRING, TIMESTAMP)],
    "uint": [(None, (t,), UINT) for t in (INT, UINT, DOUBLE, STRING)],
    "double": [(None, (t,), DOUBLE) for t in (INT, UINT, DOUBLE, STRING)],
    "string": [
        (None, (t,), STRING) for t in (INT, UINT, DOUBLE, STRING, BOOL, BYTES, DURATION, TIMESTAMP)
    ],
    "bool": [(None, (t,), BOOL) for t in (BOOL, STRING)],
    "bytes": [(None, (t,), BYTES) for t in (BYTES, STRING)],
    "duration": [(None, (t,), DURATION) for t in (DURATION, STRING)],
    "timestamp": [(None, (t,), TIMESTAMP) for t in (TIMESTAMP, STRING, INT)],
    "dyn": [(None, (_A,), DYN)],
    "type": [(None, (_A,), ("type", _A))],
}

_STRINGS = _methods(
    STRING,
    {
        "contains": ((STRING,), BOOL),
        "startsWith": ((STRING,), BOOL),
        "endsWith": ((STRING,), BOOL),
        "matches": ((STRING,), BOOL),
        "charAt": ((INT,), STRING),
        "lowerAscii": ((), STRING),
        "upperAscii": ((), STRING),
        "trim": ((), STRING),
        "find": ((STRING,), STRING),
        "findAll": ((STRING,), list_of(STRING)),
    },
)
_STRINGS_MORE: dict[str, list[Overload]] = {
    "indexOf": [(STRING, (STRING,), INT), (STRING, (STRING, INT), INT), (_LIST_A, (_A,), INT)],
    "lastIndexOf": [(STRING, (STRING,), INT), (STRING, (STRING, INT), INT), (_LIST_A, (_A,), INT)],
    "replace": [(STRING, (STRING, STRING), STRING), (STRING, (STRING, STRING, INT), STRING)],
    "split": [(STRING, (STRING,), list_of(STRING)), (STRING, (STRING, INT), list_of(STRING))],
    "substring": [(STRING, (INT,), STRING), (STRING, (INT, INT), STRING)],
    "join": [(list_of(STRING), (), STRING), (list_of(STRING), (STRING,), STRING)],
    "findAll": [(STRING, (STRING, INT), list_of(STRING))],
    "matches": [(None, (STRING, STRING), BOOL)],
    "strings.quote": [(None, (STRING,), STRING)],
    "format": [(STRING, (list_of(_A),), STRING)],
}
_LISTS: dict[str, list[Overload]] = {
    # Kubernetes declares these per element type: sum for numbers and durations, the others
    # for every ordered type (so `['a'].sum()` and `[[1]].min()` are refused at create time).
    "isSorted": [(list_of(t), (), BOOL) for t in _COMPARABLE],
    "sum": [(list_of(t), (), t) for t in (INT, UINT, DOUBLE, DURATION)],
    "min": [(list_of(t), (), t) for t in _COMPARABLE],
    "max": [(list_of(t), (), t) for t in _COMPARABLE],
    "sets.contains": [(None, (_LIST_A, _LIST_A), BOOL)],
    "sets.equivalent": [(None, (_LIST_A, _LIST_A), BOOL)],
    "sets.intersects": [(None, (_LIST_A, _LIST_A), BOOL)],
}
_QUANTITY = _methods(
    QUANTITY,
    {
        "isInteger": ((), BOOL),
        "asInteger": ((), INT),
        "asApproximateFloat": ((), DOUBLE),
    },
)
_COMPARED: dict[str, list[Overload]] = {
    name: [(t, (t,), result) for t in (QUANTITY, SEMVER)]
    for name, result in (("isGreaterThan", BOOL), ("isLessThan", BOOL), ("compareTo", INT))
}
_QUANTITY_MATH: dict[str, list[Overload]] = {
    name: [(QUANTITY, (QUANTITY,), QUANTITY), (QUANTITY, (INT,), QUANTITY)]
    for name in ("add", "sub")
}


def optional_of(value: CelType) -> CelType:
    return ("optional_type", value)


_OPT_A = optional_of(_A)
_OPTIONALS: dict[str, list[Overload]] = {
    "optional.of": [(None, (_A,), _OPT_A)],
    "optional.ofNonZeroValue": [(None, (_A,), _OPT_A)],
    "optional.none": [(None, (), optional_of(DYN))],
    "hasValue": [(_OPT_A, (), BOOL)],
    "value": [(_OPT_A, (), _A)],
    "orValue": [(_OPT_A, (_A,), _A)],
    "or": [(_OPT_A, (_OPT_A,), _OPT_A)],
    "_dg_optentry": [(None, (_OPT_A,), _A)],  # optional_entries: `[?x]`, `{?k: x}`
    "_dg_optlist": [(None, (list_of(_A),), list_of(_A))],
    "_dg_optmap": [(None, (map_of(_A, _B),), map_of(_A, _B))],
}
IP, CIDR = "net.IP", "net.CIDR"
QUALIFIED_TYPE_VALUES: Mapping[str, CelType] = {IP: IP, CIDR: CIDR}
"""Type names with a package usable as values (`type(x) == net.IP`); `net` alone is no value."""
_NETWORK: dict[str, list[Overload]] = {
    "ip": [(None, (STRING,), IP), (CIDR, (), IP)],
    "isIP": [(None, (STRING,), BOOL)],
    "ip.isCanonical": [(None, (STRING,), BOOL)],
    "family": [(IP, (), INT)],
    **{
        name: [(IP, (), BOOL)]
        for name in (
            "isUnspecified",
            "isLoopback",
            "isLinkLocalMulticast",
            "isLinkLocalUnicast",
            "isGlobalUnicast",
        )
    },
    "cidr": [(None, (STRING,), CIDR)],
    "isCIDR": [(None, (STRING,), BOOL)],
    "containsIP": [(CIDR, (STRING,), BOOL), (CIDR, (IP,), BOOL)],
    "containsCIDR": [(CIDR, (STRING,), BOOL), (CIDR, (CIDR,), BOOL)],
    "prefixLength": [(CIDR, (), INT)],
    "masked": [(CIDR, (), CIDR)],
    "string": [(None, (IP,), STRING), (None, (CIDR,), STRING)],
}
URL = "kubernetes.URL"
_URLS: dict[str, list[Overload]] = {
    "url": [(None, (STRING,), URL)],
    "isURL": [(None, (STRING,), BOOL)],
    **{
        name: [(URL, (), STRING)]
        for name in ("getScheme", "getHost", "getHostname", "getPort", "getEscapedPath")
    },
    "getQuery": [(URL, (), map_of(STRING, list_of(STRING)))],
}
FORMAT = "kubernetes.NamedFormat"
_FORMATS: dict[str, list[Overload]] = {
    "format.named": [(None, (STRING,), optional_of(FORMAT))],
    "validate": [(FORMAT, (STRING,), optional_of(list_of(STRING)))],
    **{
        f"format.{name}": [(None, (), FORMAT)]
        for name in (
            "dns1123Label",
            "dns1123Subdomain",
            "dns1035Label",
            "qualifiedName",
            "dns1123LabelPrefix",
            "dns1123SubdomainPrefix",
            "dns1035LabelPrefix",
            "labelValue",
            "uri",
            "uuid",
            "byte",
            "date",
            "datetime",
        )
    },
}
_TIME: dict[str, list[Overload]] = {
    name: [(TIMESTAMP, (), INT), (TIMESTAMP, (STRING,), INT)]
    for name in (
        "getDate",
        "getDayOfMonth",
        "getDayOfWeek",
        "getDayOfYear",
        "getFullYear",
        "getHours",
        "getMilliseconds",
        "getMinutes",
        "getMonth",
        "getSeconds",
    )
}
for _name in ("getHours", "getMilliseconds", "getMinutes", "getSeconds"):
    _TIME[_name].append((DURATION, (), INT))
_CONSTRUCTORS: dict[str, list[Overload]] = {
    "quantity": [(None, (STRING,), QUANTITY)],
    "sign": [(None, (QUANTITY,), INT)],  # a global function: `sign(q)`, not `q.sign()`
    "isQuantity": [(None, (STRING,), BOOL)],
    "semver": [(None, (STRING,), SEMVER), (None, (STRING, BOOL), SEMVER)],
    "isSemver": [(None, (STRING,), BOOL), (None, (STRING, BOOL), BOOL)],
    **_methods(SEMVER, {"major": ((), INT), "minor": ((), INT), "patch": ((), INT)}),
}

_EXT_LISTS: dict[str, list[Overload]] = {
    "slice": [(_LIST_A, (INT, INT), _LIST_A)],
    "flatten": [(list_of(_LIST_A), (), _LIST_A), (list_of(DYN), (INT,), list_of(DYN))],
    "sort": [(list_of(t), (), list_of(t)) for t in _COMPARABLE],
    "reverse": [(_LIST_A, (), _LIST_A)],
    "distinct": [(_LIST_A, (), _LIST_A)],
    "lists.range": [(None, (INT,), list_of(INT))],
}
SORT_KEY_TYPES = _COMPARABLE
"""What a `sortBy` key may be (cel-go's @sortByAssociatedKeys overloads)."""
NEW_IN: Mapping[str, str] = {name: "1.35" for name in (*_EXT_LISTS, "sortBy")}
"""Function or macro -> the first target minor whose API server offers it to new expressions
(cel-go ext lists version 3: added in 1.34's environment, which 1.35 uses for new ones)."""

OVERLOADS: dict[str, list[Overload]] = _merge(
    _OPERATORS,
    _CONVERSIONS,
    _STRINGS,
    _STRINGS_MORE,
    _LISTS,
    _QUANTITY,
    _COMPARED,
    _QUANTITY_MATH,
    _CONSTRUCTORS,
    _TIME,
    _OPTIONALS,
    _NETWORK,
    _URLS,
    _FORMATS,
    _EXT_LISTS,
)
"""Function or operator name -> its overloads, as declared in Kubernetes' environment."""
