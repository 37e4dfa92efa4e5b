"""dragate's answer for a differential case, in the oracle's answer format.

Values are encoded exactly as the oracle encodes cel-go values: {"t": CEL type name, "v": ...}
with ints as text, doubles as text, maps as [key, value] pairs and library types as text.
"""

from __future__ import annotations

import base64
import datetime
from collections.abc import Mapping
from typing import Any

import celpy.celtypes as ct

from fidelity.cel.cases import Case
from webhook.engine.cel import CelCompileError, compile_expression, device_to_cel
from webhook.engine.cel.optionals import Optional


def _rfc3339(value: datetime.datetime) -> str:
    utc = value.astimezone(datetime.UTC)
    text = utc.strftime("%Y-%m-%dT%H:%M:%S")
    if utc.microsecond:
        text += f".{utc.microsecond:06d}".rstrip("0")
    return text + "Z"


_SCALARS: tuple[tuple[type, str, Any], ...] = (
    (ct.BoolType, "bool", bool),
    (ct.IntType, "int", lambda v: str(int(v))),
    (ct.UintType, "uint", lambda v: str(int(v))),
    (ct.DoubleType, "double", lambda v: repr(float(v))),
    (ct.StringType, "string", str),
    (ct.BytesType, "bytes", lambda v: base64.b64encode(bytes(v)).decode()),
    (
        ct.DurationType,
        "google.protobuf.Duration",
        lambda v: str((v.days * 86400 + v.seconds) * 10**9 + v.microseconds * 1000),
    ),
    (ct.TimestampType, "google.protobuf.Timestamp", _rfc3339),
)

_TYPE_NAMES = {
    ct.BoolType: "bool",
    ct.IntType: "int",
    ct.UintType: "uint",
    ct.DoubleType: "double",
    ct.StringType: "string",
    ct.BytesType: "bytes",
    ct.ListType: "list",
    ct.MapType: "map",
    ct.DurationType: "google.protobuf.Duration",
    ct.TimestampType: "google.protobuf.Timestamp",
    ct.TypeType: "type",
    type(None): "null_type",
}


def encode(value: Any) -> dict[str, Any]:  # noqa: PLR0911 - one return per kind of value
    """A celpy / dragate library value as the oracle's tagged JSON."""
    if value is None:
        return {"t": "null_type", "v": None}
    if isinstance(value, type):
        return {"t": "type", "v": _TYPE_NAMES.get(value, getattr(value, "CEL_TYPE_NAME", "?"))}
    for kind, name, convert in _SCALARS:
        if isinstance(value, kind):
            return {"t": name, "v": convert(value)}
    if isinstance(value, Optional):
        return {"t": "optional_type", "v": [encode(value.value)] if value.present else None}
    if isinstance(value, Mapping):
        return {"t": "map", "v": [[encode(k), encode(v)] for k, v in value.items()]}
    if isinstance(value, list):
        return {"t": "list", "v": [encode(item) for item in value]}
    return {"t": getattr(type(value), "CEL_TYPE_NAME", type(value).__name__), "v": str(value)}


def _device(case: Case) -> Any:
    device = case.device or {}
    return device_to_cel(
        device.get("driver", ""), device.get("attributes", {}), device.get("capacity", {})
    )


def answer(case: Case, minor: str) -> dict[str, Any]:
    """What dragate, targeting `minor`, makes of the case: compile error, runtime error, or
    typed value."""
    is_device = case.env == "device"
    try:
        program = compile_expression(
            case.expr,
            variables=["device"] if is_device else [],
            expect_bool=is_device,
            environment="selector" if is_device else "kubernetes",
            minor=minor,
        )
    except CelCompileError as error:
        return {"compile_error": str(error)}
    activation = {"device": _device(case)} if is_device else {}
    value, failure = program.evaluate_cel(activation)
    if failure is not None:
        return {"error": failure}
    if is_device and not isinstance(value, ct.BoolType):
        return {"error": f"selector result is not a bool: {value!r}"}
    encoded = encode(value)
    return {"value": encoded, "type": encoded["t"]}
