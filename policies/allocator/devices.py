"""Per-slice and per-device data, computed once per Allocator and shared by every node and call.

Upstream converts slices into its internal ``draapi`` form and re-derives device facts during each
``Allocate``. Here every ResourceSlice is wrapped once (``SliceInfo``) and its devices are digested
on first use (``DeviceInfo``): identity, taints (with DeviceTaintRule taints merged in, as the
scheduler's ``tainteddevices`` overlay does), counters, capacity, attribute lookups and the CEL
selector results. The search loop then reads plain attributes instead of walking pydantic models.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from policies.allocator.capacity import CapacityInfo, nanos
from policies.allocator.constraints import AttributeValue
from policies.allocator.state import DeviceID
from policies.api.base import NodeSelector
from policies.api.resource import Device, DeviceTaint, DeviceTaintRule, ResourceSlice

if TYPE_CHECKING:
    from policies.allocator.capacity import Consumption

# Taint effects that keep a device from being allocated; others (None, unknown) are ignored.
BLOCKING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})

CounterUse = tuple[str, tuple[tuple[str, int], ...]]


class SliceInfo:
    """One ResourceSlice with the fields pool gathering reads, devices digested lazily."""

    __slots__ = (
        "_devices",
        "_make_devices",
        "all_nodes",
        "counter_sets",
        "driver",
        "generation",
        "has_counters",
        "name",
        "node_name",
        "node_selector",
        "obj",
        "per_device",
        "per_device_set",
        "pool_name",
        "slice_count",
    )

    def __init__(self, obj: ResourceSlice, make_devices: Callable[[SliceInfo], list[DeviceInfo]]) -> None:
        spec = obj.spec
        self.obj = obj
        self.name = obj.name
        self.driver = spec.driver
        self.pool_name = spec.pool.name
        self.generation = spec.pool.generation
        self.slice_count = spec.pool.resource_slice_count
        self.node_name = spec.node_name
        self.all_nodes = bool(spec.all_nodes)
        self.node_selector = spec.node_selector
        # Upstream distinguishes "field set" (pointer) from "true".
        self.per_device_set = spec.per_device_node_selection is not None
        self.per_device = bool(spec.per_device_node_selection)
        self.counter_sets = spec.shared_counters or []
        self.has_counters = bool(self.counter_sets)
        self._make_devices = make_devices
        self._devices: list[DeviceInfo] | None = None

    @property
    def devices(self) -> list[DeviceInfo]:
        if self._devices is None:
            self._devices = self._make_devices(self)
        return self._devices


class DeviceInfo:
    """One device of one slice, with everything the search asks about it precomputed."""

    __slots__ = (
        "_attributes",
        "_capacities",
        "all_nodes",
        "binding_conditions",
        "binding_failure_conditions",
        "binds_to_node",
        "cel",
        "consumes",
        "device",
        "driver",
        "index",
        "key",
        "multi",
        "name",
        "no_request_consumption",
        "node_name",
        "node_selector",
        "pool_name",
        "slice",
        "taints",
        "uid",
    )

    def __init__(
        self, index: int, uid: int, slice_info: SliceInfo, device: Device, taints: tuple[DeviceTaint, ...]
    ):
        self.index = index
        self.uid = uid
        self.slice = slice_info
        self.device = device
        self.name = device.name
        self.driver = slice_info.driver
        self.pool_name = slice_info.pool_name
        self.key = (slice_info.driver, slice_info.pool_name, device.name)
        self.multi = bool(device.allow_multiple_allocations)
        self.taints = taints
        self.binding_conditions = device.binding_conditions
        self.binding_failure_conditions = device.binding_failure_conditions
        self.binds_to_node = bool(device.binds_to_node)
        self.node_name = device.node_name
        self.all_nodes = bool(device.all_nodes)
        self.node_selector: NodeSelector | None = device.node_selector
        self.consumes: tuple[CounterUse, ...] = tuple(
            (use.counter_set, tuple((name, nanos(c.value)) for name, c in (use.counters or {}).items()))
            for use in device.consumes_counters or ()
        )
        # Selector results by expression (True/False, or the evaluation error to re-raise).
        self.cel: dict[str, bool | Exception] = {}
        self.no_request_consumption: Consumption | None = None
        self._attributes: dict[str, AttributeValue | None] = {}
        self._capacities: tuple[CapacityInfo, ...] | None = None

    @property
    def device_id(self) -> DeviceID:
        return DeviceID(*self.key)

    def __str__(self) -> str:
        return "/".join(self.key)

    @property
    def has_binding_conditions(self) -> bool:
        return bool(self.binding_conditions)

    @property
    def capacities(self) -> tuple[CapacityInfo, ...]:
        if self._capacities is None:
            self._capacities = tuple(CapacityInfo.of(n, c) for n, c in (self.device.capacity or {}).items())
        return self._capacities

    def attribute(self, name: str) -> AttributeValue | None:
        """Attribute ``domain/id`` for a constraint: the exact key, else ``id`` if domain is the driver."""
        if name in self._attributes:
            return self._attributes[name]
        attributes = self.device.attributes or {}
        found = attributes.get(name)
        if found is None:
            domain, sep, ident = name.partition("/")
            if sep and domain == self.driver:
                found = attributes.get(ident)
        value = AttributeValue(found) if found is not None else None
        self._attributes[name] = value
        return value


class Catalog:
    """Hands out DeviceInfo objects with stable indices; one per Allocator."""

    def __init__(self, taint_rules: Sequence[DeviceTaintRule]) -> None:
        self._rules = [r for r in taint_rules if r.spec.device_selector is not None]
        self._uids: dict[tuple[str, str, str], int] = {}
        self.count = 0

    def uid_of(self, key: tuple[str, str, str]) -> int:
        """A small integer per device identity: devices repeated across slices share it."""
        uid = self._uids.get(key)
        if uid is None:
            uid = self._uids[key] = len(self._uids)
        return uid

    def known_uid(self, key: tuple[str, str, str]) -> int | None:
        return self._uids.get(key)

    def make_devices(self, slice_info: SliceInfo) -> list[DeviceInfo]:
        devices = []
        for device in slice_info.obj.spec.devices or ():
            key = (slice_info.driver, slice_info.pool_name, device.name)
            taints = tuple(device.taints or ()) + self._rule_taints(key)
            devices.append(DeviceInfo(self.count, self.uid_of(key), slice_info, device, taints))
            self.count += 1
        return devices

    def _rule_taints(self, key: tuple[str, str, str]) -> tuple[DeviceTaint, ...]:
        """Taints of the DeviceTaintRules whose selector matches (an empty selector matches all)."""
        driver, pool, name = key
        taints = []
        for rule in self._rules:
            sel = rule.spec.device_selector
            assert sel is not None
            if (
                (sel.driver is None or sel.driver == driver)
                and (sel.pool is None or sel.pool == pool)
                and (sel.device is None or sel.device == name)
            ):
                taints.append(rule.spec.taint)
        return tuple(taints)
