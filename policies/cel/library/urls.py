"""The Kubernetes URLs library (``library/urls.go``) over a port of Go's ``net/url``.

``url(s)`` accepts what ``url.ParseRequestURI`` accepts (an absolute URI or an absolute path) and
then keeps what ``url.Parse`` makes of it (so a ``#fragment`` is split off properly). The getters
return Go's ``Scheme``, ``Host``, ``Hostname()``, ``Port()``, ``EscapedPath()`` and ``Query()``;
two URLs are equal when their reassembled strings are (``apiservercel.URL.Equal``). Errors read
``URL parse error during conversion from string: parse "<s>": <reason>`` like upstream.

Hosts follow Go 1.26.4 (the toolchain of the Kubernetes 1.36.2 binaries): brackets only at the
start of the host and only around an IPv6 address (``invalid IP-literal``, or ``invalid host:`` with
netip's error); an http or https host without brackets has at most one colon (``http://::1/`` is
``invalid port "::1" after host``), other schemes split the port at the last colon; a port is
digits only; ``http:/x`` has no authority (``OmitHost``), so it is not equal to ``http:///x``; a
query of more than 10000 ``&``-separated parts reads as empty (``urlmaxqueryparams``).

Go strings are byte strings, so the parser works on the UTF-8 bytes; bytes that are not UTF-8
survive parsing as surrogate escapes and reach CEL as U+FFFD (Go would keep the raw byte).
"""

from __future__ import annotations

from dataclasses import replace

from policies.cel.library.cost import fixed, traversal
from policies.cel.library.errors import CELEvalError
from policies.cel.library.gofmt import go_quote
from policies.cel.library.netaddr import AddrError, parse_addr
from policies.cel.library.overload import Overload
from policies.cel.library.values import URL, Userinfo

_PATH, _PATH_SEGMENT, _HOST, _ZONE, _USER_PASSWORD, _QUERY_COMPONENT, _FRAGMENT = range(1, 8)
_UNRESERVED_MARKS = b"-_.~"
_RESERVED = b"$&+,/:;=?@"
_HOST_EXTRA = b"!$&'()*+,;=:[]<>\""
_USERINFO_OK = b"-._:~!$&'()*+,;=%@"
_HEX = b"0123456789abcdefABCDEF"


class _URLError(Exception):
    pass


def _should_escape(c: int, mode: int) -> bool:
    """net/url shouldEscape."""
    if 0x61 <= c <= 0x7A or 0x41 <= c <= 0x5A or 0x30 <= c <= 0x39:
        return False
    if mode in (_HOST, _ZONE) and c in _HOST_EXTRA:
        return False
    if c in _UNRESERVED_MARKS:
        return False
    if c in _RESERVED:
        if mode == _PATH:
            return c == ord("?")
        if mode == _PATH_SEGMENT:
            return c in b"/;,?"
        if mode == _USER_PASSWORD:
            return c in b"@/?:"
        if mode == _QUERY_COMPONENT:
            return True
        if mode == _FRAGMENT:
            return False
    return not (mode == _FRAGMENT and c in b"!()*")


def _escape_error(s: bytes) -> _URLError:
    return _URLError("invalid URL escape " + go_quote(s.decode("utf-8", "replace")))


def _unescape(s: bytes, mode: int) -> bytes:
    """net/url unescape, with its validation of percent-escapes and host characters."""
    i = 0
    while i < len(s):
        c = s[i]
        if c == ord("%"):
            if i + 2 >= len(s) or s[i + 1] not in _HEX or s[i + 2] not in _HEX:
                raise _escape_error(s[i : i + 3])
            value = int(s[i + 1 : i + 3], 16)
            if mode == _HOST and value < 0x80 and s[i : i + 3] != b"%25":
                raise _escape_error(s[i : i + 3])
            if mode == _ZONE and s[i : i + 3] != b"%25" and value != 0x20 and _should_escape(value, _HOST):
                raise _escape_error(s[i : i + 3])
            i += 3
        else:
            if mode in (_HOST, _ZONE) and c < 0x80 and _should_escape(c, mode):
                raise _URLError("invalid character " + go_quote(chr(c)) + " in host name")
            i += 1
    out = bytearray()
    i = 0
    while i < len(s):
        c = s[i]
        if c == ord("%"):
            out.append(int(s[i + 1 : i + 3], 16))
            i += 3
            continue
        out.append(0x20 if c == ord("+") and mode == _QUERY_COMPONENT else c)
        i += 1
    return bytes(out)


