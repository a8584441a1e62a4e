"""Kubernetes' IP and CIDR libraries: ip(s), isIP(s), ip.isCanonical(s), cidr(s), isCIDR(s)
and the address and prefix methods."""

from __future__ import annotations

import ipaddress

from ..values import CIDR, IP
from .decl import function, method

DECLARATIONS = [
    function("ip", ("string",), "IP"), function("isIP", ("string",), "bool"),
    function("ip.isCanonical", ("string",), "bool"), method("family", "IP", (), "int"),
    *[method(name, "IP", (), "bool") for name in ("isUnspecified", "isLoopback", "isLinkLocalMulticast",
                                                   "isLinkLocalUnicast", "isGlobalUnicast")],
    function("cidr", ("string",), "CIDR"), function("isCIDR", ("string",), "bool"),
    method("containsIP", "CIDR", ("IP",), "bool"), method("containsIP", "CIDR", ("string",), "bool"),
    method("containsCIDR", "CIDR", ("CIDR",), "bool"), method("containsCIDR", "CIDR", ("string",), "bool"),
    method("ip", "CIDR", (), "IP", engine="cidr__ip"), method("masked", "CIDR", (), "CIDR"),
    method("prefixLength", "CIDR", (), "int"),
]


def _ip(text):
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        raise ValueError(f"{text!r} is not an IP address") from None
    if address.version == 6 and address.ipv4_mapped:
        raise ValueError("IPv4-mapped IPv6 addresses are not allowed")
    return {IP: str(address)}


def _cidr(text):
    try:
        network = ipaddress.ip_network(text, strict=False)
    except ValueError:
        raise ValueError(f"{text!r} is not a CIDR") from None
    return {CIDR: text, "_net": str(network)}


def _succeeds(parse):
    def check(text) -> bool:
        try:
            parse(text)
            return True
        except ValueError:
            return False
    return check


def _canonical(text) -> bool:
    try:
        return str(ipaddress.ip_address(text)) == text
    except ValueError:
        raise ValueError(f"{text!r} is not an IP address") from None


def _address(value):
    return ipaddress.ip_address(value[IP] if isinstance(value, dict) else value)


def _network(value):
    return ipaddress.ip_network(value["_net"], strict=False)


def _contains_ip(cidr, ip) -> bool:
    return _address(ip if isinstance(ip, dict) else _ip(ip)) in _network(cidr)


def _contains_cidr(cidr, other) -> bool:
    inner = _network(other if isinstance(other, dict) else _cidr(other))
    outer = _network(cidr)
    return inner.version == outer.version and inner.subnet_of(outer)


FUNCTIONS = {
    "ip": _ip, "isIP": _succeeds(_ip), "ip__isCanonical": _canonical, "cidr": _cidr, "isCIDR": _succeeds(_cidr),
    "family": lambda v: _address(v).version,
    "isUnspecified": lambda v: _address(v).is_unspecified, "isLoopback": lambda v: _address(v).is_loopback,
    "isLinkLocalMulticast": lambda v: _address(v).is_multicast and _address(v).is_link_local,
    "isLinkLocalUnicast": lambda v: _address(v).is_link_local and not _address(v).is_multicast,
    "isGlobalUnicast": lambda v: _address(v).is_global and not _address(v).is_multicast,
    "containsIP": _contains_ip, "containsCIDR": _contains_cidr,
    "cidr__ip": lambda c: _ip(c[CIDR].partition("/")[0]),
    "prefixLength": lambda c: _network(c).prefixlen, "masked": lambda c: _cidr(str(_network(c))),
}
