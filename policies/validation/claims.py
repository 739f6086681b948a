"""ResourceClaim (and template) spec and status validation, as the 1.36 API server does it.

``pkg/apis/resource/validation/validation.go``: ``validateDeviceClaim`` for the spec (requests,
subrequests, constraints, config and the references between them) and
``validateResourceClaimStatusUpdate`` for the status (allocation results, reservedFor, per-device
status). A stored allocation is never re-validated, only compared: its rules have tightened over
releases and old allocations must keep working.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from policies.api import resource as r
from policies.validation.core import validate_conditions, validate_interface_address, validate_node_selector
from policies.validation.fielderrors import (
    ErrorList,
    Path,
    forbidden,
    invalid,
    not_supported,
    required,
    too_long,
    too_many,
)
from policies.validation.lists import validate_set, validate_slice
from policies.validation.names import (
    validate_dns_label,
    validate_dns_subdomain,
    validate_driver_name,
    validate_fully_qualified_name,
    validate_pool_name,
    validate_uid,
)
from policies.validation.resource import (
    DEVICE_CONFIG_MAX,
    immutable,
    validate_binding_conditions,
    validate_configuration,
    validate_raw_json_object,
    validate_selectors,
    validate_tolerations,
)

# Limits: resource/v1 types.go constants (dra-reference section 2).
DEVICE_REQUESTS_MAX = 32
FIRST_AVAILABLE_MAX = 8
DEVICE_CONSTRAINTS_MAX = 32
ALLOCATION_RESULTS_MAX = 32
RESERVED_FOR_MAX = 256
DEVICE_STATUS_DATA_MAX_LENGTH = 10 * 1024
DEVICE_STATUS_MAX_CONDITIONS = 8
NETWORK_MAX_IPS = 16
NETWORK_INTERFACE_NAME_MAX = 256
NETWORK_HARDWARE_ADDRESS_MAX = 128

_ALLOCATION_MODES = (r.ALL, r.EXACT_COUNT)
_CONFIG_SOURCES = (r.SOURCE_FROM_CLAIM, r.SOURCE_FROM_CLASS)
_REQUEST_REF_MESSAGE = (
    "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'"
)
_UNION_REQUEST = "exactly one of `exactly` or `firstAvailable` is required"


@dataclass(frozen=True)
class RequestNames:
    """The claim's request names and, for each ``firstAvailable`` request, its subrequest names."""

    subrequests: Mapping[str, frozenset[str] | None]

    @classmethod
    def of(cls, claim: r.DeviceClaim) -> RequestNames:
        names: dict[str, frozenset[str] | None] = {}
        for req in claim.requests or []:
            subs = req.first_available or []
            names[req.name] = frozenset(s.name for s in subs) if subs else None
        return cls(names)

    def has(self, ref: str) -> bool:
        """``req`` or ``req/sub``; a bare ``req`` also covers all of its subrequests."""
        parts = ref.split("/")
        if len(parts) > 2 or parts[0] not in self.subrequests:
            return False
        if len(parts) == 1:
            return True
        subs = self.subrequests[parts[0]]
        return subs is not None and parts[1] in subs


def _validate_request_ref(ref: str, path: Path, names: RequestNames) -> ErrorList:
    parts = ref.split("/")
    if len(parts) > 2:
        return [invalid(path, ref, _REQUEST_REF_MESSAGE)]
    errs: ErrorList = []
    for part in parts:
        errs += validate_dns_label(part, path)
    if not names.has(ref):
        errs.append(invalid(path, ref, _REQUEST_REF_MESSAGE))
    return errs


def _validate_request_refs(refs: list[str] | None, names: RequestNames, path: Path) -> ErrorList:
    return validate_set(
        refs, DEVICE_REQUESTS_MAX, lambda ref, p: _validate_request_ref(ref, p, names), lambda ref: ref, path
    )


def validate_claim_spec(spec: r.ResourceClaimSpec, path: Path, stored: bool = False) -> ErrorList:
    devices = spec.devices
    names = RequestNames.of(devices)
    dpath = path.child("devices")
    errs = validate_set(
        devices.requests,
        DEVICE_REQUESTS_MAX,
        lambda req, p: _validate_request(req, p, stored),
        lambda req: req.name,
        dpath.child("requests"),
    )
    errs += validate_slice(
        devices.constraints,
        DEVICE_CONSTRAINTS_MAX,
        lambda c, p: _validate_constraint(c, p, names),
        dpath.child("constraints"),
    )
    errs += validate_slice(
        devices.config,
        DEVICE_CONFIG_MAX,
        lambda c, p: _validate_claim_config(c, p, names, stored),
        dpath.child("config"),
    )
    return errs


