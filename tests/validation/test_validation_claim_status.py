"""ResourceClaim status rules (validateResourceClaimStatusUpdate, AuthorizedForAdminStatus).

Without an old object the status is checked as the first status write; with one, a stored
allocation may only be removed, never changed.
"""

from __future__ import annotations

from typing import Any

import pytest
from dra_objects import (
    DNS_LABEL_MSG,
    REQUEST_REF_MSG,
    allocated,
    changed,
    claim,
    exact,
    first_available,
    lines,
    opaque,
    result,
    sub,
)

from policies.validation.core import validate_interface_address
from policies.validation.fielderrors import Path

ALLOC = "status.allocation.devices"
SHARE = "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa"
POD = {"resource": "pods", "name": "pod-0", "uid": "uid-0"}


def with_status(status: dict[str, Any], *requests: dict[str, Any]) -> dict[str, Any]:
    return claim(*(requests or (exact(),)), status=status)


def condition(type_: str = "Ready", **fields: Any) -> dict[str, Any]:
    base = {"type": type_, "status": "True", "reason": "Done", "lastTransitionTime": "2026-01-01T00:00:00Z"}
    return {**base, **fields}


VALID: list[tuple[str, dict[str, Any]]] = [
    ("allocated and reserved", with_status({**allocated(result()), "reservedFor": [POD]})),
    (
        "result for a subrequest",
        with_status(allocated(result("req-0/a")), first_available("req-0", sub("a"))),
    ),
    (
        "result for a parent request",
        with_status(allocated(result("req-0")), first_available("req-0", sub("a"))),
    ),
    (
        "config from class and claim",
        with_status(
            allocated(
                result(),
                config=[
                    {"source": "FromClass", "opaque": {"driver": "dra.example.com", "parameters": {}}},
                    {
                        "source": "FromClaim",
                        "requests": ["req-0"],
                        "opaque": {"driver": "d.io", "parameters": {}},
                    },
                ],
            )
        ),
    ),
    (
        "node selector",
        with_status(
            allocated(
                result(),
                nodeSelector={
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}]}
                    ]
                },
            )
        ),
    ),
    (
        "device status for an allocated device",
        with_status(
            {
                **allocated(result(shareID=SHARE)),
                "devices": [
                    {
                        "driver": "dra.example.com",
                        "pool": "pool",
                        "device": "gpu-0",
                        "shareID": SHARE,
                        "conditions": [condition()],
                        "data": {"a": 1},
                        "networkData": {"interfaceName": "eth0", "ips": ["10.9.8.7/24", "2001:db8::1/64"]},
                    }
                ],
            }
        ),
    ),
    ("admin result in an admin namespace", with_status(allocated(result(adminAccess=True)))),
    (
        "binding conditions copied from the device",
        with_status(allocated(result(bindingConditions=["Attached"], bindingFailureConditions=["Failed"]))),
    ),
]


@pytest.mark.parametrize("obj", [pytest.param(o, id=name) for name, o in VALID])
def test_valid_status(obj: dict[str, Any]) -> None:
    assert lines(obj) == []