def _escape(s: bytes, mode: int) -> bytes:
    out = bytearray()
    for c in s:
        if c == 0x20 and mode == _QUERY_COMPONENT:
            out.append(ord("+"))
        elif _should_escape(c, mode):
            out += b"%%%02X" % c
        else:
            out.append(c)
    return bytes(out)


def _split_scheme(raw: bytes) -> tuple[bytes, bytes]:
    for i, c in enumerate(raw):
        if 0x61 <= c <= 0x7A or 0x41 <= c <= 0x5A:
            continue
        if 0x30 <= c <= 0x39 or c in b"+-.":
            if i == 0:
                return b"", raw
            continue
        if c == ord(":"):
            if i == 0:
                raise _URLError("missing protocol scheme")
            return raw[:i], raw[i + 1 :]
        return b"", raw
    return b"", raw


def _valid_optional_port(port: bytes) -> bool:
    if port == b"":
        return True
    return port[:1] == b":" and all(0x30 <= c <= 0x39 for c in port[1:])


def _parse_host(scheme: str, host: bytes) -> bytes:
    """net/url parseHost (Go 1.26): a ``[`` only at the start, holding an IPv6 address that
    ``netip.ParseAddr`` accepts (not IPv4); without brackets, http and https hosts may hold one
    colon (before the port), other schemes take the port after the last colon."""
    bracket = host.rfind(b"[")
    if bracket > 0:
        raise _URLError("invalid IP-literal")
    if bracket == 0:
        return _parse_ip_literal(host)
    colon = host.find(b":")
    if colon != -1:
        if scheme not in ("http", "https"):
            colon = host.rfind(b":")
        if not _valid_optional_port(host[colon:]):
            raise _port_error(host[colon:])
    return _unescape(host, _HOST)


def _parse_ip_literal(host: bytes) -> bytes:
    """``[address%25zone]:port`` (RFC 3986, RFC 6874), returned unescaped."""
    close = host.rfind(b"]")
    if close < 0:
        raise _URLError("missing ']' in host")
    colon_port = host[close + 1 :]
    if not _valid_optional_port(colon_port):
        raise _port_error(colon_port)
    name = host[1:close]
    zone = name.find(b"%25")
    if zone >= 0:
        name = _unescape(name[:zone], _HOST) + _unescape(name[zone:], _ZONE)
    else:
        name = _unescape(name, _HOST)
    try:
        address, _ = parse_addr(_decode(name))
    except AddrError as err:
        raise _URLError(f"invalid host: {err}") from None
    if address.bits == 32:
        raise _URLError("invalid IP-literal")
    return b"[" + name + b"]" + _unescape(colon_port, _HOST)


def _port_error(colon_port: bytes) -> _URLError:
    return _URLError(f"invalid port {go_quote(_text(_decode(colon_port)))} after host")


def _parse_authority(scheme: str, authority: bytes) -> tuple[Userinfo | None, bytes]:
    i = authority.rfind(b"@")
    host = _parse_host(scheme, authority[i + 1 :] if i >= 0 else authority)
    if i < 0:
        return None, host
    userinfo = authority[:i]
    if not all(
        0x41 <= c <= 0x5A or 0x61 <= c <= 0x7A or 0x30 <= c <= 0x39 or c in _USERINFO_OK for c in userinfo
    ):
        raise _URLError("net/url: invalid userinfo")
    if b":" not in userinfo:
        return Userinfo(_decode(_unescape(userinfo, _USER_PASSWORD))), host
    username, _, password = userinfo.partition(b":")
    return (
        Userinfo(
            _decode(_unescape(username, _USER_PASSWORD)), _decode(_unescape(password, _USER_PASSWORD)), True
        ),
        host,
    )


