"""Per-slice and per-device data, computed once per Allocator and shared by every node and call.

Upstream converts slices into its internal ``draapi`` form and re-derives device facts during each
``Allocate``. Here every ResourceSlice is wrapped once (``SliceInfo``) and its devices are digested
on first use (``DeviceInfo``): identity, taints (with DeviceTaintRule taints merged in, as the
scheduler's ``tainteddevices`` overlay does), counters, capacity, attribute lookups and the CEL
selector results. The search loop then reads plain attributes instead of walking pydantic models.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from policies.allocator.capacity import Amount, CapacityInfo, Consumption, RequestKey, nanos
from policies.allocator.constraints import AttributeValue
from policies.allocator.taints import device_taints
from policies.api.base import NodeSelector
from policies.api.resource import (
    Device,
    DeviceRequestAllocationResult,
    DeviceTaint,
    DeviceTaintRule,
    ResourceSlice,
)

CounterUse = tuple[str, tuple[tuple[str, int], ...]]
# A counter as the search reserves it: (pool name, counter set, counter). Upstream keys what the
# search has reserved by pool *name* only (dra-reference 4.16a), so the driver is not part of it.
CounterSlot = tuple[str, str, str]
# A device's consumption summed per counter, in nano-units.
CounterSlots = tuple[tuple[CounterSlot, int], ...]
# A class name and the expressions of a request's selectors.
SelectorKey = tuple[str, tuple[str | None, ...]]

# The shared empty dict of DeviceInfo caches nothing was written to yet; never written itself.
_NOTHING: dict[Any, Any] = {}


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
    """One device of one slice, with what the search loop reads precomputed.

    Only the fields the search touches on every visit are copied out of the model; the rest are
    read through properties when a result is built.
    """

    __slots__ = (
        "_attributes",
        "_capacities",
        "cel",
        "consumes",
        "consumptions",
        "counter_slots",
        "device",
        "index",
        "multi",
        "plain_capacity",
        "results",
        "slice",
        "taints",
        "uid",
        "verdicts",
    )

    def __init__(
        self,
        index: int,
        uid: int,
        slice_info: SliceInfo,
        device: Device,
        taints: tuple[DeviceTaint, ...],
        intern: Callable[[CounterSlots], CounterSlots],
    ) -> None:
        self.index = index
        self.uid = uid
        self.slice = slice_info
        self.device = device
        self.multi = bool(device.allow_multiple_allocations)
        # No capacity has a request policy: an unused device then fits any request that names no
        # amounts without arithmetic (search._capacity_fits).
        self.plain_capacity = not device.capacity or all(
            c.request_policy is None for c in device.capacity.values()
        )
        self.taints = taints
        self.consumes: tuple[CounterUse, ...] = (
            tuple(
                (use.counter_set, tuple((name, nanos(c.value)) for name, c in (use.counters or {}).items()))
                for use in device.consumes_counters
            )
            if device.consumes_counters
            else ()
        )
        # Interned: devices consuming the same share one tuple, so the search compares them with `is`.
        self.counter_slots = intern(_slots(slice_info.pool_name, self.consumes))
        # Selector results by expression (True/False, or the evaluation error to re-raise) and
        # selector verdicts (a search Reason) by (class, request selectors). Both start as a shared
        # empty dict and get their own on the first write: most devices of a big cluster are never
        # evaluated, and fewer container objects keep the garbage collector's work down.
        self.cel: dict[str, bool | Exception] = _NOTHING
        self.verdicts: dict[SelectorKey, int] = _NOTHING
        # What requests consume of the device's capacities, by request amounts (see consumption()).
        self.consumptions: dict[RequestKey, Consumption] = _NOTHING
        # Result entries naming only the request and the device, by (request name, admin access):
        # see results._device_result.
        self.results: dict[tuple[str, bool], DeviceRequestAllocationResult] = _NOTHING
        self._attributes: dict[str, AttributeValue | None] = _NOTHING
        self._capacities: tuple[CapacityInfo, ...] | None = None

    def remember_cel(self, expression: str, result: bool | Exception) -> None:
        if self.cel is _NOTHING:
            self.cel = {}
        self.cel[expression] = result

    def remember_result(self, key: tuple[str, bool], result: DeviceRequestAllocationResult) -> None:
        if self.results is _NOTHING:
            self.results = {}
        self.results[key] = result

    def remember_verdict(self, key: SelectorKey, code: int) -> None:
        if self.verdicts is _NOTHING:
            self.verdicts = {}
        self.verdicts[key] = code

    @property
    def key(self) -> tuple[str, str, str]:
        """(driver, pool, device): the device's identity."""
        return (self.slice.driver, self.slice.pool_name, self.device.name)

    @property
    def name(self) -> str:
        return self.device.name

    @property
    def driver(self) -> str:
        return self.slice.driver

    @property
    def pool_name(self) -> str:
        return self.slice.pool_name

    @property
    def binding_conditions(self) -> list[str] | None:
        return self.device.binding_conditions

    @property
    def binding_failure_conditions(self) -> list[str] | None:
        return self.device.binding_failure_conditions

    @property
    def binds_to_node(self) -> bool:
        return bool(self.device.binds_to_node)

    @property
    def node_name(self) -> str | None:
        return self.device.node_name

    @property
    def all_nodes(self) -> bool:
        return bool(self.device.all_nodes)

    @property
    def node_selector(self) -> NodeSelector | None:
        return self.device.node_selector

    def __str__(self) -> str:
        return "/".join(self.key)

    @property
    def capacities(self) -> tuple[CapacityInfo, ...]:
        if self._capacities is None:
            self._capacities = tuple(CapacityInfo.of(n, c) for n, c in (self.device.capacity or {}).items())
        return self._capacities

    def consumption(self, key: RequestKey, requests: Mapping[str, Amount] | None) -> Consumption:
        """What a request for ``requests`` (whose ``request_key`` is ``key``) takes from the device.

        Depends only on the device's capacities and the requested amounts, so it is computed once
        per distinct amounts for the Allocator's lifetime: every call, node and pod asking for the
        same share of the device reuses it (the existing shares are added in ``Consumption.fits``).
        """
        found = self.consumptions.get(key)
        if found is None:
            found = Consumption.of(self.capacities, requests)
            if self.consumptions is _NOTHING:
                self.consumptions = {}
            self.consumptions[key] = found
        return found

    def attribute(self, name: str) -> AttributeValue | None:
        """Attribute ``domain/id`` for a constraint: the exact key, else ``id`` if domain is the driver."""
        if name in self._attributes:
            return self._attributes[name]
        attributes = self.device.attributes or {}
        found = attributes.get(name)
        if found is None:
            domain, sep, ident = name.partition("/")
            if sep and domain == self.slice.driver:
                found = attributes.get(ident)
        value = AttributeValue(found) if found is not None else None
        if self._attributes is _NOTHING:
            self._attributes = {}
        self._attributes[name] = value
        return value