INVALID: list[tuple[str, dict[str, Any], list[str]]] = [
    (
        "reserved without allocation",
        with_status({"reservedFor": [POD]}),
        ["status.reservedFor: Forbidden: may not be specified when `allocated` is not set"],
    ),
    (
        "consumer reference without resource, name, uid",
        with_status({**allocated(result()), "reservedFor": [{"apiGroup": "x"}]}),
        [
            "status.reservedFor[0].resource: Required value",
            "status.reservedFor[0].name: Required value",
            "status.reservedFor[0].uid: Required value",
        ],
    ),
    (
        "the same consumer twice",
        with_status({**allocated(result()), "reservedFor": [POD, POD]}),
        ['status.reservedFor[1]: Duplicate value: "uid-0"'],
    ),
    (
        "more than 256 consumers",
        with_status({**allocated(result()), "reservedFor": [{**POD, "uid": f"u{i}"} for i in range(257)]}),
        ["status.reservedFor: Too many: 257: must have at most 256 items"],
    ),
    (
        "result for an unknown request and a bad device",
        with_status(allocated(result("other", device="GPU-0", driver="", pool=""))),
        [
            f'{ALLOC}.results[0].request: Invalid value: "other": {REQUEST_REF_MSG}',
            f"{ALLOC}.results[0].driver: Required value",
            f"{ALLOC}.results[0].pool: Required value",
            f'{ALLOC}.results[0].device: Invalid value: "GPU-0": {DNS_LABEL_MSG}',
        ],
    ),
    (
        "result for an unknown subrequest",
        with_status(allocated(result("req-0/b")), first_available("req-0", sub("a"))),
        [f'{ALLOC}.results[0].request: Invalid value: "req-0/b": {REQUEST_REF_MSG}'],
    ),
    (
        "more than 32 results",
        with_status(allocated(*[result(device=f"d{i}") for i in range(33)])),
        [f"{ALLOC}.results: Too many: 33: must have at most 32 items"],
    ),
    (
        "share ID in upper case",
        with_status(allocated(result(shareID=SHARE.upper()))),
        [
            f'{ALLOC}.results[0].shareID: Invalid value: "{SHARE.upper()}": uid must be in RFC 4122 '
            "normalized "
            "form, `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` with lowercase hexadecimal characters"
        ],
    ),
    (
        "share ID that is not a UUID",
        with_status(allocated(result(shareID="share-1"))),
        [
            f'{ALLOC}.results[0].shareID: Invalid value: "share-1": error validating uid: invalid UUID '
            "length: 7"
        ],
    ),
    (
        "binding conditions overlap and repeat",
        with_status(allocated(result(bindingConditions=["A", "A"], bindingFailureConditions=["A"]))),
        [
            f'{ALLOC}.results[0].bindingConditions[1]: Duplicate value: "A"',
            f'{ALLOC}.results[0].bindingFailureConditions[0]: Invalid value: "A": '
            "bindingFailureConditions must not overlap with bindingConditions",
        ],
    ),
    (
        "more than 4 binding conditions",
        with_status(allocated(result(bindingConditions=["a", "b", "c", "d", "e"]))),
        [f"{ALLOC}.results[0].bindingConditions: Too many: 5: must have at most 4 items"],
    ),
    (
        "config without source, with an unknown one",
        with_status(
            allocated(
                result(),
                config=[
                    {"opaque": {"driver": "d.io", "parameters": {}}},
                    {"source": "FromUser", "opaque": {"driver": "d.io", "parameters": {}}},
                ],
            )
        ),
        [
            f"{ALLOC}.config[0].source: Required value",
            f'{ALLOC}.config[1].source: Unsupported value: "FromUser": supported values: "FromClaim", '
            '"FromClass"',
        ],
    ),
    (
        "node selector without terms",
        with_status(allocated(result(), nodeSelector={"nodeSelectorTerms": []})),
        [
            "status.allocation.nodeSelector.nodeSelectorTerms: Required value: must have at least one node "
            "selector term"
        ],
    ),
    (
        "admin result outside an admin namespace",
        with_status(allocated(result(adminAccess=True))),
        [
            f"{ALLOC}.results[0].adminAccess: Forbidden: admin access to devices requires the "
            "`resource.kubernetes.io/admin-access: true` label on the containing namespace"
        ],
    ),
    (
        "status for a device that is not allocated",
        with_status(
            {
                **allocated(result()),
                "devices": [{"driver": "dra.example.com", "pool": "pool", "device": "gpu-9"}],
            }
        ),
        [
            "status.devices[0]: Invalid value: dra.example.com/pool/gpu-9: must be an allocated device in "
            "the claim"
        ],
    ),
    (
        "status for the same device twice",
        with_status(
            {
                **allocated(result()),
                "devices": [{"driver": "dra.example.com", "pool": "pool", "device": "gpu-0"}] * 2,
            }
        ),
        ["status.devices[1]: Duplicate value: dra.example.com/pool/gpu-0"],
    ),
    (
        "device status conditions, data and network data",
        with_status(
            {
                **allocated(result()),
                "devices": [
                    {
                        "driver": "dra.example.com",
                        "pool": "pool",
                        "device": "gpu-0",
                        "conditions": [condition(status="Yes", reason="not valid", lastTransitionTime=None)],
                        "data": [1],
                        "networkData": {
                            "interfaceName": "e" * 257,
                            "hardwareAddress": "m" * 129,
                            "ips": ["10.9.8.7", "10.9.8.07/24", "2001:DB8::1/64", "10.0.0.1/8", "10.0.0.1/8"],
                        },
                    }
                ],
            }
        ),
        [
            'status.devices[0].conditions[0].status: Unsupported value: "Yes": '
            'supported values: "False", "True", "Unknown"',
            "status.devices[0].conditions[0].lastTransitionTime: Required value: must be set",
            'status.devices[0].conditions[0].reason: Invalid value: "not valid": a condition reason must '
            "start "
            "with alphabetic character, optionally followed by a string of alphanumeric characters or '_,:', "
            "and "
            "must end with an alphanumeric character or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName',  "
            "or "
            "'ReasonA,ReasonB',  or 'ReasonA:ReasonB', regex used for validation is "
            "'[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?')",
            'status.devices[0].data: Invalid value: "<value omitted>": must be a valid JSON object',
            "status.devices[0].networkData.interfaceName: Too long: may not be more than 256 bytes",
            "status.devices[0].networkData.hardwareAddress: Too long: may not be more than 128 bytes",
            'status.devices[0].networkData.ips[0]: Invalid value: "10.9.8.7": '
            "must be a valid address in CIDR form, (e.g. 10.9.8.7/24 or 2001:db8::1/64)",
            # IsValidInterfaceAddress parses with netutils.ParseCIDRSloppy: leading zeros are
            # read as decimal, and the value is then merely not canonical.
            'status.devices[0].networkData.ips[1]: Invalid value: "10.9.8.07/24": '
            'must be in canonical form ("10.9.8.7/24")',
            'status.devices[0].networkData.ips[2]: Invalid value: "2001:DB8::1/64": '
            'must be in canonical form ("2001:db8::1/64")',
            'status.devices[0].networkData.ips[4]: Duplicate value: "10.0.0.1/8"',
        ],
    ),
    (
        "more than 8 device conditions",
        with_status(
            {
                **allocated(result()),
                "devices": [
                    {
                        "driver": "dra.example.com",
                        "pool": "pool",
                        "device": "gpu-0",
                        "conditions": [condition(f"C{i}") for i in range(9)],
                    }
                ],
            }
        ),
        ["status.devices[0].conditions: Too many: 9: must have at most 8 items"],
    ),
]


