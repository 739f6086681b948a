"""API-server validation of the resource.k8s.io kinds (Kubernetes 1.36).

Mirrors ``pkg/apis/resource/validation/validation.go`` plus the declarative tags of
``staging/src/k8s.io/api/resource/v1/types.go``: the same checks, in the same order, with the same
messages and field paths, so a manifest that draguard rejects is rejected by the API server with
the same words, and the other way round. Objects arrive already defaulted (see
:func:`policies.validation.validate`), as they do in the API server.

"Stored" means the value is unchanged from the object already in the cluster: upstream does not
re-check such CEL expressions and opaque parameters (their limits may have been tightened since
they were written), and neither does this module.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from policies.api import resource as r
from policies.api.base import ApiModel
from policies.api.quantity import Quantity
from policies.validation.cel import validate_cel_expression
from policies.validation.core import validate_conditions, validate_interface_address, validate_node_selector
from policies.validation.fielderrors import (
    ErrorList,
    Path,
    duplicate,
    forbidden,
    invalid,
    not_found,
    not_supported,
    required,
    too_long,
    too_many,
)
from policies.validation.lists import no_item_checks, validate_map, validate_set, validate_slice
from policies.validation.meta import IMMUTABLE, IS_NEGATIVE_ERROR
from policies.validation.names import (
    DEVICE_MAX_DOMAIN_LENGTH,
    DEVICE_MAX_ID_LENGTH,
    DNS1123_LABEL_MAX,
    is_extended_resource_name,
    is_node_allocatable_resource_name,
    validate_dns_label,
    validate_dns_subdomain,
    validate_driver_name,
    validate_fully_qualified_name,
    validate_label_name,
    validate_label_value,
    validate_node_name,
    validate_pool_name,
    validate_qualified_name,
    validate_uid,
)

# --- limits (types.go constants; dra-reference section 2) --------------------------------------------

DEVICE_REQUESTS_MAX = 32
FIRST_AVAILABLE_MAX = 8
DEVICE_SELECTORS_MAX = 32
DEVICE_CONSTRAINTS_MAX = 32
DEVICE_CONFIG_MAX = 32
ALLOCATION_RESULTS_MAX = 32
DEVICE_TOLERATIONS_MAX = 16
RESERVED_FOR_MAX = 256
SLICE_MAX_DEVICES = 128
SLICE_MAX_DEVICES_ADVANCED = 64
SLICE_MAX_COUNTER_SETS = 8
COUNTERS_PER_SET_MAX = 32
COUNTER_CONSUMPTIONS_PER_DEVICE_MAX = 2
COUNTERS_PER_CONSUMPTION_MAX = 32
ATTRIBUTES_AND_CAPACITIES_MAX = 32
ATTRIBUTE_VALUES_MAX = 48
ATTRIBUTE_VALUE_MAX_LENGTH = 64
DEVICE_TAINTS_MAX = 16
BINDING_CONDITIONS_MAX = 4
BINDING_FAILURE_CONDITIONS_MAX = 4
REQUEST_POLICY_VALID_VALUES_MAX = 10
OPAQUE_PARAMETERS_MAX_LENGTH = 10 * 1024
DEVICE_STATUS_DATA_MAX_LENGTH = 10 * 1024
DEVICE_STATUS_MAX_CONDITIONS = 8
NETWORK_MAX_IPS = 16
NETWORK_INTERFACE_NAME_MAX = 256
NETWORK_HARDWARE_ADDRESS_MAX = 128
TAINT_RULE_MAX_CONDITIONS = 8
MAX_INT64 = 2**63 - 1

# Longest attribute/capacity key shown unshortened in a path: "<domain>/<id>".
_QUALIFIED_KEY_MAX = DEVICE_MAX_DOMAIN_LENGTH + 1 + DEVICE_MAX_ID_LENGTH

_ALLOCATION_MODES = (r.ALL, r.EXACT_COUNT)
_CONFIG_SOURCES = (r.SOURCE_FROM_CLAIM, r.SOURCE_FROM_CLASS)
_TOLERATION_OPERATORS = ("Equal", "Exists")
_TAINT_EFFECTS = ("NoExecute", "NoSchedule", "None")  # sorted, as sets.List prints them

_REQUEST_REF_MESSAGE = (
    "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'"
)
_UNION_REQUEST = "exactly one of `exactly` or `firstAvailable` is required"
_UNION_SLICE_NODES = (
    "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required"
)
_UNION_DEVICE_NODES = (
    "exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required when `perDeviceNodeSelection` "
    "is set to true in the ResourceSlice spec"
)


def _same(a: object, b: object) -> bool:
    """Semantic equality of two model values (what upstream's DeepEqual answers)."""
    return _plain(a) == _plain(b)


def _plain(value: object) -> object:
    if isinstance(value, ApiModel):
        return value.to_json()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def immutable(new: object, old: object, path: Path) -> ErrorList:
    """``ValidateImmutableField``: report the new value when it differs from the old one."""
    return [] if _same(new, old) else [invalid(path, _plain(new), IMMUTABLE)]


# --- request references --------------------------------------------------------------------------------


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


# --- claim spec ----------------------------------------------------------------------------------------


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
    errs += _validate_selectors(req.selectors, path.child("selectors"), stored)
    errs += _validate_allocation_mode(req.allocation_mode, req.count, path)
    errs += _validate_tolerations(req.tolerations, path.child("tolerations"))
    return errs


def _validate_subrequest(req: r.DeviceSubRequest, path: Path, stored: bool) -> ErrorList:
    errs = validate_dns_label(req.name, path.child("name"))
    errs += _validate_class_name(req.device_class_name, path.child("deviceClassName"))
    errs += _validate_selectors(req.selectors, path.child("selectors"), stored)
    errs += _validate_allocation_mode(req.allocation_mode, req.count, path)
    errs += _validate_tolerations(req.tolerations, path.child("tolerations"))
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


def _validate_tolerations(tolerations: list[r.DeviceToleration] | None, path: Path) -> ErrorList:
    # The 16-entry limit is declarative in 1.36 (+k8s:maxItems); the handwritten code checks items only.
    if tolerations is not None and len(tolerations) > DEVICE_TOLERATIONS_MAX:
        return [too_many(path, len(tolerations), DEVICE_TOLERATIONS_MAX)]
    errs: ErrorList = []
    for i, toleration in enumerate(tolerations or []):
        errs += validate_toleration(toleration, path.index(i))
    return errs


def _validate_selectors(selectors: list[r.DeviceSelector] | None, path: Path, stored: bool) -> ErrorList:
    return validate_slice(
        selectors, DEVICE_SELECTORS_MAX, lambda s, p: _validate_selector(s, p, stored), path
    )


def _validate_selector(selector: r.DeviceSelector, path: Path, stored: bool) -> ErrorList:
    if selector.cel is None:
        return [required(path.child("cel"))]
    if stored:
        return []
    return validate_cel_expression(selector.cel.expression, path.child("cel", "expression"))


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
    errs += _validate_configuration(config, path, stored)
    return errs


def _validate_configuration(config: r.DeviceConfiguration, path: Path, stored: bool) -> ErrorList:
    if config.opaque is None:
        return [required(path.child("opaque"))]
    opaque = config.opaque
    errs = validate_driver_name(opaque.driver, path.child("opaque", "driver"))
    errs += validate_raw_json_object(
        opaque.parameters, path.child("opaque", "parameters"), stored, OPAQUE_PARAMETERS_MAX_LENGTH
    )
    return errs


def validate_raw_json_object(value: Any, path: Path, stored: bool, max_length: int) -> ErrorList:
    """A ``runtime.RawExtension`` that must hold a JSON object of at most ``max_length`` bytes.

    The size is that of the compact JSON kubectl sends; stored values are exempt from the limit
    (it was introduced in 1.32 and existing objects keep working).
    """
    if value is None:
        return [required(path)]
    raw = json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
    if not stored and len(raw) > max_length:
        return [too_long(path, max_length)]
    if not isinstance(value, dict):
        return [invalid(path, "<value omitted>", "must be a valid JSON object")]
    return []


# --- tolerations and taints ------------------------------------------------------------------------------


def validate_toleration(toleration: r.DeviceToleration, path: Path) -> ErrorList:
    errs: ErrorList = []
    if toleration.key:
        errs += validate_label_name(toleration.key, path.child("key"))
    operator = toleration.operator or ""
    value = toleration.value or ""
    if operator == "Exists":
        if value:
            errs.append(invalid(path.child("value"), value, "must be empty for operator `Exists`"))
    elif operator == "Equal":
        errs += validate_label_value(value, path.child("value"))
    elif not operator:
        errs.append(required(path.child("operator")))
    else:
        errs.append(not_supported(path.child("operator"), operator, _TOLERATION_OPERATORS))
    if toleration.effect and toleration.effect not in _TAINT_EFFECTS:
        errs.append(not_supported(path.child("effect"), toleration.effect, _TAINT_EFFECTS))
    return errs


def validate_taint(taint: r.DeviceTaint, old: r.DeviceTaint | None, path: Path) -> ErrorList:
    """An unchanged effect is not re-checked, so effects added by a newer release keep working."""
    errs = validate_label_name(taint.key, path.child("key"))
    if taint.value:
        errs += validate_label_value(taint.value, path.child("value"))
    if old is None or old.effect != taint.effect:
        if not taint.effect:
            errs.append(required(path.child("effect")))
        elif taint.effect not in _TAINT_EFFECTS:
            errs.append(not_supported(path.child("effect"), taint.effect, _TAINT_EFFECTS))
    return errs


def _validate_binding_conditions(
    conditions: list[str] | None, failures: list[str] | None, path: Path
) -> ErrorList:
    conditions, failures = conditions or [], failures or []
    errs = validate_slice(
        conditions, BINDING_CONDITIONS_MAX, validate_label_name, path.child("bindingConditions")
    )
    errs += validate_slice(
        failures, BINDING_FAILURE_CONDITIONS_MAX, validate_label_name, path.child("bindingFailureConditions")
    )
    seen: set[str] = set()
    for i, cond in enumerate(conditions):
        if cond in seen:
            errs.append(duplicate(path.child("bindingConditions").index(i), cond))
        seen.add(cond)
    seen_failures: set[str] = set()
    for i, cond in enumerate(failures):
        item = path.child("bindingFailureConditions").index(i)
        if cond in seen_failures:
            errs.append(duplicate(item, cond))
        seen_failures.add(cond)
        if cond in seen:
            errs.append(
                invalid(item, cond, "bindingFailureConditions must not overlap with bindingConditions")
            )
    return errs


# --- claim status ------------------------------------------------------------------------------------------


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
    errs += _validate_binding_conditions(result.binding_conditions, result.binding_failure_conditions, path)
    errs += _validate_tolerations(result.tolerations, path.child("tolerations"))
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
    errs += _validate_configuration(config, path, False)
    return errs


# --- DeviceClass -----------------------------------------------------------------------------------------


def validate_class_spec(spec: r.DeviceClassSpec, old: r.DeviceClassSpec | None, path: Path) -> ErrorList:
    """Selectors and config are "stored" only when the whole list is unchanged (even reordering counts)."""
    selectors_stored = old is not None and _same(spec.selectors, old.selectors)
    errs = _validate_selectors(spec.selectors, path.child("selectors"), selectors_stored)
    config_stored = old is not None and _same(spec.config, old.config)
    errs += validate_slice(
        spec.config,
        DEVICE_CONFIG_MAX,
        lambda c, p: _validate_configuration(c, p, config_stored),
        path.child("config"),
    )
    name = spec.extended_resource_name
    if name is not None and not is_extended_resource_name(name):
        errs.append(
            invalid(path.child("extendedResourceName"), name, "must be a valid extended resource name")
        )
    return errs


# --- ResourceSlice --------------------------------------------------------------------------------------


def validate_slice_spec(spec: r.ResourceSliceSpec, old: r.ResourceSliceSpec | None, path: Path) -> ErrorList:
    errs = validate_driver_name(spec.driver, path.child("driver"))
    errs += _validate_pool(spec.pool, path.child("pool"))
    if old is not None:
        errs += immutable(spec.pool.name, old.pool.name, path.child("pool", "name"))
        errs += immutable(spec.driver, old.driver, path.child("driver"))
        errs += immutable(spec.node_name, old.node_name, path.child("nodeName"))
    errs += _validate_slice_node_selection(spec, path)
    if spec.shared_counters is not None and spec.devices is not None:
        errs.append(invalid(path, "", "only one of `sharedCounters` or `devices` is allowed"))
    old_devices = {d.name: d for d in old.devices or []} if old is not None else {}
    per_device = spec.per_device_node_selection is True
    errs += validate_set(
        spec.devices,
        _max_devices(spec),
        lambda d, p: _validate_device(d, old_devices.get(d.name), p, per_device),
        lambda d: d.name,
        path.child("devices"),
    )
    errs += validate_set(
        spec.shared_counters,
        SLICE_MAX_COUNTER_SETS,
        _validate_counter_set,
        lambda c: c.name,
        path.child("sharedCounters"),
    )
    return errs


def _validate_pool(pool: r.ResourcePool, path: Path) -> ErrorList:
    errs = validate_pool_name(pool.name, path.child("name"))
    if pool.resource_slice_count <= 0:
        errs.append(
            invalid(path.child("resourceSliceCount"), pool.resource_slice_count, "must be greater than zero")
        )
    if pool.generation < 0:
        errs.append(
            invalid(path.child("generation"), pool.generation, "must be greater than or equal to zero")
        )
    return errs


def _validate_slice_node_selection(spec: r.ResourceSliceSpec, path: Path) -> ErrorList:
    errs: ErrorList = []
    chosen: list[str] = []
    if spec.node_name is not None:
        if spec.node_name:
            chosen.append("`nodeName`")
            errs += validate_node_name(spec.node_name, path.child("nodeName"))
        else:
            errs.append(
                invalid(path.child("nodeName"), "", "must be either unset or set to a non-empty string")
            )
    if spec.node_selector is not None:
        chosen.append("`nodeSelector`")
        errs += validate_node_selector(spec.node_selector, path.child("nodeSelector"))
        terms = spec.node_selector.node_selector_terms
        if len(terms) != 1:
            errs.append(
                invalid(
                    path.child("nodeSelector", "nodeSelectorTerms"),
                    _plain(terms),
                    "must have exactly one node selector term",
                )
            )
    errs += _true_if_set(spec.all_nodes, "`allNodes`", path.child("allNodes"), chosen)
    errs += _true_if_set(
        spec.per_device_node_selection,
        "`perDeviceNodeSelection`",
        path.child("perDeviceNodeSelection"),
        chosen,
    )
    if not chosen:
        errs.append(required(path, _UNION_SLICE_NODES))
    elif len(chosen) > 1:
        errs.append(
            invalid(path, "{" + ", ".join(chosen) + "}", _UNION_SLICE_NODES + ", but multiple fields are set")
        )
    return errs


def _true_if_set(flag: bool | None, label: str, path: Path, chosen: list[str]) -> ErrorList:
    if flag is None:
        return []
    if flag:
        chosen.append(label)
        return []
    return [invalid(path, False, "must be either unset or set to true")]


def _has_list_attributes(device: r.Device) -> bool:
    return any(
        a.ints is not None or a.bools is not None or a.strings is not None or a.versions is not None
        for a in (device.attributes or {}).values()
    )


def _max_devices(spec: r.ResourceSliceSpec) -> int:
    """64 instead of 128 when any device uses taints, counters or list attributes."""
    advanced = any(d.taints or d.consumes_counters or _has_list_attributes(d) for d in spec.devices or [])
    return SLICE_MAX_DEVICES_ADVANCED if advanced else SLICE_MAX_DEVICES


def _attribute_values(device: r.Device) -> int:
    """Scalars count one, lists count their items."""
    total = 0
    for attr in (device.attributes or {}).values():
        items = (
            len(attr.ints or []) + len(attr.bools or []) + len(attr.strings or []) + len(attr.versions or [])
        )
        total += items or 1
    return total


def _validate_device(device: r.Device, old: r.Device | None, path: Path, per_device: bool) -> ErrorList:
    errs = validate_dns_label(device.name, path.child("name"))
    combined = len(device.attributes or {}) + len(device.capacity or {})
    if combined > ATTRIBUTES_AND_CAPACITIES_MAX:
        errs.append(
            invalid(
                path,
                combined,
                "the total number of attributes and capacities must not exceed "
                f"{ATTRIBUTES_AND_CAPACITIES_MAX}",
            )
        )
    values = _attribute_values(device)
    if values > ATTRIBUTE_VALUES_MAX:
        errs.append(
            invalid(
                path, values, f"the total number of attribute values must not exceed {ATTRIBUTE_VALUES_MAX}"
            )
        )
    errs += validate_map(
        device.attributes,
        -1,
        _QUALIFIED_KEY_MAX,
        validate_qualified_name,
        _validate_attribute,
        path.child("attributes"),
    )
    if old is None or not _same(old.capacity, device.capacity):
        check = (
            _validate_shared_capacity if device.allow_multiple_allocations else _validate_exclusive_capacity
        )
        errs += validate_map(
            device.capacity, -1, _QUALIFIED_KEY_MAX, validate_qualified_name, check, path.child("capacity")
        )
    if old is None or not _same(old.taints, device.taints):
        errs += validate_slice(
            device.taints, DEVICE_TAINTS_MAX, lambda t, p: validate_taint(t, None, p), path.child("taints")
        )
    errs += validate_set(
        device.consumes_counters,
        COUNTER_CONSUMPTIONS_PER_DEVICE_MAX,
        _validate_consumption,
        lambda c: c.counter_set,
        path.child("consumesCounters"),
    )
    errs += _validate_device_node_selection(device, path, per_device)
    errs += _validate_binding_conditions(device.binding_conditions, device.binding_failure_conditions, path)
    errs += _validate_mappings_136(device, path.child("nodeAllocatableResourceMappings"))
    errs += _validate_node_allocatable(device, path.child("nodeAllocatableResources"))
    return errs


def _validate_device_node_selection(device: r.Device, path: Path, per_device: bool) -> ErrorList:
    if not per_device:
        if device.node_name is not None or device.node_selector is not None or device.all_nodes is not None:
            return [
                invalid(
                    path,
                    None,
                    "`nodeName`, `nodeSelector` and `allNodes` can only be set if "
                    "`perDeviceNodeSelection` is set to true in the ResourceSlice spec",
                )
            ]
        return []
    errs: ErrorList = []
    chosen: list[str] = []
    if device.node_name is not None:
        if device.node_name:
            chosen.append("`nodeName`")
            errs += validate_node_name(device.node_name, path.child("nodeName"))
        else:
            errs.append(invalid(path.child("nodeName"), "", "must not be empty"))
    if device.node_selector is not None:
        chosen.append("`nodeSelector`")
        errs += validate_node_selector(device.node_selector, path.child("nodeSelector"))
    errs += _true_if_set(device.all_nodes, "`allNodes`", path.child("allNodes"), chosen)
    if not chosen:
        errs.append(required(path, _UNION_DEVICE_NODES))
    elif len(chosen) > 1:
        errs.append(invalid(path, "{" + ", ".join(chosen) + "}", _UNION_DEVICE_NODES))
    return errs


# Semantic versioning 2.0.0 without leading zeros in numeric identifiers (Go's regexp \d is ASCII).
_NUMERIC = r"(0|[1-9]\d*)"
_PRERELEASE = r"(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)"
_BUILD = r"[0-9a-zA-Z-]+"
_SEMVER = re.compile(
    rf"{_NUMERIC}\.{_NUMERIC}\.{_NUMERIC}(-{_PRERELEASE}(\.{_PRERELEASE})*)?(\+{_BUILD}(\.{_BUILD})*)?",
    re.ASCII,
)


def _validate_string_value(value: str, path: Path) -> ErrorList:
    return (
        [too_long(path, ATTRIBUTE_VALUE_MAX_LENGTH)]
        if len(value.encode()) > ATTRIBUTE_VALUE_MAX_LENGTH
        else []
    )


def _validate_version_value(value: str, path: Path) -> ErrorList:
    errs: ErrorList = []
    if not _SEMVER.fullmatch(value):
        errs.append(invalid(path, value, "must be a string compatible with semver.org spec 2.0.0"))
    errs += _validate_string_value(value, path)
    return errs


def _validate_attribute(attr: r.DeviceAttribute, path: Path) -> ErrorList:
    errs: ErrorList = []
    members = 0
    for scalar in (attr.bool_, attr.int_):
        members += scalar is not None
    if attr.string is not None:
        members += 1
        errs += _validate_string_value(attr.string, path.child("string"))
    if attr.version is not None:
        members += 1
        errs += _validate_version_value(attr.version, path.child("version"))
    lists: Sequence[tuple[str, list[Any] | None]] = (
        ("bools", attr.bools),
        ("ints", attr.ints),
        ("strings", attr.strings),
        ("versions", attr.versions),
    )
    for name, items in lists:
        if items is None:
            continue
        members += 1
        if not items:
            errs.append(invalid(path.child(name), items, "must not be empty if specified"))
        for i, item in enumerate(items):
            if name == "strings":
                errs += _validate_string_value(item, path.child(name).index(i))
            elif name == "versions":
                errs += _validate_version_value(item, path.child(name).index(i))
    if members == 0:
        errs.append(invalid(path, "", "exactly one value must be specified"))
    elif members > 1:
        errs.append(invalid(path, attr.to_json(), "exactly one value must be specified"))
    return errs


def _validate_exclusive_capacity(capacity: r.DeviceCapacity, path: Path) -> ErrorList:
    if capacity.request_policy is not None:
        return [forbidden(path.child("requestPolicy"), "allowMultipleAllocations must be true")]
    return []


def _validate_shared_capacity(capacity: r.DeviceCapacity, path: Path) -> ErrorList:
    policy = capacity.request_policy
    if policy is None:
        return []
    ppath = path.child("requestPolicy")
    if policy.valid_values and policy.valid_range is not None:
        return [
            forbidden(
                ppath,
                'exactly one policy can be specified, cannot specify "validValues" and '
                '"validRange" at the same time',
            )
        ]
    if policy.valid_values:
        if policy.default is None:
            return [required(ppath.child("default"), "required when validValues is defined")]
        return _validate_valid_values(
            policy.default, capacity.value, policy.valid_values, ppath.child("validValues")
        )
    if policy.valid_range is not None:
        if policy.default is None:
            return [required(ppath.child("default"), "required when validRange is defined")]
        return _validate_valid_range(
            policy.default, capacity.value, policy.valid_range, ppath.child("validRange")
        )
    return []


def _validate_valid_values(
    default: Quantity, capacity: Quantity, values: list[Quantity], path: Path
) -> ErrorList:
    errs: ErrorList = []
    for i in range(len(values) - 1):
        if values[i] > values[i + 1]:
            errs.append(
                invalid(path.index(i + 1), str(values[i + 1]), "values must be sorted in ascending order")
            )

    def check(option: Quantity, p: Path) -> ErrorList:
        if option > capacity:
            return [invalid(p, str(option), f"option is larger than capacity value: {capacity}")]
        return []

    errs += validate_set(values, REQUEST_POLICY_VALID_VALUES_MAX, check, lambda q: str(q.value()), path)
    if len(values) > REQUEST_POLICY_VALID_VALUES_MAX or not any(v == default for v in values):
        errs.append(invalid(path, str(default), "default value is not valid according to the requestPolicy"))
    return errs


def _validate_valid_range(
    default: Quantity, capacity: Quantity, valid: r.CapacityRequestPolicyRange, path: Path
) -> ErrorList:
    """Integer arithmetic throughout (DRAFractionalCapacityRange does not exist in 1.36)."""
    if valid.min is None:
        return [required(path.child("min"), "required when validRange is defined")]
    low = valid.min
    errs: ErrorList = []
    if low > capacity:
        errs.append(invalid(path.child("min"), str(low), f"min is larger than capacity value: {capacity}"))
    if default < low:
        errs.append(invalid(path.child("default"), str(default), f"default is less than min: {low}"))
    if valid.max is not None:
        high = valid.max
        if low > high:
            errs.append(invalid(path.child("max"), str(low), f"min is larger than max: {high}"))
        if high > capacity:
            errs.append(
                invalid(path.child("max"), str(high), f"max is larger than capacity value: {capacity}")
            )
        if default > high:
            errs.append(invalid(path.child("default"), str(default), f"default is more than max: {high}"))
    if valid.step is None:
        return errs
    step = valid.step
    if step.sign() <= 0:
        errs.append(invalid(path.child("step"), str(step), "must be greater than zero"))
        return errs
    one_step = low.add(step)
    if one_step > capacity:
        errs.append(
            invalid(
                path.child("step"),
                str(step),
                f"one step {one_step} is larger than capacity value: {capacity}",
            )
        )
    bounds = [("default", default), ("min", low), ("max", valid.max), ("step", step)]
    unsafe = [e for name, q in bounds if q is not None for e in _int64_range(q, path.child(name))]
    if unsafe:
        return errs + unsafe
    errs += _step_multiple(default, low, step, path.child("step"))
    if valid.max is not None:
        errs += _step_multiple(valid.max, low, step, path.child("step"))
    return errs


def _int64_range(q: Quantity, path: Path) -> ErrorList:
    """Step arithmetic reads ``Value()``, which only means something in [0, MaxInt64]."""
    if q.sign() < 0:
        return [invalid(path, str(q), IS_NEGATIVE_ERROR)]
    if q > Quantity.from_int(MAX_INT64):
        return [invalid(path, str(q), f"must not be larger than {MAX_INT64}")]
    return []


def _step_multiple(value: Quantity, low: Quantity, step: Quantity, path: Path) -> ErrorList:
    if (value.value() - low.value()) % step.value() != 0:
        return [invalid(path, str(value), f"value is not a multiple of a given step ({step}) from ({low})")]
    return []


def _validate_counter_name(name: str, path: Path) -> ErrorList:
    return validate_dns_label(name, path)


def _validate_counters(counters: dict[str, r.Counter] | None, limit: int, path: Path) -> ErrorList:
    if not counters:
        return [required(path)]
    return validate_map(counters, limit, DNS1123_LABEL_MAX, _validate_counter_name, no_item_checks, path)


def _validate_counter_set(counter_set: r.CounterSet, path: Path) -> ErrorList:
    if not counter_set.name:
        errs = [required(path.child("name"))]
    else:
        errs = _validate_counter_name(counter_set.name, path.child("name"))
    errs += _validate_counters(counter_set.counters, COUNTERS_PER_SET_MAX, path.child("counters"))
    return errs


def _validate_consumption(consumption: r.DeviceCounterConsumption, path: Path) -> ErrorList:
    if not consumption.counter_set:
        errs = [required(path.child("counterSet"))]
    else:
        errs = _validate_counter_name(consumption.counter_set, path.child("counterSet"))
    errs += _validate_counters(consumption.counters, COUNTERS_PER_CONSUMPTION_MAX, path.child("counters"))
    return errs


def _validate_resource_key(name: str, path: Path) -> ErrorList:
    if is_node_allocatable_resource_name(name):
        return []
    return [invalid(path, name, "must be a node allocatable resource name")]


def _validate_capacity_key(key: str, capacities: Mapping[str, r.DeviceCapacity], path: Path) -> ErrorList:
    if not key:
        return [invalid(path, "", "capacityKey must not be an empty string")]
    return [] if key in capacities else [not_found(path, key)]


def _positive(q: Quantity | None, path: Path) -> ErrorList:
    return [invalid(path, str(q), "must be positive")] if q is not None and q.sign() <= 0 else []


def _validate_mappings_136(device: r.Device, path: Path) -> ErrorList:
    """The 1.36 alpha shape ``{capacityKey?, allocationMultiplier?}`` (multiplier defaulted to 1).

    1.36's own checks were not available to port; these apply the 1.37 rules to the 1.36 fields:
    a node-allocatable resource name as key, an existing capacity as ``capacityKey``, a positive
    multiplier.
    """
    errs: ErrorList = []
    capacities = device.capacity or {}
    for name, mapping in (device.node_allocatable_resource_mappings or {}).items():
        key_path = path.key(name)
        errs += _validate_resource_key(name, key_path)
        if mapping.capacity_key is not None:
            errs += _validate_capacity_key(mapping.capacity_key, capacities, key_path.child("capacityKey"))
        errs += _positive(mapping.allocation_multiplier, key_path.child("allocationMultiplier"))
    return errs


def _validate_node_allocatable(device: r.Device, path: Path) -> ErrorList:
    """The 1.37 shape ``{mapping?: {capacityKey, capacityMultiplier | deviceMultiplier}, overhead?}``."""
    errs: ErrorList = []
    capacities = device.capacity or {}
    for name, resource in (device.node_allocatable_resources or {}).items():
        key_path = path.key(name)
        errs += _validate_resource_key(name, key_path)
        if resource.mapping is None and resource.overhead is None:
            errs.append(required(key_path, "at least one of mapping or overhead must be set"))
        if resource.mapping is not None:
            errs += _validate_mapping(resource.mapping, capacities, key_path.child("mapping"))
        if resource.overhead is not None:
            errs += _validate_overhead(resource.overhead, key_path.child("overhead"))
    return errs


def _validate_mapping(
    mapping: r.NodeAllocatableMapping, capacities: Mapping[str, r.DeviceCapacity], path: Path
) -> ErrorList:
    errs: ErrorList = []
    if mapping.capacity_key is not None:
        errs += _validate_capacity_key(mapping.capacity_key, capacities, path.child("capacityKey"))
        if mapping.capacity_multiplier is None:
            errs.append(
                required(
                    path.child("capacityMultiplier"), "capacityMultiplier is required when capacityKey is set"
                )
            )
        else:
            errs += _positive(mapping.capacity_multiplier, path.child("capacityMultiplier"))
    errs += _positive(mapping.device_multiplier, path.child("deviceMultiplier"))
    if mapping.capacity_multiplier is not None and mapping.capacity_key is None:
        errs.append(
            required(path.child("capacityKey"), "capacityKey is required when capacityMultiplier is set")
        )
    return errs


def _validate_overhead(overhead: r.NodeAllocatableOverhead, path: Path) -> ErrorList:
    if overhead.per_pod is None and overhead.per_container is None:
        return [invalid(path, "", "at least one of perPod or perContainer must be set")]
    errs: ErrorList = []
    for name, q in (("perPod", overhead.per_pod), ("perContainer", overhead.per_container)):
        if q is not None and q.sign() < 0:
            errs.append(invalid(path.child(name), str(q), "must be non-negative"))
    return errs


# --- DeviceTaintRule ------------------------------------------------------------------------------------


def validate_taint_rule_spec(
    spec: r.DeviceTaintRuleSpec, old: r.DeviceTaintRuleSpec | None, path: Path
) -> ErrorList:
    errs: ErrorList = []
    selector = spec.device_selector
    spath = path.child("deviceSelector")
    if selector is not None:
        if selector.driver is not None:
            errs += validate_driver_name(selector.driver, spath.child("driver"))
        if selector.pool is not None:
            errs += validate_pool_name(selector.pool, spath.child("pool"))
        if selector.device is not None:
            errs += validate_dns_label(selector.device, spath.child("device"))
    errs += validate_taint(spec.taint, old.taint if old is not None else None, path.child("taint"))
    return errs


def validate_taint_rule_status(status: r.DeviceTaintRuleStatus | None, path: Path) -> ErrorList:
    conditions = status.conditions if status is not None else None
    errs = validate_conditions(conditions, path.child("conditions"))
    if conditions is not None and len(conditions) > TAINT_RULE_MAX_CONDITIONS:
        errs.append(too_many(path.child("conditions"), len(conditions), TAINT_RULE_MAX_CONDITIONS))
    return errs