def _decode(raw: bytes) -> str:
    """Go string bytes as a Python str; bytes that are not UTF-8 survive as surrogate escapes, so
    that re-escaping gives Go's ``%E9`` back (see ``_bytes``, and ``_text`` for CEL results)."""
    return raw.decode("utf-8", "surrogateescape")


def _bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def _text(value: str) -> str:
    """A string handed back to CEL: bytes that are not UTF-8 become U+FFFD."""
    return _bytes(value).decode("utf-8", "replace")


def _parse(raw: bytes, via_request: bool) -> URL:
    """net/url parse (without the fragment), or _URLError with Go's reason."""
    if any(c < 0x20 or c == 0x7F for c in raw):
        raise _URLError("net/url: invalid control character in URL")
    if raw == b"" and via_request:
        raise _URLError("empty url")
    if raw == b"*":
        return URL(path="*")
    scheme_bytes, rest = _split_scheme(raw)
    scheme = _decode(scheme_bytes).lower()
    force_query = rest.endswith(b"?") and rest.count(b"?") == 1
    if force_query:
        rest, query = rest[:-1], b""
    else:
        rest, _, query = rest.partition(b"?")
    base = URL(scheme=scheme, force_query=force_query, raw_query=_decode(query))
    if not rest.startswith(b"/"):
        if scheme:
            return replace(base, opaque=_decode(rest))
        if via_request:
            raise _URLError("invalid URI for request")
        if b":" in rest.partition(b"/")[0]:
            raise _URLError("first path segment in URL cannot contain colon")
    if (scheme or (not via_request and not rest.startswith(b"///"))) and rest.startswith(b"//"):
        authority, slash, tail = rest[2:].partition(b"/")
        rest = slash + tail
        user, host = _parse_authority(scheme, authority)
        base = replace(base, user=user, host=_decode(host))
    elif scheme and rest.startswith(b"/"):
        base = replace(base, omit_host=True)  # "http:/x" has no authority at all
    path = _unescape(rest, _PATH)
    raw_path = "" if _escape(path, _PATH) == rest else _decode(rest)
    return replace(base, path=_decode(path), raw_path=raw_path)


def _parse_error(text: str, err: _URLError) -> CELEvalError:
    return CELEvalError(f"URL parse error during conversion from string: parse {go_quote(text)}: {err}")


def url(text: str) -> URL:
    """ParseRequestURI to validate, then Parse (which splits the fragment off) for the value."""
    raw = text.encode("utf-8")
    try:
        _parse(raw, via_request=True)
    except _URLError as err:
        raise _parse_error(text, err) from None
    head, hashmark, fragment = raw.partition(b"#")
    try:
        parsed = _parse(head, via_request=False)
    except _URLError as err:
        raise _parse_error(_decode(head), err) from None
    if not (hashmark and fragment):
        return parsed
    try:
        unescaped = _unescape(fragment, _FRAGMENT)
    except _URLError as err:  # Go names the whole input for fragment errors
        raise _parse_error(text, err) from None
    raw_fragment = "" if _escape(unescaped, _FRAGMENT) == fragment else _decode(fragment)
    return replace(parsed, fragment=_decode(unescaped), raw_fragment=raw_fragment)


def request_uri_problem(text: str) -> str | None:
    """The error text of Go's url.ParseRequestURI(text), or None when it parses."""
    try:
        _parse(text.encode("utf-8"), via_request=True)
    except _URLError as err:
        return f"parse {go_quote(text)}: {err}"
    return None


def is_url(text: str) -> bool:
    return request_uri_problem(text) is None


def _valid_encoded(s: bytes, mode: int) -> bool:
    return all(c in b"!$&'()*+,;=:@[]%" or not _should_escape(c, mode) for c in s)


def escaped_path(u: URL) -> str:
    raw = _bytes(u.raw_path)
    if raw and _valid_encoded(raw, _PATH):
        try:
            if _decode(_unescape(raw, _PATH)) == u.path:
                return u.raw_path
        except _URLError:
            pass
    if u.path == "*":
        return "*"
    return _decode(_escape(_bytes(u.path), _PATH))


