"""ResourceClaim spec rules (pkg/apis/resource/validation: validateDeviceClaim and friends).

Each case is a claim that differs from a valid one in one respect, and the exact lines the API
server prints for it. The valid twin of every rule is in test_valid_claims.
"""

from __future__ import annotations

from typing import Any

import pytest
from dra_objects import (
    C_IDENTIFIER_MSG,
    DNS_LABEL_MSG,
    DNS_SUBDOMAIN_MSG,
    LABEL_NAME_MSG,
    LABEL_VALUE_MSG,
    REQUEST_REF_MSG,
    claim,
    exact,
    first_available,
    lines,
    opaque,
    sub,
)

REQ = "spec.devices.requests"


def many(n: int, make: Any) -> list[Any]:
    return [make(i) for i in range(n)]


VALID: list[tuple[str, dict[str, Any]]] = [
    ("one exact request", claim(exact())),
    ("no requests at all", claim()),
    ("count defaults to one", claim(exact(allocationMode="ExactCount"))),
    ("allocation mode All", claim(exact(allocationMode="All"))),
    ("32 requests", claim(*many(32, lambda i: exact(f"r{i}")))),
    ("prioritized list", claim(first_available("req-0", sub("a"), sub("b", count=2)))),
    ("8 subrequests", claim(first_available("req-0", *many(8, lambda i: sub(f"s{i}"))))),
    ("32 selectors", claim(exact(selectors=many(32, lambda i: {"cel": {"expression": "true"}})))),
    (
        "constraint on request and subrequest",
        claim(
            exact("a"),
            first_available("b", sub("x")),
            constraints=[{"requests": ["a", "b", "b/x"], "matchAttribute": "dra.example.com/numa"}],
        ),
    ),
    ("distinct attribute", claim(exact(), constraints=[{"distinctAttribute": "dra.example.com/nic"}])),
    (
        "config for a subrequest",
        claim(first_available("req-0", sub("x")), config=[opaque(requests=["req-0/x"])]),
    ),
    ("config for all requests", claim(exact(), config=[opaque()])),
    (
        "tolerations",
        claim(
            exact(
                tolerations=[
                    {"key": "example.com/broken", "operator": "Exists", "effect": "NoExecute"},
                    {"key": "k", "value": "v"},
                    {"operator": "Exists"},
                ]
            )
        ),
    ),
    ("admin access in an admin namespace", claim(exact(adminAccess=True))),
    (
        "capacity requests are not checked by the API server",
        claim(exact(capacity={"requests": {"x/y/z": "1"}})),
    ),
]


@pytest.mark.parametrize(("obj"), [pytest.param(o, id=name) for name, o in VALID])
def test_valid_claims(obj: dict[str, Any]) -> None:
    assert lines(obj) == []


