"""The allocator's small public types and helpers: Features, DeviceID, AllocatedState, share IDs."""

from __future__ import annotations

import uuid

import pytest

from policies.allocator import AllocatedState, DeviceID, Features
from policies.allocator.allocator import random_share_id
from policies.api.kinds import decode
from policies.api.quantity import Quantity
from policies.api.resource import API_VERSION, ResourceClaim


def test_default_features_are_kube_scheduler_1_36_defaults() -> None:
    assert Features().names() == [
        "adminAccess",
        "prioritizedList",
        "partitionableDevices",
        "deviceTaints",
        "deviceBindingAndStatus",
        "consumableCapacity",
    ]


def test_features_parse_all_none_and_lists() -> None:
    assert Features.parse("all").list_type_attributes
    assert Features.parse("none") == Features.none() == Features.parse("")
    assert Features.parse("adminAccess, deviceTaints").names() == ["adminAccess", "deviceTaints"]
    assert Features.parse("AdminAccess,DeviceTaints") == Features.parse("adminAccess,deviceTaints")


def test_features_parse_rejects_unknown_names_and_lists_valid_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown allocator feature.*admin_access.*adminAccess"):
        Features.parse("admin_access")


def test_device_id_round_trips_with_slashes_in_the_pool_name() -> None:
    device = DeviceID.parse("gpu.example.com/rack-1/node-7/gpu-0")
    assert device == DeviceID("gpu.example.com", "rack-1/node-7", "gpu-0")
    assert str(device) == "gpu.example.com/rack-1/node-7/gpu-0"
    with pytest.raises(ValueError, match="driver>/<pool>/<device>"):
        DeviceID.parse("just-a-name")


def allocated_claim(*results: dict[str, object]) -> ResourceClaim:
    obj = decode(
        {
            "apiVersion": API_VERSION,
            "kind": "ResourceClaim",
            "metadata": {"name": "c", "namespace": "ns"},
            "spec": {"devices": {}},
            "status": {"allocation": {"devices": {"results": list(results)}}},
        }
    )
    assert isinstance(obj, ResourceClaim)
    return obj


def result(device: str, **extra: object) -> dict[str, object]:
    return {"request": "r", "driver": "d", "pool": "p", "device": device, **extra}


def test_allocated_state_from_claims_sorts_results_like_the_scheduler() -> None:
    share = {"shareID": "11111111-1111-4111-8111-111111111111", "consumedCapacity": {"bw": "10G"}}
    other_share = {"shareID": "22222222-2222-4222-8222-222222222222", "consumedCapacity": {"bw": "5G"}}
    claims = [
        allocated_claim(result("exclusive"), result("admin", adminAccess=True)),
        allocated_claim(result("shared", **share), result("shared", **other_share)),
    ]

    state = AllocatedState.from_claims(claims, Features())
    assert state.allocated_devices == {DeviceID("d", "p", "exclusive")}
    assert {share_id for _, share_id in state.allocated_shared_device_ids} == {
        share["shareID"],
        other_share["shareID"],
    }
    assert state.aggregated_capacity[DeviceID("d", "p", "shared")]["bw"] == Quantity.parse("15G")

    # Without consumable capacity a shared result is just an allocated device.
    plain = AllocatedState.from_claims(claims, Features(consumable_capacity=False))
    assert plain.allocated_devices == {DeviceID("d", "p", "exclusive"), DeviceID("d", "p", "shared")}
    assert not plain.aggregated_capacity


def test_public_taint_helpers_follow_upstream_toleration_rules() -> None:
    from policies.allocator import blocks_allocation, device_taints, tolerates
    from policies.api.resource import Device, DeviceTaint, DeviceTaintRule, DeviceToleration

    taint = DeviceTaint(key="k", value="v", effect="NoExecute")
    assert tolerates(DeviceToleration(operator="Exists"), taint)  # empty key + Exists: everything
    assert tolerates(DeviceToleration(key="k", value="v"), taint)  # operator defaults to Equal
    assert not tolerates(DeviceToleration(key="k", value="w"), taint)
    assert not tolerates(DeviceToleration(key="k", operator="Exists", effect="NoSchedule"), taint)
    assert blocks_allocation([taint], [])
    assert not blocks_allocation([DeviceTaint(key="k", effect="None")], [])

    rule = DeviceTaintRule.model_validate(
        {"spec": {"deviceSelector": {"pool": "p"}, "taint": {"key": "r", "effect": "NoSchedule"}}}
    )
    device = Device(name="d", taints=[taint])
    assert [t.key for t in device_taints(device, "drv", "p", [rule])] == ["k", "r"]
    assert [t.key for t in device_taints(device, "drv", "other", [rule])] == ["k"]


def test_share_ids_are_random_version_4_uuids() -> None:
    ids = {random_share_id() for _ in range(200)}
    assert len(ids) == 200
    for text in ids:
        parsed = uuid.UUID(text)
        assert str(parsed) == text
        assert parsed.version == 4
        assert parsed.variant == uuid.RFC_4122