def _escaped_fragment(u: URL) -> str:
    raw = _bytes(u.raw_fragment)
    if raw and _valid_encoded(raw, _FRAGMENT):
        try:
            if _decode(_unescape(raw, _FRAGMENT)) == u.fragment:
                return u.raw_fragment
        except _URLError:
            pass
    return _decode(_escape(_bytes(u.fragment), _FRAGMENT))


def url_string(u: URL) -> str:
    """url.URL.String(): what equality compares."""
    out = u.scheme + ":" if u.scheme else ""
    if u.opaque:
        out += u.opaque
    else:
        if (u.scheme or u.host or u.user is not None) and not (u.omit_host and not u.host and u.user is None):
            if u.host or u.path or u.user is not None:
                out += "//"
            if u.user is not None:
                out += _userinfo_string(u.user) + "@"
            out += _decode(_escape(_bytes(u.host), _HOST))
        path = escaped_path(u)
        if path and path[0] != "/" and u.host:
            out += "/"
        if not out and ":" in path.partition("/")[0]:
            out += "./"
        out += path
    if u.force_query or u.raw_query:
        out += "?" + u.raw_query
    if u.fragment:
        out += "#" + _escaped_fragment(u)
    return out


def _userinfo_string(user: Userinfo) -> str:
    text = _decode(_escape(_bytes(user.username), _USER_PASSWORD))
    if user.password_set:
        text += ":" + _decode(_escape(_bytes(user.password), _USER_PASSWORD))
    return text


def split_host_port(host_port: str) -> tuple[str, str]:
    host, port = host_port, ""
    colon = host.rfind(":")
    if colon != -1 and _valid_optional_port(_bytes(host[colon:])):
        host, port = host[:colon], host[colon + 1 :]
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, port


def query(u: URL) -> dict[str, list[str]]:
    """url.URL.Query(): malformed pairs are dropped silently, and a query of more than
    ``_MAX_QUERY_PARAMS`` parts (counted by ``&``) is refused whole, hence empty."""
    values: dict[str, list[str]] = {}
    raw = _bytes(u.raw_query)
    if raw.count(b"&") + 1 > _MAX_QUERY_PARAMS:
        return values
    for part in raw.split(b"&"):
        if not part or b";" in part:
            continue
        key, _, value = part.partition(b"=")
        try:
            k, v = _unescape(key, _QUERY_COMPONENT), _unescape(value, _QUERY_COMPONENT)
        except _URLError:
            continue
        values.setdefault(_text(_decode(k)), []).append(_text(_decode(v)))
    return values


# net/url's urlmaxqueryparams default (Go 1.26).
_MAX_QUERY_PARAMS = 10_000


_NOMINAL = fixed(1)
OVERLOADS: tuple[Overload, ...] = (
    Overload("url", "string_to_url", False, ("string",), "URL", url, traversal(0)),
    # isURL is in neither list of the Kubernetes estimator: cel-go's default 1 both ways.
    Overload("isURL", "is_url_string", False, ("string",), "bool", is_url, _NOMINAL),
    Overload("getScheme", "url_get_scheme", True, ("URL",), "string", lambda u: u.scheme, _NOMINAL),
    Overload("getHost", "url_get_host", True, ("URL",), "string", lambda u: _text(u.host), _NOMINAL),
    Overload(
        "getHostname",
        "url_get_hostname",
        True,
        ("URL",),
        "string",
        lambda u: _text(split_host_port(u.host)[0]),
        _NOMINAL,
    ),
    Overload(
        "getPort", "url_get_port", True, ("URL",), "string", lambda u: split_host_port(u.host)[1], _NOMINAL
    ),
    Overload("getEscapedPath", "url_get_escaped_path", True, ("URL",), "string", escaped_path, _NOMINAL),
    Overload("getQuery", "url_get_query", True, ("URL",), "map(string,list(string))", query, _NOMINAL),
)
