"""IP addresses in CIDR form, parsed and printed as the API server does.

``validation.IsValidInterfaceAddress`` (apimachinery ``util/validation/ip.go``) parses with
``k8s.io/utils/net.ParseCIDRSloppy``, a copy of the Go 1.16 ``net.ParseCIDR`` that still reads IPv4
octets with leading zeros (as decimal), and compares the input with ``<ip>/<prefix>`` printed by Go's
``net.IP.String``. Python's :mod:`ipaddress` differs on exactly the inputs worth checking (it rejects
leading zeros, accepts ``%zone`` suffixes and netmask prefixes, prints IPv4-mapped addresses in IPv6
notation), so the grammar is reproduced here instead.
"""

from __future__ import annotations

_BIG = 0xFFFFFF  # Go's dtoi/xtoi overflow guard
_V4_IN_V6_PREFIX = bytes(10) + b"\xff\xff"


def _dtoi(s: str) -> tuple[int, int, bool]:
    """Decimal digits at the start of ``s``: (value, digits consumed, ok)."""
    n = i = 0
    while i < len(s) and "0" <= s[i] <= "9":
        n = n * 10 + ord(s[i]) - ord("0")
        if n >= _BIG:
            return _BIG, i, False
        i += 1
    return (n, i, i > 0)


def _xtoi(s: str) -> tuple[int, int, bool]:
    """Hexadecimal digits at the start of ``s``: (value, digits consumed, ok)."""
    n = i = 0
    while i < len(s) and s[i] in "0123456789abcdefABCDEF":
        n = n * 16 + int(s[i], 16)
        if n >= _BIG:
            return 0, i, False
        i += 1
    return (n, i, i > 0)


def _parse_ipv4(s: str) -> bytes | None:
    """Four dot-separated decimal octets, leading zeros allowed; 16 bytes (IPv4-in-IPv6) or None."""
    octets = bytearray()
    for i in range(4):
        if not s:
            return None
        if i > 0:
            if s[0] != ".":
                return None
            s = s[1:]
        n, c, ok = _dtoi(s)
        if not ok or n > 0xFF:
            return None
        s = s[c:]
        octets.append(n)
    if s:
        return None
    return _V4_IN_V6_PREFIX + bytes(octets)


def _parse_ipv6(s: str) -> bytes | None:
    ip = bytearray(16)
    ellipsis = -1
    if len(s) >= 2 and s[0] == ":" and s[1] == ":":
        ellipsis = 0
        s = s[2:]
        if not s:
            return bytes(ip)
    i = 0
    while i < 16:
        n, c, ok = _xtoi(s)
        if not ok or n > 0xFFFF:
            return None
        if c < len(s) and s[c] == ".":
            if (ellipsis < 0 and i != 12) or i + 4 > 16:
                return None
            ip4 = _parse_ipv4(s)
            if ip4 is None:
                return None
            ip[i : i + 4] = ip4[12:]
            s = ""
            i += 4
            break
        ip[i] = n >> 8
        ip[i + 1] = n & 0xFF
        i += 2
        s = s[c:]
        if not s:
            break
        if s[0] != ":" or len(s) == 1:
            return None
        s = s[1:]
        if s[0] == ":":
            if ellipsis >= 0:
                return None
            ellipsis = i
            s = s[1:]
            if not s:
                break
    if s:
        return None
    if i < 16:
        if ellipsis < 0:
            return None
        gap = 16 - i
        ip[ellipsis + gap : 16] = ip[ellipsis:i]
        ip[ellipsis : ellipsis + gap] = bytes(gap)
    elif ellipsis >= 0:
        return None
    return bytes(ip)


def parse_cidr_sloppy(value: str) -> tuple[bytes, int, bool] | None:
    """``ParseCIDRSloppy``: the 16-byte address, the prefix length and whether it was written as IPv4."""
    addr, sep, mask = value.partition("/")
    if not sep:
        return None
    ip, bits = _parse_ipv4(addr), 32
    if ip is None:
        ip, bits = _parse_ipv6(addr), 128
    n, consumed, ok = _dtoi(mask)
    if ip is None or not ok or consumed != len(mask) or n > bits:
        return None
    return ip, n, bits == 32


def is_ipv4(ip: bytes) -> bool:
    """``net.IP.To4() != nil``: written as IPv4, or an IPv4-mapped IPv6 address."""
    return ip[:12] == _V4_IN_V6_PREFIX


def ip_string(ip: bytes) -> str:
    """``net.IP.String`` of a 16-byte address: dotted for IPv4, RFC 5952 otherwise."""
    if is_ipv4(ip):
        return ".".join(str(b) for b in ip[12:])
    groups = [(ip[i] << 8) | ip[i + 1] for i in range(0, 16, 2)]
    start, end = -1, -1
    i = 0
    while i < 8:
        j = i
        while j < 8 and groups[j] == 0:
            j += 1
        if j - i >= 2 and j - i > end - start:
            start, end = i, j
        i = j + 1 if j > i else i + 1
    if start < 0:
        return ":".join(f"{g:x}" for g in groups)
    head = ":".join(f"{g:x}" for g in groups[:start])
    tail = ":".join(f"{g:x}" for g in groups[end:])
    return f"{head}::{tail}"


def canonical_interface_address(value: str) -> str | None:
    """``<ip>/<prefix>`` as IsValidInterfaceAddress expects it, or None when ``value`` is no CIDR."""
    parsed = parse_cidr_sloppy(value)
    if parsed is None:
        return None
    ip, prefix, _ = parsed
    if is_ipv4(ip) and prefix > 32:
        prefix -= 96  # "::ffff:192.168.0.1/120" is "192.168.0.1/24"
    return f"{ip_string(ip)}/{prefix}"


def is_ip_sloppy(value: str) -> bool:
    """``netutils.ParseIPSloppy(value) != nil``: an IPv4 (leading zeros allowed) or IPv6 address."""
    return _parse_ipv4(value) is not None or _parse_ipv6(value) is not None
