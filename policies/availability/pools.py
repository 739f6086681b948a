"""Each resource pool's devices counted as KEP-5677's ResourcePoolStatusRequest counts them.

Kubernetes 1.36 answers "what is free" only through the alpha ``ResourcePoolStatusRequest``
(``resource.k8s.io/v1alpha3``, feature gate ``DRAResourcePoolStatus``, off by default). Its
``PoolStatus`` (``staging/src/k8s.io/api/resource/v1alpha3/types.go``) and the controller that
fills it (``pkg/controller/resourcepoolstatusrequest/controller.go`` and ``views.go``) define the
names and meanings kept here:

* only the newest generation of a pool counts; a pool with fewer slices of it than its
  ``resourceSliceCount`` is incomplete: ``validationError`` starts ``PoolIncomplete:`` and the
  device counts are left unset;
* ``nodeName`` when every slice of the pool names the same node;
* ``totalDevices``: the devices of the pool's slices; ``allocatedDevices``: those an allocated
  claim uses (admin access does not count: an observer, not a consumer; a device shared by several
  claims counts once); ``unavailableDevices``: those not allocated that carry a NoSchedule or
  NoExecute taint, their own or a DeviceTaintRule's; ``availableDevices``: the rest;
* ``counterSets`` (1.37): per shared counter, its capacity, what the allocated devices consume and
  what is left (never negative);
* ``shareableSummary`` (1.37): for devices with ``allowMultipleAllocations``, how many are unused
  (``fullyAvailableDevices``) or in use (``partiallyAvailableDevices``), and per capacity the sum
  over them, what allocations consumed and what is left.

Two deliberate differences from the controller, where its documentation and its code part: a
device the claims name but the pool does not publish (a stale allocation) is not counted as
allocated, and an allocated device with a taint counts as allocated only (the type's comment:
unavailable devices "are not allocated"), so the four counts add up to the total. draguard adds
per device its strongest taint and each shared device's number of shares.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from policies.allocator.taints import device_taints
from policies.api.quantity import Quantity
from policies.api.resource import DeviceTaintRule, ResourceClaim, ResourceSlice

PoolKey = tuple[str, str]
"""``(driver, pool name)``."""

INCOMPLETE = "PoolIncomplete:"  # the controller's machine-readable prefix for an incomplete pool
NO_SCHEDULE, NO_EXECUTE = "NoSchedule", "NoExecute"
_ZERO = Quantity.from_int(0)


def _plus(total: Mapping[str, Quantity], more: Mapping[str, Quantity]) -> dict[str, Quantity]:
    summed = dict(total)
    for name, amount in more.items():
        summed[name] = summed[name].add(amount) if name in summed else amount
    return summed


def _left(capacity: Quantity, consumed: Quantity) -> Quantity:
    """capacity - consumed, never negative (the controller's nonNegativeDiff)."""
    left = capacity.sub(consumed)
    return left if left.sign() >= 0 else _ZERO


@dataclass(frozen=True)
class DeviceUse:
    """How the allocated claims use one device: ``shares`` of it (results with a shareID, the
    consumable-capacity allocations of a multi-allocatable device) and the capacity they consumed."""

    shares: int = 0
    consumed: tuple[tuple[str, Quantity], ...] = ()

    def plus(self, shared: bool, consumed: Mapping[str, Quantity] | None) -> DeviceUse:
        if not shared and not consumed:
            return self  # an exclusive allocation: most of them, and nothing to add up
        summed = _plus(dict(self.consumed), consumed or {})
        return DeviceUse(self.shares + shared, tuple(sorted(summed.items())))

    def plus_use(self, other: DeviceUse) -> DeviceUse:
        """Both uses together (the claims of two namespaces sharing a device)."""
        summed = _plus(dict(self.consumed), dict(other.consumed))
        return DeviceUse(self.shares + other.shares, tuple(sorted(summed.items())))


Uses = Mapping[str, DeviceUse]
"""One pool's devices in use, by device name."""


def add_uses(into: dict[PoolKey, dict[str, DeviceUse]], claims: Iterable[ResourceClaim]) -> None:
    """Add the devices the allocated ``claims`` use, pool by pool (admin access left out)."""
    for claim in claims:
        allocation = claim.status.allocation if claim.status is not None else None
        results = allocation.devices.results if allocation is not None and allocation.devices else None
        for result in results or ():
            if result.admin_access:
                continue
            pool = into.setdefault((result.driver, result.pool), {})
            use = pool.get(result.device, DeviceUse())
            pool[result.device] = use.plus(result.share_id is not None, result.consumed_capacity)


class DeviceState(NamedTuple):
    """One device of a pool: allocated or not, and its strongest blocking taint (None: none)."""

    name: str
    allocated: bool
    effect: str | None


@dataclass(frozen=True)
class Counts:
    """Devices by state; ``available`` is what is neither allocated nor unavailable. ``no_schedule``
    and ``no_execute`` count every device with such a taint, allocated or not (a NoExecute one
    allocated is one whose pods are being evicted)."""

    total: int = 0
    allocated: int = 0
    unavailable: int = 0
    no_schedule: int = 0
    no_execute: int = 0

    @property
    def available(self) -> int:
        return self.total - self.allocated - self.unavailable

    def __add__(self, other: Counts) -> Counts:
        return Counts(
            self.total + other.total,
            self.allocated + other.allocated,
            self.unavailable + other.unavailable,
            self.no_schedule + other.no_schedule,
            self.no_execute + other.no_execute,
        )

    @classmethod
    def of(cls, devices: Iterable[DeviceState]) -> Counts:
        total = allocated = unavailable = no_schedule = no_execute = 0
        for device in devices:
            total += 1
            allocated += device.allocated
            unavailable += device.effect is not None and not device.allocated
            no_schedule += device.effect == NO_SCHEDULE
            no_execute += device.effect == NO_EXECUTE
        return cls(total, allocated, unavailable, no_schedule, no_execute)


@dataclass(frozen=True)
class CounterStatus:
    capacity: Quantity
    consumed: Quantity
    available: Quantity


@dataclass(frozen=True)
class CounterSetStatus:
    name: str
    counters: tuple[tuple[str, CounterStatus], ...]


@dataclass(frozen=True)
class CapacityStatus:
    name: str
    total: Quantity
    consumed: Quantity
    available: Quantity


@dataclass(frozen=True)
class ShareableSummary:
    fully_available: int
    partially_available: int
    shares: int
    capacity: tuple[CapacityStatus, ...]


@dataclass(frozen=True)
class PoolStatus:
    """One pool (see the module docstring); ``devices`` empty and ``counts`` None when incomplete."""

    driver: str
    pool: str
    node: str | None
    generation: int
    slice_count: int
    error: str | None
    devices: tuple[DeviceState, ...]
    counts: Counts | None
    counter_sets: tuple[CounterSetStatus, ...] = ()
    shareable: ShareableSummary | None = None

    @property
    def key(self) -> PoolKey:
        return (self.driver, self.pool)


def newest_slices(slices: Iterable[ResourceSlice]) -> dict[PoolKey, list[ResourceSlice]]:
    """Each pool's slices of its newest generation (the controller's two passes), in input order."""
    pools: dict[PoolKey, list[ResourceSlice]] = {}
    for slc in slices:
        key = (slc.spec.driver, slc.spec.pool.name)
        found = pools.get(key)
        if found is None or slc.spec.pool.generation > found[0].spec.pool.generation:
            pools[key] = [slc]
        elif slc.spec.pool.generation == found[0].spec.pool.generation:
            found.append(slc)
    return pools


def _node(slices: Sequence[ResourceSlice]) -> str | None:
    names = {s.spec.node_name or "" for s in slices}
    return names.pop() or None if len(names) == 1 else None


def _effect(device_taints_: Iterable[str]) -> str | None:
    effects = set(device_taints_)
    return NO_EXECUTE if NO_EXECUTE in effects else NO_SCHEDULE if NO_SCHEDULE in effects else None


def pool_status(
    key: PoolKey, slices: Sequence[ResourceSlice], uses: Uses, rules: Sequence[DeviceTaintRule]
) -> PoolStatus:
    """The status of one pool from its newest slices, the devices in use and the taint rules."""
    first = slices[0].spec.pool
    driver, name = key
    node = _node(slices)
    if len(slices) < first.resource_slice_count:
        error = (
            f"{INCOMPLETE} pool {driver}/{name} is incomplete: observed {len(slices)}/"
            f"{first.resource_slice_count} slices at generation {first.generation}"
        )
        return PoolStatus(driver, name, node, first.generation, len(slices), error[:256], (), None)
    devices = tuple(
        DeviceState(
            device.name,
            device.name in uses,
            _effect(t.effect for t in device_taints(device, driver, name, rules)),
        )
        for slc in slices
        for device in slc.spec.devices or ()
    )
    return PoolStatus(
        driver,
        name,
        node,
        first.generation,
        len(slices),
        None,
        devices,
        Counts.of(devices),
        _counter_sets(slices, uses),
        _shareable(slices, uses),
    )


def _counter_sets(slices: Sequence[ResourceSlice], uses: Uses) -> tuple[CounterSetStatus, ...]:
    """Per shared counter: capacity, consumed by the devices in use, left (the controller's
    computeCounterSets, sorted by set name)."""
    consumed: dict[str, dict[str, Quantity]] = {}
    for slc in slices:
        for device in slc.spec.devices or ():
            if device.name not in uses:
                continue
            for use in device.consumes_counters or ():
                drawn = {n: c.value for n, c in (use.counters or {}).items()}
                consumed[use.counter_set] = _plus(consumed.get(use.counter_set, {}), drawn)
    sets = []
    for slc in slices:
        for counter_set in slc.spec.shared_counters or ():
            used = consumed.get(counter_set.name, {})
            counters = tuple(
                (n, CounterStatus(c.value, used.get(n, _ZERO), _left(c.value, used.get(n, _ZERO))))
                for n, c in sorted((counter_set.counters or {}).items())
            )
            sets.append(CounterSetStatus(counter_set.name, counters))
    return tuple(sorted(sets, key=lambda s: s.name))


def _shareable(slices: Sequence[ResourceSlice], uses: Uses) -> ShareableSummary | None:
    """The controller's computeShareableSummary, with the number of shares; None without a
    multi-allocatable device. What was consumed is summed over every device in use, as there."""
    total: dict[str, Quantity] = {}
    fully = partially = 0
    for slc in slices:
        for device in slc.spec.devices or ():
            if not device.allow_multiple_allocations:
                continue
            if device.name in uses:
                partially += 1
            else:
                fully += 1
            total = _plus(total, {n: c.value for n, c in (device.capacity or {}).items()})
    if not fully and not partially:
        return None
    names = {slc_device.name for slc in slices for slc_device in slc.spec.devices or ()}
    consumed: dict[str, Quantity] = {}
    shares = 0
    for name, use in uses.items():
        if name in names:
            consumed = _plus(consumed, dict(use.consumed))
            shares += use.shares
    capacity = tuple(
        CapacityStatus(n, t, consumed.get(n, _ZERO), _left(t, consumed.get(n, _ZERO)))
        for n, t in sorted(total.items())
    )
    return ShareableSummary(fully, partially, shares, capacity)