def _validate_request(req: r.DeviceRequest, path: Path, stored: bool) -> ErrorList:
    errs = validate_dns_label(req.name, path.child("name"))
    has_first = bool(req.first_available)
    has_exactly = req.exactly is not None
    if not has_first and not has_exactly:
        errs.append(required(path, _UNION_REQUEST))
    elif has_first and has_exactly:
        errs.append(invalid(path, None, _UNION_REQUEST + ", but multiple fields are set"))
    elif req.exactly is not None:
        errs += _validate_exact(req.exactly, path.child("exactly"), stored)
    else:
        errs += validate_set(
            req.first_available,
            FIRST_AVAILABLE_MAX,
            lambda s, p: _validate_subrequest(s, p, stored),
            lambda s: s.name,
            path.child("firstAvailable"),
        )
    return errs


def _validate_exact(req: r.ExactDeviceRequest, path: Path, stored: bool) -> ErrorList:
    errs = _validate_class_name(req.device_class_name, path.child("deviceClassName"))
    errs += validate_selectors(req.selectors, path.child("selectors"), stored)
    errs += _validate_allocation_mode(req.allocation_mode, req.count, path)
    errs += validate_tolerations(req.tolerations, path.child("tolerations"))
    return errs


def _validate_subrequest(req: r.DeviceSubRequest, path: Path, stored: bool) -> ErrorList:
    errs = validate_dns_label(req.name, path.child("name"))
    errs += _validate_class_name(req.device_class_name, path.child("deviceClassName"))
    errs += validate_selectors(req.selectors, path.child("selectors"), stored)
    errs += _validate_allocation_mode(req.allocation_mode, req.count, path)
    errs += validate_tolerations(req.tolerations, path.child("tolerations"))
    return errs


def _validate_class_name(name: str, path: Path) -> ErrorList:
    return [required(path)] if not name else validate_dns_subdomain(name, path)


def _validate_allocation_mode(mode: str | None, count: int | None, path: Path) -> ErrorList:
    count = count or 0
    if mode == r.ALL:
        if count != 0:
            return [
                invalid(path.child("count"), count, f"must not be specified when allocationMode is '{mode}'")
            ]
    elif mode == r.EXACT_COUNT:
        if count <= 0:
            return [invalid(path.child("count"), count, "must be greater than zero")]
    else:
        return [not_supported(path.child("allocationMode"), mode or "", _ALLOCATION_MODES)]
    return []


def _validate_constraint(constraint: r.DeviceConstraint, path: Path, names: RequestNames) -> ErrorList:
    errs = _validate_request_refs(constraint.requests, names, path.child("requests"))
    if constraint.match_attribute is not None:
        errs += validate_fully_qualified_name(constraint.match_attribute, path.child("matchAttribute"))
    elif constraint.distinct_attribute is not None:
        errs += validate_fully_qualified_name(constraint.distinct_attribute, path.child("distinctAttribute"))
    else:
        # Upstream's wording for "neither is set" (DRAConsumableCapacity on, as in 1.36).
        errs.append(
            required(
                path,
                'exactly one of "matchAttribute" or "distinctAttribute" is required, '
                "but multiple fields are set",
            )
        )
    return errs


def _validate_claim_config(
    config: r.DeviceClaimConfiguration, path: Path, names: RequestNames, stored: bool
) -> ErrorList:
    errs = _validate_request_refs(config.requests, names, path.child("requests"))
    errs += validate_configuration(config, path, stored)
    return errs


@dataclass(frozen=True)
class SharedDeviceID:
    """driver/pool/device[/shareID]; prints unquoted, as Go prints a Stringer."""

    driver: str
    pool: str
    device: str
    share_id: str | None

    def __str__(self) -> str:
        text = f"{self.driver}/{self.pool}/{self.device}"
        return f"{text}/{self.share_id}" if self.share_id is not None else text


def validate_claim_status(claim: r.ResourceClaim, old: r.ResourceClaimStatus | None, path: Path) -> ErrorList:
    """A status write (``ValidateResourceClaimStatusUpdate``); ``old`` is None for a first write."""
    status = claim.status or r.ResourceClaimStatus()
    old = old or r.ResourceClaimStatus()
    names = RequestNames.of(claim.spec.devices)
    errs = validate_set(
        status.reserved_for, RESERVED_FOR_MAX, _validate_consumer, lambda c: c.uid, path.child("reservedFor")
    )
    allocated = _allocated_devices(status.allocation)
    errs += validate_set(
        status.devices,
        -1,
        lambda d, p: _validate_device_status(d, p, allocated),
        _status_device_id,
        path.child("devices"),
    )
    if status.reserved_for:
        if status.allocation is None:
            errs.append(
                forbidden(path.child("reservedFor"), "may not be specified when `allocated` is not set")
            )
        elif claim.metadata.deletion_timestamp is not None:
            before = {_consumer_key(c) for c in old.reserved_for or []}
            if any(_consumer_key(c) not in before for c in status.reserved_for):
                errs.append(
                    forbidden(
                        path.child("reservedFor"),
                        "new entries may not be added while "
                        "`deallocationRequested` or `deletionTimestamp` are set",
                    )
                )
    if old.allocation is not None and status.allocation is not None:
        errs += immutable(status.allocation, old.allocation, path.child("allocation"))
    elif status.allocation is not None:
        errs += _validate_allocation(status.allocation, path.child("allocation"), names)
    return errs


