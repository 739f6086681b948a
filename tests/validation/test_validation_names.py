"""Name formats and their apimachinery messages."""

from __future__ import annotations

import pytest
from dra_objects import C_IDENTIFIER_MSG, DNS_LABEL_MSG, DNS_SUBDOMAIN_MSG, LABEL_NAME_MSG, LABEL_VALUE_MSG

from policies.validation.fielderrors import Path
from policies.validation.names import (
    is_dns1123_label,
    is_dns1123_subdomain,
    is_extended_resource_name,
    is_label_key,
    is_label_value,
    is_node_allocatable_resource_name,
    validate_driver_name,
    validate_fully_qualified_name,
    validate_pool_name,
    validate_qualified_name,
    validate_uid,
)

DNS_LABEL_RULE = DNS_LABEL_MSG
SUBDOMAIN_RULE = DNS_SUBDOMAIN_MSG


@pytest.mark.parametrize(
    ("value", "problems"),
    [
        ("gpu-0", []),
        ("0", []),
        ("a" * 63, []),
        ("a" * 64, ["must be no more than 63 bytes"]),
        ("a.b", ["must not contain dots"]),
        ("-a", [DNS_LABEL_RULE]),
        ("A", [DNS_LABEL_RULE]),
        ("a\n", [DNS_LABEL_RULE]),
        ("", [DNS_LABEL_RULE]),
    ],
)
def test_dns_label(value: str, problems: list[str]) -> None:
    assert is_dns1123_label(value) == problems


@pytest.mark.parametrize(
    ("value", "problems"),
    [
        ("gpu.example.com", []),
        ("a" * 63 + "." + "b" * 63, []),
        ("a." * 126 + "ab", ["must be no more than 253 bytes"]),
        ("a..b", [SUBDOMAIN_RULE]),
        ("a_b", [SUBDOMAIN_RULE]),
        ("é", [SUBDOMAIN_RULE]),
    ],
)
def test_dns_subdomain(value: str, problems: list[str]) -> None:
    assert is_dns1123_subdomain(value) == problems


@pytest.mark.parametrize(
    ("value", "problems"),
    [
        ("example.com/MyName", []),
        ("my.name", []),
        ("/name", ["prefix part must be non-empty"]),
        ("a/", ["name part must be non-empty", LABEL_NAME_MSG]),
        ("A_B/x", ["prefix part " + SUBDOMAIN_RULE]),
        ("n" * 64, ["name part must be no more than 63 bytes"]),
        (
            "a/b/c",
            [
                "a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start "
                "and end "
                "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
                "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain "
                "prefix and "
                "'/' (e.g. 'example.com/MyName')"
            ],
        ),
    ],
)
def test_label_key(value: str, problems: list[str]) -> None:
    assert is_label_key(value) == problems


@pytest.mark.parametrize(
    ("value", "problems"),
    [("", []), ("v1.2_x", []), ("-x", [LABEL_VALUE_MSG]), ("x" * 64, ["must be no more than 63 bytes"])],
)
def test_label_value(value: str, problems: list[str]) -> None:
    assert is_label_value(value) == problems


@pytest.mark.parametrize(
    ("value", "lines"),
    [
        ("dra.example.com", []),
        ("DRA.Example.COM", []),
        ("", ["d: Required value"]),
        ("a" * 64, ["d: Too long: may not be more than 63 bytes"]),
        ("dra_example", [f'd: Invalid value: "dra_example": {SUBDOMAIN_RULE}']),
    ],
)
def test_driver_name(value: str, lines: list[str]) -> None:
    assert [str(e) for e in validate_driver_name(value, Path("d"))] == lines


@pytest.mark.parametrize(
    ("value", "lines"),
    [
        ("node-1", []),
        ("zone.a/rack-1/node-1", []),
        ("", ["p: Required value"]),
        ("a//b", [f'p: Invalid value: "": {SUBDOMAIN_RULE}']),
    ],
)
def test_pool_name(value: str, lines: list[str]) -> None:
    assert [str(e) for e in validate_pool_name(value, Path("p"))] == lines


@pytest.mark.parametrize(
    ("value", "lines"),
    [
        ("model", []),
        ("_private1", []),
        ("dra.example.com/model", []),
        ("x" * 33, ["q: Too long: may not be more than 32 bytes"]),
        ("1x", [f'q: Invalid value: "1x": {C_IDENTIFIER_MSG}']),
        ("a/b/c", ['q: Invalid value: "a/b/c": must not contain more than one slash']),
        ("/m", ['q: Invalid value: "": the domain must not be empty']),
        ("d.io/", ['q: Invalid value: "": the name must not be empty']),
        ("d" * 64 + "/m", ["q: Too long: may not be more than 63 bytes"]),
    ],
)
def test_qualified_name(value: str, lines: list[str]) -> None:
    assert [str(e) for e in validate_qualified_name(value, Path("q"))] == lines


def test_fully_qualified_name_needs_a_domain() -> None:
    assert [str(e) for e in validate_fully_qualified_name("numa", Path("f"))] == [
        'f: Invalid value: "numa": a fully qualified name must be a domain and a name separated by a slash'
    ]
    assert validate_fully_qualified_name("dra.example.com/numa", Path("f")) == []


@pytest.mark.parametrize(
    ("value", "detail"),
    [
        ("aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa", None),
        ("x", "error validating uid: invalid UUID length: 1"),
        ("zzzzzzzz-aaaa-aaaa-aaaa-aaaaaaaaaaaa", "error validating uid: invalid UUID format"),
        (
            "AAAAAAAA-AAAA-AAAA-AAAA-AAAAAAAAAAAA",
            "uid must be in RFC 4122 normalized form, `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` with lowercase "
            "hexadecimal characters",
        ),
        (
            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            "uid must be in RFC 4122 normalized form, `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` with lowercase "
            "hexadecimal characters",
        ),
        # github.com/google/uuid Validate: hyphens only at 8, 13, 18, 23 (Python's uuid.UUID drops
        # them wherever they are), its own messages for a bad urn prefix or bracket.
        ("aaaaaaaaa-aaa-aaaa-aaaa-aaaaaaaaaaaa", "error validating uid: invalid UUID format"),
        ("aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaa-", "error validating uid: invalid UUID format"),
        (
            "uuid:urn:aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa",
            'error validating uid: invalid urn prefix: "uuid:urn:"',
        ),
        (
            "URN:UUID:aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa",
            "uid must be in RFC 4122 normalized form, `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` with lowercase "
            "hexadecimal characters",
        ),
        ("[aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa]", "error validating uid: invalid bracketed UUID format"),
        ("{aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaa}", "error validating uid: invalid UUID length: 37"),
        ("aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaa\u00e9", "error validating uid: invalid UUID length: 37"),
        ("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-", "error validating uid: invalid UUID format"),
    ],
)
def test_share_id(value: str, detail: str | None) -> None:
    errors = validate_uid(value, Path("u"))
    assert [e.detail for e in errors] == ([detail] if detail else [])


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        ("example.com/gpu", True),
        ("deviceclass.resource.kubernetes.io/gpu", False),
        ("gpu", False),
        ("requests.example.com/gpu", False),
        ("example.com/" + "g" * 64, False),
    ],
)
def test_extended_resource_name(name: str, ok: bool) -> None:
    assert is_extended_resource_name(name) is ok


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        ("cpu", True),
        ("memory", True),
        ("hugepages-2Mi", True),
        ("ephemeral-storage", False),
        ("example.com/x", False),
    ],
)
def test_node_allocatable_resource_name(name: str, ok: bool) -> None:
    assert is_node_allocatable_resource_name(name) is ok