INVALID: list[tuple[str, dict[str, Any], list[str]]] = [
    (
        "request name not a DNS label",
        claim(exact("Req_0")),
        [f'{REQ}[0].name: Invalid value: "Req_0": {DNS_LABEL_MSG}'],
    ),
    (
        "request name with dots",
        claim(exact("a.b")),
        [f'{REQ}[0].name: Invalid value: "a.b": must not contain dots'],
    ),
    (
        "empty request name",
        claim(exact("")),
        [f'{REQ}[0].name: Invalid value: "": {DNS_LABEL_MSG}'],
    ),
    (
        "duplicate request names",
        claim(exact("a"), exact("a")),
        [f'{REQ}[1]: Duplicate value: "a"'],
    ),
    (
        "more than 32 requests",
        claim(*many(33, lambda i: exact(f"r{i}"))),
        [f"{REQ}: Too many: 33: must have at most 32 items"],
    ),
    (
        "neither exactly nor firstAvailable",
        claim({"name": "req-0"}),
        [f"{REQ}[0]: Required value: exactly one of `exactly` or `firstAvailable` is required"],
    ),
    (
        "both exactly and firstAvailable",
        claim({"name": "req-0", "exactly": {"deviceClassName": "gpu"}, "firstAvailable": [sub("a")]}),
        [
            f"{REQ}[0]: Invalid value: null: exactly one of `exactly` or `firstAvailable` is required, "
            "but multiple fields are set"
        ],
    ),
    (
        "missing device class",
        claim(exact(device_class="")),
        [f"{REQ}[0].exactly.deviceClassName: Required value"],
    ),
    (
        "device class not a DNS subdomain",
        claim(exact(device_class="GPU")),
        [f'{REQ}[0].exactly.deviceClassName: Invalid value: "GPU": {DNS_SUBDOMAIN_MSG}'],
    ),
    (
        "negative count",
        claim(exact(count=-1)),
        [f"{REQ}[0].exactly.count: Invalid value: -1: must be greater than zero"],
    ),
    (
        "count with allocation mode All",
        claim(exact(allocationMode="All", count=2)),
        [f"{REQ}[0].exactly.count: Invalid value: 2: must not be specified when allocationMode is 'All'"],
    ),
    (
        "unknown allocation mode",
        claim(exact(allocationMode="Any")),
        [f'{REQ}[0].exactly.allocationMode: Unsupported value: "Any": supported values: "All", "ExactCount"'],
    ),
    (
        "more than 32 selectors",
        claim(exact(selectors=many(33, lambda i: {"cel": {"expression": "true"}}))),
        [f"{REQ}[0].exactly.selectors: Too many: 33: must have at most 32 items"],
    ),
    (
        "selector without cel",
        claim(exact(selectors=[{}])),
        [f"{REQ}[0].exactly.selectors[0].cel: Required value"],
    ),
    (
        "expression longer than 10 Ki",
        claim(exact(selectors=[{"cel": {"expression": "true" + " " * 10240}}])),
        [f"{REQ}[0].exactly.selectors[0].cel.expression: Too long: may not be more than 10240 bytes"],
    ),
    (
        "more than 8 subrequests",
        claim(first_available("req-0", *many(9, lambda i: sub(f"s{i}")))),
        [f"{REQ}[0].firstAvailable: Too many: 9: must have at most 8 items"],
    ),
    (
        "duplicate subrequest names",
        claim(first_available("req-0", sub("a"), sub("a"))),
        [f'{REQ}[0].firstAvailable[1]: Duplicate value: "a"'],
    ),
    (
        "bad subrequest",
        claim(first_available("req-0", sub("S", device_class="", allocationMode="All", count=1))),
        [
            f'{REQ}[0].firstAvailable[0].name: Invalid value: "S": {DNS_LABEL_MSG}',
            f"{REQ}[0].firstAvailable[0].deviceClassName: Required value",
            f"{REQ}[0].firstAvailable[0].count: Invalid value: 1: "
            "must not be specified when allocationMode is 'All'",
        ],
    ),
    (
        "more than 16 tolerations",
        claim(exact(tolerations=many(17, lambda i: {"operator": "Exists"}))),
        [f"{REQ}[0].exactly.tolerations: Too many: 17: must have at most 16 items"],
    ),
    (
        "toleration with a value for Exists",
        claim(exact(tolerations=[{"key": "k", "operator": "Exists", "value": "v"}])),
        [f'{REQ}[0].exactly.tolerations[0].value: Invalid value: "v": must be empty for operator `Exists`'],
    ),
    (
        "toleration with a bad key, value and effect",
        claim(exact(tolerations=[{"key": "a b", "value": "c d", "effect": "PreferNoSchedule"}])),
        [
            f'{REQ}[0].exactly.tolerations[0].key: Invalid value: "a b": {LABEL_NAME_MSG}',
            f'{REQ}[0].exactly.tolerations[0].value: Invalid value: "c d": {LABEL_VALUE_MSG}',
            f'{REQ}[0].exactly.tolerations[0].effect: Unsupported value: "PreferNoSchedule": '
            'supported values: "NoExecute", "NoSchedule", "None"',
        ],
    ),
    (
        "toleration with an unknown operator",
        claim(exact(tolerations=[{"operator": "In"}])),
        [
            f'{REQ}[0].exactly.tolerations[0].operator: Unsupported value: "In": '
            'supported values: "Equal", "Exists"'
        ],
    ),
    (
        "constraint without attribute",
        claim(exact(), constraints=[{"requests": ["req-0"]}]),
        [
            "spec.devices.constraints[0]: Required value: "
            'exactly one of "matchAttribute" or "distinctAttribute" is required, but multiple fields are set'
        ],
    ),
    (
        "constraint attribute without domain",
        claim(exact(), constraints=[{"matchAttribute": "numa"}]),
        [
            'spec.devices.constraints[0].matchAttribute: Invalid value: "numa": '
            "a fully qualified name must be a domain and a name separated by a slash"
        ],
    ),
    (
        "constraint attribute with a bad identifier",
        claim(exact(), constraints=[{"distinctAttribute": "dra.example.com/1st"}]),
        [f'spec.devices.constraints[0].distinctAttribute: Invalid value: "1st": {C_IDENTIFIER_MSG}'],
    ),
    (
        "constraint references",
        claim(
            exact("a"),
            first_available("b", sub("x")),
            constraints=[
                {"requests": ["a/x", "b/y", "c", "a/b/c", "B", "a", "a"], "matchAttribute": "d.io/n"}
            ],
        ),
        [
            f'spec.devices.constraints[0].requests[0]: Invalid value: "a/x": {REQUEST_REF_MSG}',
            f'spec.devices.constraints[0].requests[1]: Invalid value: "b/y": {REQUEST_REF_MSG}',
            f'spec.devices.constraints[0].requests[2]: Invalid value: "c": {REQUEST_REF_MSG}',
            f'spec.devices.constraints[0].requests[3]: Invalid value: "a/b/c": {REQUEST_REF_MSG}',
            f'spec.devices.constraints[0].requests[4]: Invalid value: "B": {DNS_LABEL_MSG}',
            f'spec.devices.constraints[0].requests[4]: Invalid value: "B": {REQUEST_REF_MSG}',
            'spec.devices.constraints[0].requests[6]: Duplicate value: "a"',
        ],
    ),
    (
        "more than 32 constraints",
        claim(exact(), constraints=many(33, lambda i: {"matchAttribute": "d.io/n"})),
        ["spec.devices.constraints: Too many: 33: must have at most 32 items"],
    ),
    (
        "more than 32 config entries",
        claim(exact(), config=many(33, lambda i: opaque())),
        ["spec.devices.config: Too many: 33: must have at most 32 items"],
    ),
    (
        "config without opaque",
        claim(exact(), config=[{"requests": ["req-0"]}]),
        ["spec.devices.config[0].opaque: Required value"],
    ),
    (
        "config for an unknown request",
        claim(exact(), config=[opaque(requests=["other"])]),
        [f'spec.devices.config[0].requests[0]: Invalid value: "other": {REQUEST_REF_MSG}'],
    ),
    (
        "opaque driver missing, parameters not an object",
        claim(exact(), config=[opaque(driver="", parameters=["a"])]),
        [
            "spec.devices.config[0].opaque.driver: Required value",
            'spec.devices.config[0].opaque.parameters: Invalid value: "<value omitted>": '
            "must be a valid JSON object",
        ],
    ),
    (
        "opaque parameters null",
        claim(exact(), config=[{"opaque": {"driver": "dra.example.com", "parameters": None}}]),
        ["spec.devices.config[0].opaque.parameters: Required value"],
    ),
    (
        "opaque parameters over 10 KiB",
        claim(exact(), config=[opaque(parameters={"data": "x" * 10240})]),
        ["spec.devices.config[0].opaque.parameters: Too long: may not be more than 10240 bytes"],
    ),
    # The limit applies to the raw JSON the API server received, as kubectl's Go encoder writes it:
    # '<', '>' and '&' become \u003c (6 bytes), U+2028 becomes \u2028, 1.0 is written 1 and 1e-07 is
    # written 1e-7 (encoding/json). {"data":"..."} is 11 bytes around the string.
    (
        "opaque parameters over 10 KiB once HTML characters are escaped",
        claim(exact(), config=[opaque(parameters={"data": "<" * 1705})]),
        ["spec.devices.config[0].opaque.parameters: Too long: may not be more than 10240 bytes"],
    ),
    (
        "opaque parameters of exactly 10 KiB with escaped characters",
        claim(exact(), config=[opaque(parameters={"data": "&" * 1704 + "x" * 5})]),
        [],
    ),
    (
        "opaque parameters at 10 KiB because floats are written the Go way",
        # {"a":1e-7,"data":"..."} = 9 + 11 + n bytes in Go; Python would write 1e-07 (one more).
        claim(exact(), config=[opaque(parameters={"a": 1e-7, "data": "x" * (10240 - 20)})]),
        [],
    ),
    (
        "opaque driver longer than 63 bytes",
        claim(exact(), config=[opaque(driver="a" * 60 + ".example.com")]),
        [
            "spec.devices.config[0].opaque.driver: Too long: may not be more than 63 bytes",
        ],
    ),
    (
        "opaque driver with an underscore",
        claim(exact(), config=[opaque(driver="dra_example.com")]),
        [f'spec.devices.config[0].opaque.driver: Invalid value: "dra_example.com": {DNS_SUBDOMAIN_MSG}'],
    ),
]