def _consumer_key(ref: r.ResourceClaimConsumerReference) -> tuple[str, str, str, str]:
    return (ref.api_group or "", ref.resource, ref.name, ref.uid)


def _validate_consumer(ref: r.ResourceClaimConsumerReference, path: Path) -> ErrorList:
    return [
        required(path.child(name))
        for name, value in (("resource", ref.resource), ("name", ref.name), ("uid", ref.uid))
        if not value
    ]


def _allocated_devices(allocation: r.AllocationResult | None) -> set[SharedDeviceID]:
    if allocation is None or allocation.devices is None:
        return set()
    return {
        SharedDeviceID(res.driver, res.pool, res.device, res.share_id)
        for res in allocation.devices.results or []
    }


def _status_device_id(device: r.AllocatedDeviceStatus) -> SharedDeviceID:
    return SharedDeviceID(device.driver, device.pool, device.device, device.share_id)


def _validate_device_status(
    device: r.AllocatedDeviceStatus, path: Path, allocated: set[SharedDeviceID]
) -> ErrorList:
    errs = validate_driver_name(device.driver, path.child("driver"))
    errs += validate_pool_name(device.pool, path.child("pool"))
    errs += validate_dns_label(device.device, path.child("device"))
    if device.share_id is not None:
        errs += validate_uid(device.share_id, path.child("shareID"))
    device_id = _status_device_id(device)
    if device_id not in allocated:
        errs.append(invalid(path, device_id, "must be an allocated device in the claim"))
    conditions = device.conditions or []
    if len(conditions) > DEVICE_STATUS_MAX_CONDITIONS:
        errs.append(too_many(path.child("conditions"), len(conditions), DEVICE_STATUS_MAX_CONDITIONS))
    errs += validate_conditions(conditions, path.child("conditions"))
    if device.data is not None:
        errs += validate_raw_json_object(
            device.data, path.child("data"), False, DEVICE_STATUS_DATA_MAX_LENGTH
        )
    if device.network_data is not None:
        errs += _validate_network_data(device.network_data, path.child("networkData"))
    return errs


def _validate_network_data(data: r.NetworkDeviceData, path: Path) -> ErrorList:
    errs: ErrorList = []
    if len((data.interface_name or "").encode()) > NETWORK_INTERFACE_NAME_MAX:
        errs.append(too_long(path.child("interfaceName"), NETWORK_INTERFACE_NAME_MAX))
    if len((data.hardware_address or "").encode()) > NETWORK_HARDWARE_ADDRESS_MAX:
        errs.append(too_long(path.child("hardwareAddress"), NETWORK_HARDWARE_ADDRESS_MAX))
    errs += validate_set(
        data.ips, NETWORK_MAX_IPS, validate_interface_address, lambda ip: ip, path.child("ips")
    )
    return errs


def _validate_allocation(allocation: r.AllocationResult, path: Path, names: RequestNames) -> ErrorList:
    """Checks for a *new* allocation; stored allocations are only compared, never re-validated."""
    devices = allocation.devices or r.DeviceAllocationResult()
    dpath = path.child("devices")
    errs = validate_slice(
        devices.results,
        ALLOCATION_RESULTS_MAX,
        lambda res, p: _validate_result(res, p, names),
        dpath.child("results"),
    )
    errs += validate_slice(
        devices.config,
        2 * DEVICE_CONFIG_MAX,
        lambda c, p: _validate_allocation_config(c, p, names),
        dpath.child("config"),
    )
    if allocation.node_selector is not None:
        errs += validate_node_selector(allocation.node_selector, path.child("nodeSelector"))
    return errs


def _validate_result(result: r.DeviceRequestAllocationResult, path: Path, names: RequestNames) -> ErrorList:
    errs = _validate_request_ref(result.request, path.child("request"), names)
    errs += validate_driver_name(result.driver, path.child("driver"))
    errs += validate_pool_name(result.pool, path.child("pool"))
    errs += validate_dns_label(result.device, path.child("device"))
    errs += validate_binding_conditions(result.binding_conditions, result.binding_failure_conditions, path)
    errs += validate_tolerations(result.tolerations, path.child("tolerations"))
    if result.share_id is not None:
        errs += validate_uid(result.share_id, path.child("shareID"))
    return errs


def _validate_allocation_config(
    config: r.DeviceAllocationConfiguration, path: Path, names: RequestNames
) -> ErrorList:
    errs: ErrorList = []
    if not config.source:
        errs.append(required(path.child("source")))
    elif config.source not in _CONFIG_SOURCES:
        errs.append(not_supported(path.child("source"), config.source, _CONFIG_SOURCES))
    errs += _validate_request_refs(config.requests, names, path.child("requests"))
    errs += validate_configuration(config, path, False)
    return errs