def _slots(pool_name: str, consumes: tuple[CounterUse, ...]) -> CounterSlots:
    """What the device consumes per counter of its pool, summed over its consumesCounters entries."""
    totals: dict[CounterSlot, int] = {}
    for set_name, counters in consumes:
        for counter, amount in counters:
            slot = (pool_name, set_name, counter)
            totals[slot] = totals.get(slot, 0) + amount
    return tuple(totals.items())


class Catalog:
    """Hands out DeviceInfo objects with stable indices; one per Allocator."""

    def __init__(self, taint_rules: Sequence[DeviceTaintRule]) -> None:
        self._rules = list(taint_rules)
        self._uids: dict[tuple[str, str, str], int] = {}
        self._slots: dict[CounterSlots, CounterSlots] = {}
        self.count = 0

    def uid_of(self, key: tuple[str, str, str]) -> int:
        """A small integer per device identity: devices repeated across slices share it."""
        uid = self._uids.get(key)
        if uid is None:
            uid = self._uids[key] = len(self._uids)
        return uid

    def _intern(self, slots: CounterSlots) -> CounterSlots:
        return self._slots.setdefault(slots, slots)

    def make_devices(self, slice_info: SliceInfo) -> list[DeviceInfo]:
        devices = []
        driver, pool = slice_info.driver, slice_info.pool_name
        for device in slice_info.obj.spec.devices or ():
            taints = device_taints(device, driver, pool, self._rules)
            uid = self.uid_of((driver, pool, device.name))
            devices.append(DeviceInfo(self.count, uid, slice_info, device, taints, self._intern))
            self.count += 1
        return devices
