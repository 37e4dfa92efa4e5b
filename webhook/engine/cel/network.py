"""Kubernetes' IP and CIDR CEL libraries (k8s.io/apiserver/pkg/cel/library ip.go, cidr.go).

`ip('10.0.0.1')`, `cidr('10.0.0.0/8')` and their methods, with Go's `netip` rules: no zones,
no IPv4-mapped IPv6 addresses, no leading zeros; text is Go's canonical form.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from typing import Any

import celpy.celtypes as ct

from webhook.engine.cel.errors import CelFunctionError
from webhook.engine.cel.values import expect, register_value_type

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


class IP:
    """net.IP: one address."""

    CEL_TYPE_NAME = "net.IP"
    __slots__ = ("address",)

    def __init__(self, address: Address) -> None:
        self.address = address

    def __eq__(self, other: object) -> bool:
        return isinstance(other, IP) and self.address == other.address

    def __hash__(self) -> int:
        return hash(self.address)

    def __str__(self) -> str:
        return str(self.address)


class CIDR:
    """net.CIDR: an address and a prefix length (host bits kept, as Go's netip.Prefix)."""

    CEL_TYPE_NAME = "net.CIDR"
    __slots__ = ("interface",)

    def __init__(self, interface: ipaddress.IPv4Interface | ipaddress.IPv6Interface) -> None:
        self.interface = interface

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CIDR) and str(self) == str(other)

    def __hash__(self) -> int:
        return hash(str(self))

    def __str__(self) -> str:
        return f"{self.interface.ip}/{self.interface.network.prefixlen}"


register_value_type(IP)
register_value_type(CIDR)
TYPE_PACKAGE = ct.MapType({ct.StringType("IP"): IP, ct.StringType("CIDR"): CIDR})
"""What `net` resolves to when no variable has the name: `net.IP` and `net.CIDR` are types."""


def _address(text: str) -> Address:
    if "%" in text:
        raise CelFunctionError(f"IP address {text!r} with zone value is not allowed")
    try:
        address = ipaddress.ip_address(text)
    except ValueError as error:
        raise CelFunctionError(f"IP Address {text!r} parse error: {error}") from None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        raise CelFunctionError(f"IPv4-mapped IPv6 address {text!r} is not allowed")
    return address


def parse_ip(text: Any) -> IP:
    return IP(_address(str(expect(text, ct.StringType, "ip"))))


def parse_cidr(text: Any) -> CIDR:
    raw = str(expect(text, ct.StringType, "cidr"))
    address, slash, bits = raw.partition("/")
    if not slash or not bits.isdigit() or (len(bits) > 1 and bits[0] == "0"):
        raise CelFunctionError(f"network address parse error: bad prefix in {raw!r}")
    try:
        interface = ipaddress.ip_interface(f"{_address(address)}/{int(bits)}")
    except ValueError as error:
        raise CelFunctionError(f"network address parse error: {error}") from None
    return CIDR(interface)


def _valid(parse: Callable[[Any], Any]) -> Callable[[Any], ct.BoolType]:
    def check(text: Any) -> ct.BoolType:
        expect(text, ct.StringType, "isIP")
        try:
            parse(text)
        except CelFunctionError:
            return ct.BoolType(False)
        return ct.BoolType(True)

    return check


def _ip(value: Any) -> Address:
    return expect(value, IP, "ip method").address  # type: ignore[no-any-return]


def _cidr(value: Any) -> CIDR:
    return expect(value, CIDR, "cidr method")  # type: ignore[no-any-return]


def is_canonical(text: Any) -> ct.BoolType:
    return ct.BoolType(str(parse_ip(text)) == str(text))


def _global_unicast(address: Address) -> bool:
    return not (
        address.is_unspecified
        or address.is_loopback
        or address.is_multicast
        or address.is_link_local
        or address == ipaddress.IPv4Address("255.255.255.255")
    )


def _link_local_multicast(address: Address) -> bool:
    if isinstance(address, ipaddress.IPv4Address):
        return address in ipaddress.IPv4Network("224.0.0.0/24")
    return address in ipaddress.IPv6Network("ff02::/16")


def contains_ip(network: Any, other: Any) -> ct.BoolType:
    cidr = expect(network, CIDR, "containsIP")
    if isinstance(other, ct.StringType):
        other = parse_ip(other)
    address = expect(other, IP, "containsIP")
    return ct.BoolType(address.address in cidr.interface.network)


def contains_cidr(network: Any, other: Any) -> ct.BoolType:
    cidr = expect(network, CIDR, "containsCIDR")
    inner = (
        parse_cidr(other)
        if isinstance(other, ct.StringType)
        else expect(other, CIDR, "containsCIDR")
    )
    outer, bits = cidr.interface.network, inner.interface.network.prefixlen
    return ct.BoolType(inner.interface.ip in outer and outer.prefixlen <= bits)


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "ip": lambda value: parse_ip(value) if not isinstance(value, CIDR) else IP(value.interface.ip),
    "isIP": _valid(parse_ip),
    "ip.isCanonical": is_canonical,
    "family": lambda v: ct.IntType(_ip(v).version),
    "isUnspecified": lambda v: ct.BoolType(_ip(v).is_unspecified),
    "isLoopback": lambda v: ct.BoolType(_ip(v).is_loopback),
    "isLinkLocalMulticast": lambda v: ct.BoolType(_link_local_multicast(_ip(v))),
    "isLinkLocalUnicast": lambda v: ct.BoolType(_ip(v).is_link_local),
    "isGlobalUnicast": lambda v: ct.BoolType(_global_unicast(_ip(v))),
    "cidr": parse_cidr,
    "isCIDR": _valid(parse_cidr),
    "containsIP": contains_ip,
    "containsCIDR": contains_cidr,
    "prefixLength": lambda c: ct.IntType(_cidr(c).interface.network.prefixlen),
    "masked": lambda c: CIDR(ipaddress.ip_interface(_cidr(c).interface.network)),
}
