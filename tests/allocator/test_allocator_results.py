"""Results in memory (Go struct semantics) and printed (Go encoding/json with omitempty)."""

from __future__ import annotations

from test_allocator_quirks import allocate, claim, driver_class, request, resource_slice

from policies.allocator.results import allocation_result_json

CLASSES = [driver_class("class-a", "driver-a")]


def test_in_memory_results_copy_lists_verbatim_but_print_without_empty_members() -> None:
    slices = [resource_slice("s", "driver-a", "pool-1", [{"name": "device-0"}, {"name": "device-1"}])]
    wanted = claim(
        "c",
        request("none", "class-a", tolerations=[]),
        request("empty-value", "class-a", tolerations=[{"key": "k", "operator": "Exists", "value": ""}]),
    )
    outcome = allocate(CLASSES, slices, [wanted])
    assert outcome.results is not None
    [result] = outcome.results
    assert result.devices is not None and result.devices.results is not None
    # In memory: the request's (empty) list, as Go copies the slice.
    assert result.devices.results[0].tolerations == []
    printed = allocation_result_json(result)
    first, second = printed["devices"]["results"]
    assert first == {"request": "none", "driver": "driver-a", "pool": "pool-1", "device": "device-0"}
    assert second["tolerations"] == [{"key": "k", "operator": "Exists"}]
    assert printed["nodeSelector"] == {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}
        ]
    }


def test_claim_without_requests_prints_an_empty_devices_object() -> None:
    outcome = allocate(CLASSES, [], [claim("nothing")])
    assert outcome.results is not None
    assert allocation_result_json(outcome.results[0]) == {"devices": {}}


def test_consumed_capacity_prints_sorted_and_admin_access_only_when_true() -> None:
    device = {
        "name": "nic-0",
        "allowMultipleAllocations": True,
        "capacity": {"queues": {"value": "8"}, "bandwidth": {"value": "10G"}},
    }
    slices = [resource_slice("s", "driver-a", "pool-1", [device])]
    outcome = allocate(CLASSES, slices, [claim("c", request("r", "class-a", adminAccess=False))])
    assert outcome.results is not None
    [printed] = allocation_result_json(outcome.results[0])["devices"]["results"]
    assert list(printed["consumedCapacity"]) == ["bandwidth", "queues"]
    assert "adminAccess" not in printed
    assert printed["shareID"] == "00000000-0000-4000-8000-000000000001"


def test_consumed_capacity_prints_canonical_quantities() -> None:
    # Without a policy the consumed amount is the requested Quantity itself; Go prints its String().
    device = {
        "name": "gpu-0",
        "allowMultipleAllocations": True,
        "capacity": {"memory": {"value": "80Gi"}, "lanes": {"value": "4"}},
    }
    slices = [resource_slice("s", "driver-a", "pool-1", [device])]
    wanted = request("r", "class-a", capacity={"requests": {"memory": "1024Mi", "lanes": "1000m"}})
    outcome = allocate(CLASSES, slices, [claim("c", wanted)])
    assert outcome.results is not None
    [printed] = allocation_result_json(outcome.results[0])["devices"]["results"]
    assert printed["consumedCapacity"] == {"lanes": "1", "memory": "1Gi"}