@pytest.mark.parametrize(("obj", "expected"), [pytest.param(o, e, id=name) for name, o, e in INVALID])
def test_invalid_claims(obj: dict[str, Any], expected: list[str]) -> None:
    assert lines(obj) == expected


def test_uppercase_driver_names_are_accepted_like_csi_driver_names() -> None:
    assert lines(claim(exact(), config=[opaque(driver="DRA.Example.com")])) == []


def _refs(n: int) -> list[str]:
    return [f"r{i}" for i in range(n)]


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        pytest.param(
            claim(exact(), constraints=[{"requests": _refs(33), "matchAttribute": "dra.example.com/numa"}]),
            "spec.devices.constraints[0].requests: Too many: 33: must have at most 32 items",
            id="constraint requests",
        ),
        pytest.param(
            claim(exact(), config=[opaque(requests=_refs(33))]),
            "spec.devices.config[0].requests: Too many: 33: must have at most 32 items",
            id="config requests",
        ),
        pytest.param(
            claim(first_available("req-0", sub("a", selectors=[{"cel": {"expression": "true"}}] * 33))),
            f"{REQ}[0].firstAvailable[0].selectors: Too many: 33: must have at most 32 items",
            id="subrequest selectors",
        ),
        pytest.param(
            claim(first_available("req-0", sub("a", tolerations=[{"operator": "Exists"}] * 17))),
            f"{REQ}[0].firstAvailable[0].tolerations: Too many: 17: must have at most 16 items",
            id="subrequest tolerations",
        ),
    ],
)
def test_list_limits_stop_at_the_list(obj: dict[str, Any], expected: str) -> None:
    """validateSlice/validateSet: an oversized list yields one "Too many" and its items go unchecked."""
    assert lines(obj) == [expected]
