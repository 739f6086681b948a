"""URL, IP and CIDR libraries: upstream doc and test rows, Go's parser error texts."""

import pytest

from policies.cel.library import CELEvalError, cel_equals
from policies.cel.library import netaddr as n
from policies.cel.library import urls as u
from policies.cel.library.gofmt import go_quote


@pytest.mark.parametrize(
    ("text", "scheme", "host", "hostname", "port", "path"),
    [
        (
            "https://user:pass@example.com:80/path?query=val#fragment",
            "https",
            "example.com:80",
            "example.com",
            "80",
            "/path",
        ),
        ("/absolute-path", "", "", "", "", "/absolute-path"),
        ("https://[::1]:80/", "https", "[::1]:80", "::1", "80", "/"),
        ("https://[::1]/", "https", "[::1]", "::1", "", "/"),
        ("https://127.0.0.1:80/", "https", "127.0.0.1:80", "127.0.0.1", "80", "/"),
        (
            "https://example.com/path with spaces/",
            "https",
            "example.com",
            "example.com",
            "",
            "/path%20with%20spaces/",
        ),
        ("https://example.com", "https", "example.com", "example.com", "", ""),
    ],
)
def test_url_parts(text: str, scheme: str, host: str, hostname: str, port: str, path: str) -> None:
    parsed = u.url(text)
    assert (parsed.scheme, parsed.host) == (scheme, host)
    assert u.split_host_port(parsed.host) == (hostname, port)
    assert u.escaped_path(parsed) == path


def test_url_query() -> None:
    assert u.query(u.url("https://example.com/path?k1=a&k2=b&k2=c")) == {"k1": ["a"], "k2": ["b", "c"]}
    assert u.query(u.url("https://example.com/path?key with spaces=value with spaces")) == {
        "key with spaces": ["value with spaces"]
    }
    assert u.query(u.url("https://example.com/path?")) == {}


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        # Go 1.26: an http(s) host has at most one colon; other schemes split at the last one.
        ("https://a:b:c/", 'invalid port ":b:c" after host'),
        ("foo://a:b:c/", 'invalid port ":c" after host'),
        ("http://::1/", 'invalid port "::1" after host'),
        ("http://[1.2.3.4]/", "invalid IP-literal"),
        ("http://a[::1]/", "invalid IP-literal"),
        ("http://[zz]/", 'invalid host: ParseAddr("zz"): unable to parse IP'),
        ("../relative-path", "invalid URI for request"),
        ("", "empty url"),
        ("http://x/%zz", 'invalid URL escape "%zz"'),
    ],
)
def test_bad_urls(text: str, reason: str) -> None:
    assert not u.is_url(text)
    with pytest.raises(CELEvalError) as err:
        u.url(text)
    assert str(err.value) == f'URL parse error during conversion from string: parse "{text}": {reason}'


def test_urls_are_equal_by_their_string() -> None:
    assert cel_equals(u.url("https://example.com/a%2fb"), u.url("https://example.com/a%2fb"))
    assert not cel_equals(u.url("https://example.com/a%2fb"), u.url("https://example.com/a/b"))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "127.0.0.256",
            'IP Address "127.0.0.256" parse error during conversion from string: '
            'ParseAddr("127.0.0.256"): IPv4 field has value >255',
        ),
        (":::1", 'ParseAddr(":::1"): each colon-separated field must have at least one digit (at ":1")'),
        ("01.2.3.4", "IPv4 field has octet with leading zero"),
        ("::ffff:1.2.3.4", 'IPv4-mapped IPv6 address "::ffff:1.2.3.4" is not allowed'),
        ("fe80::1%eth0", 'IP address "fe80::1%eth0" with zone value is not allowed'),
        ("12345::", "each group must have 4 or less digits"),
        ("1.2.3", "IPv4 address too short"),
        ("1:2:3:4:5:6:7", "address string too short"),
        ("x", 'ParseAddr("x"): unable to parse IP'),
    ],
)
def test_bad_ips(text: str, message: str) -> None:
    assert not n.is_ip(text)
    with pytest.raises(CELEvalError) as err:
        n.parse_ip(text)
    assert message in str(err.value)


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("127.0.0.1", True),
        ("2001:db8::abcd", True),
        ("2001:DB8::ABCD", False),
        ("2001:db8::0:0:0:abcd", False),
        ("2001:db8:0:0:1:0:0:1", False),
        ("2001:db8::1:0:0:1", True),
        ("::", True),
    ],
)
def test_is_canonical(text: str, canonical: bool) -> None:
    assert n.is_canonical(text) is canonical


def test_ip_classification() -> None:
    fn = {o.overload_id: o.impl for o in n.OVERLOADS}
    checks = [
        ("ip_family", "127.0.0.1", 4),
        ("ip_family", "::1", 6),
        ("ip_is_unspecified", "0.0.0.0", True),
        ("ip_is_unspecified", "::", True),
        ("ip_is_unspecified", "::1", False),
        ("ip_is_loopback", "127.0.0.1", True),
        ("ip_is_loopback", "192.168.0.1", False),
        ("ip_is_loopback", "::1", True),
        ("ip_is_link_local_multicast", "224.0.0.1", True),
        ("ip_is_link_local_multicast", "224.0.1.1", False),
        ("ip_is_link_local_multicast", "ff02::1", True),
        ("ip_is_link_local_multicast", "fd00::1", False),
        ("ip_is_link_local_unicast", "169.254.169.254", True),
        ("ip_is_link_local_unicast", "fe80::1", True),
        ("ip_is_link_local_unicast", "fd80::1", False),
        ("ip_is_global_unicast", "192.168.0.1", True),
        ("ip_is_global_unicast", "255.255.255.255", False),
        ("ip_is_global_unicast", "2001:db8::abcd", True),
        ("ip_is_global_unicast", "ff00::1", False),
    ]
    for overload, text, expected in checks:
        assert fn[overload](n.parse_ip(text)) == expected, (overload, text)


