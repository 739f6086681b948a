"""What the allocator computes once and reuses must never change an answer.

An Allocator is built once per snapshot and asked about many nodes by many pods (each through its
own fork), so it keeps what depends only on the snapshot (see the docstrings of ``devices``,
``pools`` and ``search``). Each test here asks a warm allocator something a cache could get wrong
and compares with what a fresh allocator answers.
"""

from __future__ import annotations

from typing import Any

from fixtures import standard_node
from test_allocator_quirks import claim, driver_class, request, resource_slice

from policies.allocator import AllocatedState, AllocationOutcome, Allocator, DeviceID, Features
from policies.api.quantity import Quantity
from policies.api.resource import DeviceClass, ResourceClaim, ResourceSlice

SHARE_ID = "00000000-0000-4000-8000-000000000001"


def fresh(
    classes: list[DeviceClass], slices: list[ResourceSlice], allocated: AllocatedState | None = None
) -> Allocator:
    state = allocated or AllocatedState()
    return Allocator(Features(), state, {c.name: c for c in classes}, slices, new_share_id=lambda: SHARE_ID)


def consumed(outcome: AllocationOutcome) -> list[dict[str, Any]]:
    """consumedCapacity of every device result, as the API prints it (the spelling shows)."""
    assert outcome.results is not None, str(outcome.explanation)
    return [
        r.to_json().get("consumedCapacity", {})
        for result in outcome.results
        for r in (result.devices.results if result.devices and result.devices.results else [])
    ]


def shared_nic(policy: dict[str, Any] | None = None) -> ResourceSlice:
    capacity: dict[str, Any] = {"value": "100Gi"}
    if policy is not None:
        capacity["requestPolicy"] = policy
    nic = {"name": "nic-0", "allowMultipleAllocations": True, "capacity": {"bandwidth": capacity}}
    return resource_slice("nics", "nic.example.com", "node-1", [nic])


def share(name: str, amount: str) -> ResourceClaim:
    return claim(name, request("share", "nic", capacity={"requests": {"bandwidth": amount}}))


def test_equal_amounts_spelled_differently_are_each_reported_as_written() -> None:
    # What a request consumes is cached per device by value; the reported quantity is the request's own.
    classes, slices = [driver_class("nic", "nic.example.com")], [shared_nic()]
    node = standard_node("node-1")
    warm = fresh(classes, slices)
    for amount in ("10Gi", "10737418240", "10Gi"):
        answer = consumed(warm.fork().allocate(node, [share("c", amount)]))
        assert answer == consumed(fresh(classes, slices).allocate(node, [share("c", amount)]))
        assert answer == [{"bandwidth": amount}]


def test_rounded_and_default_amounts_are_the_devices_own() -> None:
    policy = {"default": "1Gi", "validRange": {"min": "1Gi", "step": "2Gi"}}
    classes, slices = [driver_class("nic", "nic.example.com")], [shared_nic(policy)]
    node = standard_node("node-1")
    warm = fresh(classes, slices)
    no_amount = claim("d", request("share", "nic"))
    for ask in (share("a", "2Gi"), share("b", "2147483648"), no_amount, share("a", "2Gi")):
        assert consumed(warm.fork().allocate(node, [ask])) == consumed(
            fresh(classes, slices).allocate(node, [ask])
        )
    # 2Gi rounds up to 3Gi (min 1Gi + one 2Gi step), in binary-SI form whatever the request wrote.
    assert consumed(warm.allocate(node, [share("b", "2147483648")])) == [{"bandwidth": "3Gi"}]
    assert consumed(warm.allocate(node, [no_amount])) == [{"bandwidth": "1Gi"}]


