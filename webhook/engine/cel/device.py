"""The DRA selector `device` variable, built from a ResourceSlice device.

Mirrors `dynamic-resource-allocation/cel/compile.go`: attribute and capacity names are split
at the first `/` into domain and id, unqualified names belong to the driver's domain,
`version` attributes become Semver objects and capacities become Quantity objects, and an
unknown domain reads as an empty map.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import celpy.celtypes as ct

from webhook.engine.cel.errors import CelFunctionError
from webhook.engine.cel.quantity import parse_quantity
from webhook.engine.cel.semver import parse_semver
from webhook.engine.cel.values import DomainMap


def _split(name: str, driver: str) -> tuple[str, str]:
    domain, slash, ident = name.partition("/")
    return (domain, ident) if slash else (driver, name)


def _attribute(name: str, value: Mapping[str, Any]) -> Any:
    """One DeviceAttribute ({"int": 1} | {"bool": ...} | {"string": ...} | {"version": ...})."""
    if "bool" in value:
        return ct.BoolType(bool(value["bool"]))
    if "int" in value:
        return ct.IntType(int(value["int"]))
    if "string" in value:
        return ct.StringType(str(value["string"]))
    if "version" in value:
        try:
            return parse_semver(str(value["version"]))
        except CelFunctionError as error:
            raise ValueError(f"attribute {name}: {error}") from None
    raise ValueError(f"attribute {name}: no int, bool, string or version value in {value!r}")


def _capacity(name: str, value: Any) -> Any:
    """One DeviceCapacity ({"value": "80Gi"}; a bare quantity string is accepted too)."""
    text = value.get("value") if isinstance(value, Mapping) else value
    try:
        return parse_quantity(str(text))
    except CelFunctionError as error:
        raise ValueError(f"capacity {name}: {error}") from None


def _by_domain(driver: str, items: Mapping[str, Any], convert: Any) -> DomainMap:
    domains: dict[str, dict[ct.StringType, Any]] = {}
    for name, value in items.items():
        domain, ident = _split(name, driver)
        domains.setdefault(domain, {})[ct.StringType(ident)] = convert(name, value)
    return DomainMap({ct.StringType(d): ct.MapType(v) for d, v in domains.items()})


def device_to_cel(
    driver: str,
    attributes: Mapping[str, Mapping[str, Any]],
    capacity: Mapping[str, Mapping[str, Any]],
) -> Any:
    """The `device` variable; raises ValueError for a malformed attribute or capacity."""
    return ct.MapType(
        {
            ct.StringType("driver"): ct.StringType(driver),
            ct.StringType("attributes"): _by_domain(driver, attributes, _attribute),
            ct.StringType("capacity"): _by_domain(driver, capacity, _capacity),
        }
    )
