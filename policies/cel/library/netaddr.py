"""The Kubernetes IP and CIDR libraries (``library/ip.go``, ``library/cidr.go``) over a port of Go's
``net/netip`` parser, whose error texts the CEL errors embed.

Upstream rejects zones (``fe80::1%eth0``) and IPv4-mapped IPv6 addresses (``::ffff:1.2.3.4``) and
leading zeros in IPv4 octets (netip itself does). ``ip.isCanonical(s)`` compares ``s`` with
``netip.Addr.String()`` (RFC 5952: lower case, longest zero run of two or more groups as ``::``).
Quirks kept: a CIDR parse error says "network address parse error during conversion from string"
twice; ``containsIP("not an ip")`` is "no such overload" (the string's parse error is dropped),
while ``containsCIDR("not a cidr")`` reports the parse error. ``containsCIDR`` masks the other
prefix first (the 1.33 fix, kubernetes#130450).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from policies.cel.library.cost import CallSite, CostRule, fixed, parse_traversal, plus, scale
from policies.cel.library.errors import CELEvalError
from policies.cel.library.gofmt import go_quote
from policies.cel.library.overload import Overload
from policies.cel.library.values import CIDR, IP


class AddrError(Exception):
    """netip's parse error; ``str()`` is Go's ``ParseAddr("..."): ...`` text."""


def _addr_error(text: str, message: str, at: str = "") -> AddrError:
    suffix = f" (at {go_quote(at)})" if at else ""
    return AddrError(f"ParseAddr({go_quote(text)}): {message}{suffix}")


def _ipv4_fields(whole: str, part: str) -> list[int]:
    """netip parseIPv4Fields over ``part`` (a suffix of ``whole``); errors name ``whole``."""
    fields: list[int] = []
    value = digits = 0
    for i, ch in enumerate(part):
        if "0" <= ch <= "9":
            if digits == 1 and value == 0:
                raise _addr_error(whole, "IPv4 field has octet with leading zero")
            value = value * 10 + ord(ch) - 48
            digits += 1
            if value > 255:
                raise _addr_error(whole, "IPv4 field has value >255")
        elif ch == ".":
            if i == 0 or i == len(part) - 1 or part[i - 1] == ".":
                raise _addr_error(whole, "IPv4 field must have at least one digit", part[i:])
            if len(fields) == 3:
                raise _addr_error(whole, "IPv4 address too long")
            fields.append(value)
            value = digits = 0
        else:
            raise _addr_error(whole, "unexpected character", part[i:])
    if len(fields) < 3:
        raise _addr_error(whole, "IPv4 address too short")
    return [*fields, value]


def _parse_ipv6(text: str) -> tuple[int, str]:
    """netip parseIPv6: the 128-bit value and the zone."""
    s, zone = text, ""
    if "%" in s:
        s, zone = s.split("%", 1)
        if not zone:
            raise _addr_error(text, "zone must be a non-empty string")
    ip = [0] * 16
    ellipsis = -1
    if s.startswith("::"):
        ellipsis, s = 0, s[2:]
        if not s:
            return 0, zone
    i = 0
    while i < 16:
        off = acc = 0
        while off < len(s) and s[off] in "0123456789abcdefABCDEF":
            acc = acc * 16 + int(s[off], 16)
            if off > 3:
                raise _addr_error(text, "each group must have 4 or less digits", s)
            if acc > 0xFFFF:
                raise _addr_error(text, "IPv6 field has value >=2^16", s)
            off += 1
        if off == 0:
            raise _addr_error(text, "each colon-separated field must have at least one digit", s)
        if off < len(s) and s[off] == ".":
            if ellipsis < 0 and i != 12:
                raise _addr_error(
                    text, "embedded IPv4 address must replace the final 2 fields of the address", s
                )
            if i + 4 > 16:
                raise _addr_error(
                    text, "too many hex fields to fit an embedded IPv4 at the end of the address", s
                )
            ip[i : i + 4] = _ipv4_fields(text, s)
            s, i = "", i + 4
            break
        ip[i], ip[i + 1] = acc >> 8, acc & 0xFF
        i += 2
        s = s[off:]
        if not s:
            break
        if s[0] != ":":
            raise _addr_error(text, "unexpected character, want colon", s)
        if len(s) == 1:
            raise _addr_error(text, "colon must be followed by more characters", s)
        s = s[1:]
        if s[0] == ":":
            if ellipsis >= 0:
                raise _addr_error(text, "multiple :: in address", s)
            ellipsis, s = i, s[1:]
            if not s:
                break
    if s:
        raise _addr_error(text, "trailing garbage after address", s)
    if i < 16:
        if ellipsis < 0:
            raise _addr_error(text, "address string too short")
        gap = 16 - i
        ip = ip[:ellipsis] + [0] * gap + ip[ellipsis:i]
    elif ellipsis >= 0:
        raise _addr_error(text, "the :: must expand to at least one field of zeros")
    return int.from_bytes(bytes(ip), "big"), zone


def parse_addr(text: str) -> tuple[IP, str]:
    """netip.ParseAddr: the address and its zone."""
    for ch in text:
        if ch == ".":
            fields = _ipv4_fields(text, text)
            return IP(int.from_bytes(bytes(fields), "big"), 32), ""
        if ch == ":":
            value, zone = _parse_ipv6(text)
            return IP(value, 128), zone
        if ch == "%":
            raise _addr_error(text, "missing IPv6 address")
    raise _addr_error(text, "unable to parse IP")


def _is_4in6(ip: IP) -> bool:
    return ip.bits == 128 and ip.value >> 32 == 0xFFFF


def parse_ip(text: str) -> IP:
    """library parseIPAddr: netip.ParseAddr without zones or IPv4-mapped addresses."""
    try:
        ip, zone = parse_addr(text)
    except AddrError as err:
        raise CELEvalError(
            f"IP Address {go_quote(text)} parse error during conversion from string: {err}"
        ) from None
    if zone:
        raise CELEvalError(f"IP address {go_quote(text)} with zone value is not allowed")
    if _is_4in6(ip):
        raise CELEvalError(f"IPv4-mapped IPv6 address {go_quote(text)} is not allowed")
    return ip


def ip_string(ip: IP) -> str:
    """netip.Addr.String()."""
    if ip.bits == 32:
        return ".".join(str(b) for b in ip.value.to_bytes(4, "big"))
    groups = [(ip.value >> (112 - 16 * k)) & 0xFFFF for k in range(8)]
    start, end = 255, 255
    for i in range(8):
        j = i
        while j < 8 and groups[j] == 0:
            j += 1
        if j - i >= 2 and j - i > end - start:
            start, end = i, j
    out, i = "", 0
    while i < 8:
        if i == start:
            out += "::"
            i = end
            if i >= 8:
                break
        elif i > 0:
            out += ":"
        out += f"{groups[i]:x}"
        i += 1
    return out


def is_ip(text: str) -> bool:
    try:
        parse_ip(text)
    except CELEvalError:
        return False
    return True


def is_canonical(text: str) -> bool:
    return ip_string(parse_ip(text)) == text


def _is_loopback(ip: IP) -> bool:
    return ip.value >> 24 == 127 if ip.bits == 32 else ip.value == 1


def _is_multicast(ip: IP) -> bool:
    return ip.value >> 28 == 0xE if ip.bits == 32 else ip.value >> 120 == 0xFF


def _is_link_local_unicast(ip: IP) -> bool:
    return ip.value >> 16 == 0xA9FE if ip.bits == 32 else ip.value >> 118 == 0xFE80 >> 6


def _is_link_local_multicast(ip: IP) -> bool:
    return ip.value >> 8 == 0xE00000 if ip.bits == 32 else (ip.value >> 112) & 0xFF0F == 0xFF02


def _is_global_unicast(ip: IP) -> bool:
    if ip.bits == 32 and ip.value in (0, 0xFFFFFFFF):
        return False
    return ip.value != 0 and not (_is_loopback(ip) or _is_multicast(ip) or _is_link_local_unicast(ip))


def _prefix_error(text: str, message: str) -> AddrError:
    return AddrError(f"netip.ParsePrefix({go_quote(text)}): {message}")


def _parse_prefix(text: str) -> CIDR:
    """netip.ParsePrefix (Go 1.22+: no sign or leading zero in the length)."""
    slash = text.rfind("/")
    if slash < 0:
        raise _prefix_error(text, "no '/'")
    try:
        ip, zone = parse_addr(text[:slash])
    except AddrError as err:
        raise _prefix_error(text, str(err)) from None
    if zone:
        raise _prefix_error(text, "IPv6 zones cannot be present in a prefix")
    bits = text[slash + 1 :]
    if (len(bits) > 1 and not "1" <= bits[0] <= "9") or not bits.isascii() or not bits.isdigit():
        raise _prefix_error(text, "bad bits after slash: " + go_quote(bits))
    length = int(bits)
    if length > ip.bits:
        raise _prefix_error(text, "prefix length out of range")
    return CIDR(ip, length)


def parse_cidr(text: str) -> CIDR:
    prefix = "network address parse error during conversion from string: "
    try:
        cidr = _parse_prefix(text)
    except AddrError as err:
        raise CELEvalError(prefix + prefix + str(err)) from None
    if _is_4in6(cidr.ip):
        raise CELEvalError(prefix + f"IPv4-mapped IPv6 address {go_quote(text)} is not allowed")
    return cidr


def is_cidr(text: str) -> bool:
    try:
        parse_cidr(text)
    except CELEvalError:
        return False
    return True


def masked(cidr: CIDR) -> CIDR:
    host_bits = cidr.ip.bits - cidr.prefix_length
    return CIDR(IP(cidr.ip.value >> host_bits << host_bits, cidr.ip.bits), cidr.prefix_length)


def contains_ip(cidr: CIDR, ip: IP | str) -> bool:
    if isinstance(ip, str):
        try:
            ip = parse_ip(ip)
        except CELEvalError:
            raise CELEvalError("no such overload") from None
    if ip.bits != cidr.ip.bits:
        return False
    host_bits = ip.bits - cidr.prefix_length
    return ip.value >> host_bits == cidr.ip.value >> host_bits


def contains_cidr(cidr: CIDR, other: CIDR | str) -> bool:
    if isinstance(other, str):
        other = parse_cidr(other)
    if other.ip.bits != cidr.ip.bits:
        return False
    same_network = masked(cidr) == masked(CIDR(other.ip, cidr.prefix_length))
    return same_network and cidr.prefix_length <= other.prefix_length


def cidr_string(cidr: CIDR) -> str:
    return f"{ip_string(cidr.ip)}/{cidr.prefix_length}"


# --- costs (library/cost.go) ----------------------------------------------------------------------


def _contains_cost(base_estimate: tuple[int, int], base_actual: int, parses_string: bool) -> CostRule:
    """Comparing two 4- or 16-byte addresses (estimate) -- at run time the operands are not
    sized, so upstream charges the 1-element minimum -- plus parsing a string argument."""

    def estimate(site: CallSite) -> tuple[int, int]:
        return plus(base_estimate, scale(site.size(1), 0.1)) if parses_string else base_estimate

    def actual(args: Sequence[Any], result: Any) -> int:
        return base_actual + (math.ceil(len(args[1]) * 0.1) if parses_string else 0)

    return CostRule("address comparison" + (" + string parse" if parses_string else ""), estimate, actual)


_NOMINAL = fixed(1)
_PARSE = parse_traversal(0)
_IP_COMPARE = ((1, 4), 1)  # (4..16 + 4..16) bytes x 0.1
_CIDR_COMPARE = ((3, 7), 3)  # the same, + masking 4..16 bytes x 0.1, + 1

OVERLOADS: tuple[Overload, ...] = (
    Overload("ip", "string_to_ip", False, ("string",), "IP", parse_ip, _PARSE),
    Overload("isIP", "is_ip", False, ("string",), "bool", is_ip, _PARSE),
    Overload(
        "ip.isCanonical", "ip_is_canonical", False, ("string",), "bool", is_canonical, parse_traversal(0, 2)
    ),
    Overload("family", "ip_family", True, ("IP",), "int", lambda ip: 4 if ip.bits == 32 else 6, _NOMINAL),
    Overload("isUnspecified", "ip_is_unspecified", True, ("IP",), "bool", lambda ip: ip.value == 0, _NOMINAL),
    Overload("isLoopback", "ip_is_loopback", True, ("IP",), "bool", _is_loopback, _NOMINAL),
    Overload(
        "isLinkLocalMulticast",
        "ip_is_link_local_multicast",
        True,
        ("IP",),
        "bool",
        _is_link_local_multicast,
        _NOMINAL,
    ),
    Overload(
        "isLinkLocalUnicast",
        "ip_is_link_local_unicast",
        True,
        ("IP",),
        "bool",
        _is_link_local_unicast,
        _NOMINAL,
    ),
    Overload("isGlobalUnicast", "ip_is_global_unicast", True, ("IP",), "bool", _is_global_unicast, _NOMINAL),
    Overload("string", "ip_to_string", False, ("IP",), "string", ip_string),
    Overload("cidr", "string_to_cidr", False, ("string",), "CIDR", parse_cidr, _PARSE),
    Overload("isCIDR", "is_cidr", False, ("string",), "bool", is_cidr, _PARSE),
    Overload(
        "containsIP",
        "cidr_contains_ip_string",
        True,
        ("CIDR", "string"),
        "bool",
        contains_ip,
        _contains_cost(*_IP_COMPARE, parses_string=True),
    ),
    Overload(
        "containsIP",
        "cidr_contains_ip_ip",
        True,
        ("CIDR", "IP"),
        "bool",
        contains_ip,
        _contains_cost(*_IP_COMPARE, parses_string=False),
    ),
    Overload(
        "containsCIDR",
        "cidr_contains_cidr_string",
        True,
        ("CIDR", "string"),
        "bool",
        contains_cidr,
        _contains_cost(*_CIDR_COMPARE, parses_string=True),
    ),
    Overload(
        "containsCIDR",
        "cidr_contains_cidr",
        True,
        ("CIDR", "CIDR"),
        "bool",
        contains_cidr,
        _contains_cost(*_CIDR_COMPARE, parses_string=False),
    ),
    Overload("ip", "cidr_ip", True, ("CIDR",), "IP", lambda cidr: cidr.ip, _NOMINAL),
    Overload(
        "prefixLength", "cidr_prefix_length", True, ("CIDR",), "int", lambda c: c.prefix_length, _NOMINAL
    ),
    Overload("masked", "cidr_masked", True, ("CIDR",), "CIDR", masked, _NOMINAL),
    Overload("string", "cidr_to_string", False, ("CIDR",), "string", cidr_string),
)