def test_a_cached_consumption_is_checked_against_the_shares_in_use_at_every_call() -> None:
    classes, slices = [driver_class("nic", "nic.example.com")], [shared_nic()]
    node = standard_node("node-1")
    nic = DeviceID("nic.example.com", "node-1", "nic-0")
    busy = AllocatedState(
        allocated_shared_device_ids=frozenset({(nic, SHARE_ID)}),
        aggregated_capacity={nic: {"bandwidth": Quantity.parse("50Gi")}},
    )
    warm = fresh(classes, slices, busy)
    # 50Gi in use: 40Gi fits, again and again (a share picked in one call is not in use in the next),
    # 60Gi never does; two 40Gi shares in one call do not fit either.
    for _ in range(2):
        assert consumed(warm.allocate(node, [share("c", "40Gi")])) == [{"bandwidth": "40Gi"}]
        assert warm.allocate(node, [share("c", "60Gi")]).results is None
    assert warm.allocate(node, [share("c", "40Gi"), share("d", "40Gi")]).results is None
    assert consumed(fresh(classes, slices).allocate(node, [share("c", "40Gi"), share("d", "40Gi")])) == [
        {"bandwidth": "40Gi"},
        {"bandwidth": "40Gi"},
    ]


def test_result_entries_reused_across_calls_still_say_what_each_request_asked() -> None:
    # Entries naming only request and device are kept per device; admin access, tolerations and
    # binding conditions must still come from the request and device at hand.
    classes = [driver_class("gpu", "driver-a")]
    slices = [
        resource_slice(
            "s",
            "driver-a",
            "pool-1",
            [{"name": "plain"}, {"name": "bound", "bindingConditions": ["ready"], "bindsToNode": True}],
        )
    ]
    node = standard_node("node-1")
    asks = [
        claim("c", request("r", "gpu")),
        claim("c", request("r", "gpu", adminAccess=True)),
        claim("c", request("r", "gpu", tolerations=[{"key": "k", "operator": "Exists"}])),
        claim("c", request("other", "gpu")),
        claim("c", request("r", "gpu", 2)),
    ]
    warm = fresh(classes, slices)
    for _ in range(2):
        for ask in asks:
            got = warm.fork().allocate(node, [ask])
            want = fresh(classes, slices).allocate(node, [ask])
            assert got.results is not None and want.results is not None
            assert [r.to_json() for r in got.results] == [r.to_json() for r in want.results]
    entries = warm.allocate(node, [asks[4]]).results
    assert entries is not None and entries[0].devices is not None
    assert [e.binding_conditions for e in entries[0].devices.results or []] == [None, ["ready"]]


def partitioned_gpu() -> list[ResourceSlice]:
    """One GPU of 8 memory units published whole and as two halves sharing its counters."""
    counters = [{"name": "gpu-0", "counters": {"memory": {"value": "8"}}}]
    devices = [
        {"name": name, "consumesCounters": [{"counterSet": "gpu-0", "counters": {"memory": {"value": n}}}]}
        for name, n in (("whole", "8"), ("half-0", "4"), ("half-1", "4"))
    ]
    return [
        resource_slice("gpu-counters", "gpu.example.com", "gpu-pool", [], count=2, sharedCounters=counters),
        resource_slice("gpu-parts", "gpu.example.com", "gpu-pool", devices, count=2),
    ]


def picked(outcome: AllocationOutcome) -> list[str]:
    return [r.device for result in outcome.results or () for r in (result.devices.results or ())]


def test_a_growing_allocator_keeps_its_placements_from_the_one_it_grew_from() -> None:
    """A headroom places pod after pod on a ``growing()`` copy, which makes the views a placement
    touches forget their counters left and scan lists instead of gathering them again. The copy
    must see its placements (the whole GPU taken: no half fits, its counters are gone), and the
    allocator it grew from, whose views it started with, must not (it still hands out the whole
    GPU), also after the copy's searches filled its views again."""
    classes, slices = [driver_class("gpu", "gpu.example.com")], partitioned_gpu()
    node = standard_node("node-1")
    parent = fresh(classes, slices)
    assert picked(parent.fork().allocate(node, [claim("a", request("g", "gpu"))])) == ["whole"]
    grown = parent.growing()
    first = grown.fork().allocate(node, [claim("a", request("g", "gpu"))])
    assert picked(first) == ["whole"]
    grown.add(first.results or ())
    assert grown.fork().allocate(node, [claim("b", request("g", "gpu"))]).results is None
    assert picked(parent.fork().allocate(node, [claim("b", request("g", "gpu"))])) == ["whole"]
