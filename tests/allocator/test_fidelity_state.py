"""``AllocatedState.from_claims`` against the scheduler's GatherAllocatedState / ListAllAllocatedDevices.

Upstream (pkg/scheduler/framework/plugins/dynamicresources, 1.36): PreFilter calls
GatherAllocatedState when DRAConsumableCapacity is on, else ListAllAllocatedDevices; both walk every
allocated claim through foreachAllocatedDevice, which skips adminAccess results first, then (only
with consumable capacity) sends shareID results to the shared set and their non-nil consumedCapacity
into the aggregated map (ConsumedCapacityCollection.Insert: an empty map still creates the entry,
which later makes deviceCapacityInUse true), and everything else to AllocatedDevices.
"""

from __future__ import annotations

from typing import Any

from policies.allocator import AllocatedState, DeviceID, Features
from policies.api.kinds import decode
from policies.api.quantity import Quantity
from policies.api.resource import API_VERSION, ResourceClaim

GPU = "gpu.example.com"
SHARE = "33333333-3333-4333-8333-333333333333"


def allocated_claim(name: str, *results: dict[str, Any]) -> ResourceClaim:
    obj = decode(
        {
            "apiVersion": API_VERSION,
            "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu"}}]}},
            "status": {"allocation": {"devices": {"results": list(results)}}},
        }
    )
    assert isinstance(obj, ResourceClaim)
    return obj


def result(device: str, **extra: Any) -> dict[str, Any]:
    return {"request": "r", "driver": GPU, "pool": "p", "device": device, **extra}


def dev(name: str) -> DeviceID:
    return DeviceID(GPU, "p", name)


CLAIMS = [
    allocated_claim(
        "a",
        result("admin-share", adminAccess=True, shareID=SHARE, consumedCapacity={"memory": "1Gi"}),
        result("plain"),
        result("share-empty", shareID=SHARE, consumedCapacity={}),
        result("share-none", shareID=SHARE),
    ),
    allocated_claim(
        "b", result("share-empty", shareID=SHARE.replace("3", "4"), consumedCapacity={"memory": "1Gi"})
    ),
    allocated_claim("pending"),
]


def test_with_consumable_capacity_shares_are_tracked_apart() -> None:
    state = AllocatedState.from_claims([*CLAIMS, decode_unallocated()], Features())
    # adminAccess wins over shareID: the result is skipped entirely.
    assert dev("admin-share") not in state.allocated_devices
    assert all(d != dev("admin-share") for d, _ in state.allocated_shared_device_ids)
    assert state.allocated_devices == frozenset({dev("plain")})
    assert {d.device for d, _ in state.allocated_shared_device_ids} == {"share-empty", "share-none"}
    # An empty consumedCapacity still creates the device's entry; no consumedCapacity creates none.
    assert set(state.aggregated_capacity) == {dev("share-empty")}
    assert state.aggregated_capacity[dev("share-empty")]["memory"] == Quantity.parse("1Gi")


def test_without_consumable_capacity_shares_are_exclusive() -> None:
    features = Features(consumable_capacity=False)
    state = AllocatedState.from_claims(CLAIMS, features)
    assert state.allocated_devices == frozenset({dev("plain"), dev("share-empty"), dev("share-none")})
    assert not state.allocated_shared_device_ids
    assert not state.aggregated_capacity


def decode_unallocated() -> ResourceClaim:
    obj = decode(
        {
            "apiVersion": API_VERSION,
            "kind": "ResourceClaim",
            "metadata": {"name": "waiting", "namespace": "default"},
            "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "gpu"}}]}},
        }
    )
    assert isinstance(obj, ResourceClaim)
    return obj
