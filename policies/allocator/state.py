"""What is already allocated in the cluster, as the scheduler hands it to the allocator.

Upstream: ``structured/internal/allocatedstate.go`` (types) and the scheduler's
``pkg/scheduler/framework/plugins/dynamicresources`` helper that walks allocated claims
(``foreachAllocatedDevice``): admin-access results never block anyone, results with a shareID
(consumable capacity on) are shares of a multi-allocatable device whose consumed capacity adds up,
everything else is exclusively in use.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from policies.allocator.features import Features
from policies.api.quantity import Quantity
from policies.api.resource import DeviceRequestAllocationResult, ResourceClaim


@dataclass(frozen=True, order=True)
class DeviceID:
    """A device's cluster-wide identity: driver, pool and device name."""

    driver: str
    pool: str
    device: str

    def __str__(self) -> str:
        return f"{self.driver}/{self.pool}/{self.device}"

    @classmethod
    def parse(cls, text: str) -> DeviceID:
        """``driver/pool/device``; the pool name may itself contain slashes."""
        driver, sep, rest = text.partition("/")
        pool, sep2, device = rest.rpartition("/")
        if not (sep and sep2 and driver and pool and device):
            raise ValueError(f"device ID {text!r}: expected <driver>/<pool>/<device>")
        return cls(driver, pool, device)


def _empty_capacity() -> Mapping[DeviceID, Mapping[str, Quantity]]:
    return MappingProxyType({})


@dataclass(frozen=True)
class AllocatedState:
    """Devices in use before this allocation: exclusive ones, shares, and consumed capacity."""

    allocated_devices: frozenset[DeviceID] = frozenset()
    allocated_shared_device_ids: frozenset[tuple[DeviceID, str]] = frozenset()
    aggregated_capacity: Mapping[DeviceID, Mapping[str, Quantity]] = field(default_factory=_empty_capacity)

    @classmethod
    def from_claims(cls, claims: Iterable[ResourceClaim], features: Features) -> AllocatedState:
        """Collect the allocations of ``claims`` the way the scheduler does."""
        exclusive: set[DeviceID] = set()
        shared: set[tuple[DeviceID, str]] = set()
        capacity: dict[DeviceID, dict[str, Quantity]] = {}
        for claim in claims:
            allocation = claim.status.allocation if claim.status else None
            results = allocation.devices.results if allocation and allocation.devices else None
            collect(results or (), features, exclusive, shared, capacity)
        return cls(
            allocated_devices=frozenset(exclusive),
            allocated_shared_device_ids=frozenset(shared),
            aggregated_capacity=MappingProxyType({k: MappingProxyType(v) for k, v in capacity.items()}),
        )


def collect(
    results: Iterable[DeviceRequestAllocationResult],
    features: Features,
    exclusive: set[DeviceID],
    shared: set[tuple[DeviceID, str]],
    capacity: dict[DeviceID, dict[str, Quantity]],
) -> None:
    """Add one allocation's results to what is in use: admin access aside, a share of a
    multi-allocatable device (with consumable capacity on) and what it consumed, else the device."""
    for result in results:
        if result.admin_access:
            continue
        device_id = DeviceID(result.driver, result.pool, result.device)
        if features.consumable_capacity and result.share_id is not None:
            shared.add((device_id, result.share_id))
            if result.consumed_capacity is not None:
                _add_capacity(capacity.setdefault(device_id, {}), result.consumed_capacity)
            continue
        exclusive.add(device_id)


def _add_capacity(total: dict[str, Quantity], more: Mapping[str, Quantity]) -> None:
    for name, amount in more.items():
        total[name] = total[name].add(amount) if name in total else amount