@pytest.mark.parametrize(("obj", "expected"), [pytest.param(o, e, id=name) for name, o, e in INVALID])
def test_invalid_status(obj: dict[str, Any], expected: list[str]) -> None:
    assert lines(obj, labels={}) == expected


def test_stored_allocation_cannot_change() -> None:
    old = with_status(allocated(result()))
    new = changed(old, "status.allocation.devices.results.0.device", "gpu-1")
    assert lines(new, old) == [
        "status.allocation: Invalid value: "
        '{"devices":{"results":[{"device":"gpu-1","driver":"dra.example.com",'
        '"pool":"pool","request":"req-0"}]}}: field is immutable'
    ]


def test_stored_allocation_is_not_revalidated() -> None:
    """A result valid under older rules stays: only new allocations meet today's checks."""
    old = with_status(allocated(result(shareID="not-a-uuid")))
    assert lines({**old, "metadata": {**old["metadata"]}}, old) == []


def test_stored_admin_result_is_not_rechecked_against_the_namespace() -> None:
    old = with_status(allocated(result(adminAccess=True)))
    new = changed(old, "status.reservedFor", [POD])
    assert lines(new, old, labels={}) == []


def test_deallocation_drops_the_allocation() -> None:
    old = with_status(allocated(result()))
    new = changed(old, "status", {})
    assert lines(new, old) == []


