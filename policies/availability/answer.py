"""``draguard devices``'s document (kind ``DeviceAvailability``): pools and classes, filtered.

Field names and meanings are KEP-5677's ``PoolStatus`` where it has them (see
:mod:`policies.availability.pools`); ``taintedDevices``, ``shares``, ``zone`` and the class
section are draguard's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import Field

from policies.availability.pools import Counts, PoolStatus, ShareableSummary
from policies.availability.tally import Availability, ClassStatus
from policies.outputs import API_VERSION, OutputModel, Version


class Tainted(OutputModel):
    no_schedule: int = Field(
        ge=0, description="devices whose strongest taint is NoSchedule (allocated or not)"
    )
    no_execute: int = Field(ge=0, description="devices with a NoExecute taint (allocated or not)")


class DeviceCounts(OutputModel):
    """KEP-5677's counts: total = allocated + available + unavailable."""

    total_devices: int = Field(ge=0)
    allocated_devices: int = Field(ge=0, description="used by an allocated claim (admin access aside)")
    available_devices: int = Field(ge=0, description="neither allocated nor unavailable")
    unavailable_devices: int = Field(
        ge=0,
        description="not allocated, with a NoSchedule or NoExecute taint (their own or a DeviceTaintRule's)",
    )
    tainted_devices: Tainted

    @classmethod
    def of(cls, counts: Counts) -> DeviceCounts:
        return cls(
            total_devices=counts.total,
            allocated_devices=counts.allocated,
            available_devices=counts.available,
            unavailable_devices=counts.unavailable,
            tainted_devices=Tainted(no_schedule=counts.no_schedule, no_execute=counts.no_execute),
        )


class CounterStatus(OutputModel):
    capacity: str
    consumed: str = Field(description="drawn by the allocated devices")
    available: str = Field(description="capacity minus consumed, never negative")


class CounterSet(OutputModel):
    name: str
    counters: dict[str, CounterStatus]


class ShareableCapacity(OutputModel):
    name: str
    total: str = Field(description="the capacity summed over the pool's shareable devices")
    consumed: str = Field(description="what the allocations consumed")
    available: str


class Shareable(OutputModel):
    fully_available_devices: int = Field(ge=0, description="shareable devices nobody uses")
    partially_available_devices: int = Field(ge=0, description="shareable devices in use")
    shares: int = Field(ge=0, description="allocations holding a share (a shareID) of them")
    capacity: list[ShareableCapacity] = []

    @classmethod
    def of(cls, summary: ShareableSummary) -> Shareable:
        return cls(
            fully_available_devices=summary.fully_available,
            partially_available_devices=summary.partially_available,
            shares=summary.shares,
            capacity=[
                ShareableCapacity(
                    name=c.name, total=str(c.total), consumed=str(c.consumed), available=str(c.available)
                )
                for c in summary.capacity
            ],
        )


class Pool(OutputModel):
    driver: str
    pool_name: str
    node_name: str | None = Field(default=None, description="when every slice names the same node")
    zone: str | None = Field(default=None, description="the node's topology.kubernetes.io/zone")
    generation: int = Field(ge=0, description="the newest generation; older slices are not counted")
    resource_slice_count: int | None = Field(default=None, ge=0)
    devices: DeviceCounts | None = Field(default=None, description="unset when validationError is set")
    validation_error: str | None = Field(default=None, description="PoolIncomplete: ... (KEP-5677's words)")
    counter_sets: list[CounterSet] = Field(default=[], description="shared counters (partitionable devices)")
    shareable_summary: Shareable | None = Field(
        default=None, description="devices with allowMultipleAllocations"
    )


class Zone(OutputModel):
    zone: str
    devices: DeviceCounts


class DeviceClassAvailability(OutputModel):
    name: str
    devices: DeviceCounts = Field(
        description="over the devices of complete pools the class's selectors admit"
    )
    pools: int = Field(ge=0, description="pools with devices the class admits")
    zones: list[Zone] = Field(default=[], description="the same per zone of the pools' nodes")
    selector_error: str | None = Field(
        default=None, description="a selector that does not compile: admits nothing"
    )
    selector_failures: int = Field(default=0, ge=0, description="devices a selector failed on (not admitted)")
    selector_failure: str | None = Field(default=None, description="the first such failure")


class DeviceAvailability(OutputModel):
    """``draguard devices -o json|yaml``."""

    api_version: Version = API_VERSION
    kind: Literal["DeviceAvailability"] = "DeviceAvailability"
    pool_count: int = Field(ge=0, description="pools matching the filters")
    pools: list[Pool]
    classes: list[DeviceClassAvailability]


@dataclass(frozen=True)
class Filters:
    """Which pools and classes to show (None: all)."""

    driver: str | None = None
    pool: str | None = None
    node: str | None = None
    device_class: str | None = None

    def keeps(self, pool: PoolStatus, availability: Availability) -> bool:
        return (
            (self.driver is None or pool.driver == self.driver)
            and (self.pool is None or pool.pool == self.pool)
            and (self.node is None or pool.node == self.node)
            and (self.device_class is None or pool.key in availability.class_pools(self.device_class))
        )


def _pool(pool: PoolStatus, zone: str | None) -> Pool:
    return Pool(
        driver=pool.driver,
        pool_name=pool.pool,
        node_name=pool.node,
        zone=zone,
        generation=pool.generation,
        resource_slice_count=None if pool.error else pool.slice_count,
        devices=DeviceCounts.of(pool.counts) if pool.counts is not None else None,
        validation_error=pool.error,
        counter_sets=[
            CounterSet(
                name=s.name,
                counters={
                    n: CounterStatus(
                        capacity=str(c.capacity), consumed=str(c.consumed), available=str(c.available)
                    )
                    for n, c in s.counters
                },
            )
            for s in pool.counter_sets
        ],
        shareable_summary=Shareable.of(pool.shareable) if pool.shareable is not None else None,
    )


def _class(status: ClassStatus) -> DeviceClassAvailability:
    return DeviceClassAvailability(
        name=status.name,
        devices=DeviceCounts.of(status.counts),
        pools=status.pools,
        zones=[Zone(zone=z, devices=DeviceCounts.of(c)) for z, c in status.zones],
        selector_error=status.error,
        selector_failures=status.failures,
        selector_failure=status.failure,
    )


def document(availability: Availability, filters: Filters = Filters()) -> DeviceAvailability:
    """The document for the pools and classes the filters keep (a class filter keeps the pools with
    devices of that class, counted whole; the driver, pool and node filters keep every class)."""
    pools: Sequence[PoolStatus] = [p for p in availability.pools if filters.keeps(p, availability)]
    classes = [
        c for c in availability.classes if filters.device_class is None or c.name == filters.device_class
    ]
    return DeviceAvailability(
        pool_count=len(pools),
        pools=[_pool(p, availability.zones.get(p.key)) for p in pools],
        classes=[_class(c) for c in classes],
    )