def test_cidr_functions() -> None:
    c = n.parse_cidr
    assert n.contains_ip(c("192.168.0.0/24"), n.parse_ip("192.168.0.1"))
    assert not n.contains_ip(c("192.168.0.0/24"), "192.168.1.1")
    assert not n.contains_ip(c("2001:db8::/32"), "192.168.0.1")
    assert n.contains_cidr(c("192.168.0.0/24"), "192.168.0.0/25")
    assert not n.contains_cidr(c("192.168.0.0/24"), c("192.168.0.0/23"))
    assert n.contains_cidr(c("192.168.0.0/16"), "192.168.10.0/24")  # fixed upstream in 1.33
    assert not n.contains_cidr(c("192.168.1.0/24"), "192.168.2.0/24")
    assert n.cidr_string(n.masked(c("192.168.0.1/24"))) == "192.168.0.0/24"
    assert n.cidr_string(n.masked(c("2001:db8:1::/32"))) == "2001:db8::/32"
    assert cel_equals(c("192.168.0.0/24"), n.masked(c("192.168.0.0/24")))
    assert not cel_equals(c("192.168.0.1/24"), n.masked(c("192.168.0.1/24")))


def test_cidr_errors_keep_upstream_quirks() -> None:
    prefix = "network address parse error during conversion from string: "
    with pytest.raises(CELEvalError) as err:
        n.parse_cidr("192.168.0.0/")
    assert str(err.value) == prefix + prefix + 'netip.ParsePrefix("192.168.0.0/"): bad bits after slash: ""'
    with pytest.raises(CELEvalError, match="no such overload"):
        n.contains_ip(n.parse_cidr("10.0.0.0/8"), "not an ip")
    with pytest.raises(CELEvalError, match="no '/'"):
        n.contains_cidr(n.parse_cidr("10.0.0.0/8"), "10.0.0.0")
    for bad in ("1.2.3.4/024", "1.2.3.4/+8", "::1/129", "1.2.3.4/33", "::ffff:1.2.3.4/120"):
        assert not n.is_cidr(bad)


# Rows below were printed by Go's net/url and net/netip (go1.19; these code paths are unchanged
# in the Go that builds Kubernetes 1.36).
@pytest.mark.parametrize(
    ("text", "host", "path", "string"),
    [
        ("http://[fe80::1%25en0]:8080/", "[fe80::1%en0]:8080", "/", "http://[fe80::1%25en0]:8080/"),
        ("mailto:joe@example.com", "", "", "mailto:joe@example.com"),
        ("HTTP://EXAMPLE.com/%7Efoo", "EXAMPLE.com", "/%7Efoo", "http://EXAMPLE.com/%7Efoo"),
        ("http://x/\u00e9?q=\u00e9#fr\u00e4g", "x", "/%C3%A9", "http://x/%C3%A9?q=\u00e9#fr%C3%A4g"),
        ("http://x:/p", "x:", "/p", "http://x:/p"),
        ("*", "", "*", "*"),
        ("//x/y", "x", "/y", "//x/y"),
        ("http://a%C3%A9/", "a\u00e9", "/", "http://a%C3%A9/"),
    ],
)
def test_urls_as_go_parses_them(text: str, host: str, path: str, string: str) -> None:
    parsed = u.url(text)
    assert (parsed.host, u.escaped_path(parsed), u.url_string(parsed)) == (host, path, string)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("http://[fe80::1%en0]/", 'invalid URL escape "%en"'),
        ("http://us er@x/", "net/url: invalid userinfo"),
        ("http://user@ex ample.com/", 'invalid character " " in host name'),
        ("http://[::1", "missing ']' in host"),
        ("http://%41:8080/", 'invalid URL escape "%41"'),
    ],
)
def test_url_errors_as_go_reports_them(text: str, reason: str) -> None:
    assert u.request_uri_problem(text) == f'parse "{text}": {reason}'


def test_query_drops_malformed_pairs_like_go() -> None:
    assert u.query(u.url("https://example.com/path?a=1;b=2&c=%zz&d=%41")) == {"d": ["A"]}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1.2.3.4%eth0", 'unexpected character (at "%eth0")'),
        ("fe80::1%", "zone must be a non-empty string"),
        ("1::2::3", 'multiple :: in address (at ":3")'),
        ("0x1.2.3.4", 'unexpected character (at "x1.2.3.4")'),
        (
            "1:2:3:4:5:6:7:1.2.3.4",
            'embedded IPv4 address must replace the final 2 fields of the address (at "1.2.3.4")',
        ),
        ("1.2.3.4.5", "IPv4 address too long"),
        (".1.2.3", 'IPv4 field must have at least one digit (at ".1.2.3")'),
        ("1..2.3", 'IPv4 field must have at least one digit (at ".2.3")'),
        ("abcd::ef0g", 'unexpected character, want colon (at "g")'),
        ("::1:", 'colon must be followed by more characters (at ":")'),
        ("%x", "missing IPv6 address"),
    ],
)
def test_ip_parse_errors_as_go_reports_them(text: str, message: str) -> None:
    with pytest.raises(CELEvalError) as err:
        n.parse_ip(text)
    assert str(err.value).endswith(f"ParseAddr({go_quote(text)}): {message}")


def test_embedded_ipv4_prints_in_hex_like_go() -> None:
    assert n.ip_string(n.parse_ip("::1.2.3.4")) == "::102:304"
    assert n.ip_string(n.parse_ip("1:2:3:4:5:6:1.2.3.4")) == "1:2:3:4:5:6:102:304"