def test_deleted_claim_may_lose_but_not_gain_consumers() -> None:
    old = with_status({**allocated(result()), "reservedFor": [POD]})
    old["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert lines(changed(old, "status.reservedFor", []), old) == []
    other = {**POD, "uid": "uid-1", "name": "pod-1"}
    assert lines(changed(old, "status.reservedFor", [POD, other]), old) == [
        "status.reservedFor: Forbidden: new entries may not be added while `deallocationRequested` or "
        "`deletionTimestamp` are set"
    ]


@pytest.mark.parametrize(
    ("address", "problem"),
    [
        ("10.9.8.7/24", None),
        ("10.9.8.0/24", None),
        ("2001:db8::1/64", None),
        ("2001:db8:0:0:1::1/64", 'must be in canonical form ("2001:db8::1:0:0:1/64")'),
        ("10.9.8.7/024", 'must be in canonical form ("10.9.8.7/24")'),
        ("010.009.008.007/24", 'must be in canonical form ("10.9.8.7/24")'),
        # An IPv4-mapped address prints as IPv4, its prefix counted within the IPv4 part.
        ("::ffff:10.9.8.7/120", 'must be in canonical form ("10.9.8.7/24")'),
        ("::ffff:a09:807/120", 'must be in canonical form ("10.9.8.7/24")'),
        ("::10.9.8.7/120", 'must be in canonical form ("::a09:807/120")'),
        ("10.9.8.7", "CIDR"),
        ("10.9.8.7/33", "CIDR"),
        ("10.9.8.7/255.255.255.0", "CIDR"),
        ("10.9.8.7/+24", "CIDR"),
        ("10.9.8.256/24", "CIDR"),
        ("fe80::1%eth0/64", "CIDR"),
        ("1::2::3/64", "CIDR"),
        ("1:2:3:4:5:6:7:8::/64", "CIDR"),
    ],
)
def test_interface_addresses_parse_like_parse_cidr_sloppy(address: str, problem: str | None) -> None:
    """validation.IsValidInterfaceAddress (apimachinery util/validation/ip.go): k8s.io/utils/net
    ParseCIDRSloppy, then a comparison with "<ip>/<prefix length>" as Go prints them."""
    errs = [e.detail for e in validate_interface_address(address, Path("ips"))]
    if problem is None:
        assert errs == []
    elif problem == "CIDR":
        assert errs == ["must be a valid address in CIDR form, (e.g. 10.9.8.7/24 or 2001:db8::1/64)"]
    else:
        assert errs == [problem]


def test_allocation_config_and_network_ips_limits() -> None:
    """validateDeviceAllocationResult: 2 x DeviceConfigMaxSize config entries (class + claim);
    validateNetworkDeviceData: at most NetworkDeviceDataMaxIPs (16) addresses."""
    config = [{"source": "FromClaim", **opaque()}] * 65
    assert lines(with_status(allocated(result(), config=config))) == [
        f"{ALLOC}.config: Too many: 65: must have at most 64 items"
    ]
    ips = [f"10.0.0.{i}/24" for i in range(17)]
    status = {
        **allocated(result()),
        "devices": [
            {"driver": "dra.example.com", "pool": "pool", "device": "gpu-0", "networkData": {"ips": ips}}
        ],
    }
    assert lines(with_status(status)) == [
        "status.devices[0].networkData.ips: Too many: 17: must have at most 16 items"
    ]
