"""ResourceSlice validation, as the 1.36 API server does it (``validateResourceSliceSpec``).

Node selection (slice-wide or per device), devices with their attributes, capacities and request
policies, counters, taints, binding conditions, and both node-allocatable shapes (1.36
``nodeAllocatableResourceMappings``, 1.37 ``nodeAllocatableResources``). On update, a device's
capacity and taints are re-checked only when they changed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from policies.api import resource as r
from policies.api.quantity import Quantity
from policies.validation import gosyntax
from policies.validation.core import validate_node_selector
from policies.validation.fielderrors import (
    ErrorList,
    Path,
    forbidden,
    invalid,
    not_found,
    required,
    too_long,
)
from policies.validation.lists import no_item_checks, validate_map, validate_set, validate_slice
from policies.validation.meta import IS_NEGATIVE_ERROR
from policies.validation.names import (
    DEVICE_MAX_DOMAIN_LENGTH,
    DEVICE_MAX_ID_LENGTH,
    DNS1123_LABEL_MAX,
    is_node_allocatable_resource_name,
    validate_dns_label,
    validate_driver_name,
    validate_node_name,
    validate_pool_name,
    validate_qualified_name,
)
from policies.validation.resource import (
    immutable,
    same_value,
    validate_binding_conditions,
    validate_taint,
)

# Limits: resource/v1 types.go constants (dra-reference section 2).
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
REQUEST_POLICY_VALID_VALUES_MAX = 10
MAX_INT64 = 2**63 - 1

# Longest attribute/capacity key shown unshortened in a path: "<domain>/<id>".
_QUALIFIED_KEY_MAX = DEVICE_MAX_DOMAIN_LENGTH + 1 + DEVICE_MAX_ID_LENGTH
_UNION_SLICE_NODES = (
    "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required"
)
_UNION_DEVICE_NODES = (
    "exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required when `perDeviceNodeSelection` "
    "is set to true in the ResourceSlice spec"
)


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
        selector = spec.node_selector
        if len(selector.node_selector_terms) != 1:
            # An absent list is Go's nil slice, an empty one is not: %#v tells them apart.
            terms = (
                selector.node_selector_terms if "node_selector_terms" in selector.model_fields_set else None
            )
            errs.append(
                invalid(
                    path.child("nodeSelector", "nodeSelectorTerms"),
                    gosyntax.node_selector_terms(terms),
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
    if old is None or not same_value(old.capacity, device.capacity):
        check = (
            _validate_shared_capacity if device.allow_multiple_allocations else _validate_exclusive_capacity
        )
        errs += validate_map(
            device.capacity, -1, _QUALIFIED_KEY_MAX, validate_qualified_name, check, path.child("capacity")
        )
    if old is None or not same_value(old.taints, device.taints):
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
    errs += validate_binding_conditions(device.binding_conditions, device.binding_failure_conditions, path)
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
    # The Go element type of each list: an empty one is shown as that Go slice ("[]int64{}").
    lists: Sequence[tuple[str, str, list[Any] | None]] = (
        ("bools", "bool", attr.bools),
        ("ints", "int64", attr.ints),
        ("strings", "string", attr.strings),
        ("versions", "string", attr.versions),
    )
    for name, go_type, items in lists:
        if items is None:
            continue
        members += 1
        if not items:
            shown = gosyntax.GoSyntax(gosyntax.slice_of(go_type, []))
            errs.append(invalid(path.child(name), shown, "must not be empty if specified"))
        for i, item in enumerate(items):
            if name == "strings":
                errs += _validate_string_value(item, path.child(name).index(i))
            elif name == "versions":
                errs += _validate_version_value(item, path.child(name).index(i))
    if members == 0:
        errs.append(invalid(path, "", "exactly one value must be specified"))
    elif members > 1:
        errs.append(invalid(path, _go_attribute(attr), "exactly one value must be specified"))
    return errs


def _go_attribute(attr: r.DeviceAttribute) -> gosyntax.GoSyntax:
    """The internal ``resource.DeviceAttribute`` as ``%#v`` prints it (scalars are pointers)."""
    return gosyntax.GoSyntax(
        gosyntax.struct(
            "resource.DeviceAttribute",
            [
                ("IntValue", gosyntax.pointer("int64", attr.int_ is not None)),
                ("BoolValue", gosyntax.pointer("bool", attr.bool_ is not None)),
                ("StringValue", gosyntax.pointer("string", attr.string is not None)),
                ("VersionValue", gosyntax.pointer("string", attr.version is not None)),
                ("IntValues", gosyntax.ints(attr.ints)),
                ("BoolValues", gosyntax.bools(attr.bools)),
                ("StringValues", gosyntax.strings(attr.strings)),
                ("VersionValues", gosyntax.strings(attr.versions)),
            ],
        )
    )


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
