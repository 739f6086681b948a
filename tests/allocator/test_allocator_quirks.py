"""Upstream 1.36 allocator quirks that draguard reproduces on purpose, one test per quirk.

Each test names the dra-reference section that documents the quirk (4.7, 4.9, 4.10, 4.16a) and
builds the smallest input where the quirk changes the answer, so that "fixing" it fails here.
The small builders at the top are shared with the other ``test_allocator_*`` modules.
"""

from __future__ import annotations

from typing import Any

from fixtures import standard_node

from policies.allocator import (
    AllocatedState,
    AllocationOutcome,
    Allocator,
    DeviceID,
    Features,
    SearchAbortedError,
    SearchBudget,
)
from policies.allocator.constraints import AttributeValue, DistinctAttribute, MatchAttribute
from policies.api.kinds import decode
from policies.api.resource import (
    API_VERSION,
    DeviceAttribute,
    DeviceClass,
    DeviceTaintRule,
    ResourceClaim,
    ResourceSlice,
)

# --- builders ------------------------------------------------------------------------------------------


def device_class(name: str, expression: str) -> DeviceClass:
    obj = decode(
        {
            "apiVersion": API_VERSION,
            "kind": "DeviceClass",
            "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": expression}}]},
        }
    )
    assert isinstance(obj, DeviceClass)
    return obj


def driver_class(name: str, driver: str) -> DeviceClass:
    return device_class(name, f'device.driver == "{driver}"')


def resource_slice(
    name: str, driver: str, pool: str, devices: list[dict[str, Any]], *, count: int = 1, **spec: Any
) -> ResourceSlice:
    """A slice on node-1 (unless ``spec`` says otherwise) of a pool with ``count`` slices."""
    body: dict[str, Any] = {
        "driver": driver,
        "pool": {"name": pool, "generation": 1, "resourceSliceCount": count},
        "devices": devices,
    }
    if not any(k in spec for k in ("nodeName", "allNodes", "nodeSelector", "perDeviceNodeSelection")):
        body["nodeName"] = "node-1"
    body.update(spec)
    obj = decode(
        {"apiVersion": API_VERSION, "kind": "ResourceSlice", "metadata": {"name": name}, "spec": body}
    )
    assert isinstance(obj, ResourceSlice)
    return obj


def counter_slice(
    name: str, driver: str, pool: str, sets: dict[str, dict[str, str]], *, count: int
) -> ResourceSlice:
    shared = [
        {"name": set_name, "counters": {c: {"value": v} for c, v in counters.items()}}
        for set_name, counters in sets.items()
    ]
    return resource_slice(name, driver, pool, [], count=count, sharedCounters=shared)


def request(name: str, class_name: str, count: int = 1, *selectors: str, **extra: Any) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": class_name, "allocationMode": "ExactCount", "count": count}
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    exactly.update(extra)
    return {"name": name, "exactly": exactly}


def claim(name: str, *requests: dict[str, Any], **devices: Any) -> ResourceClaim:
    obj = decode(
        {
            "apiVersion": API_VERSION,
            "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"devices": {"requests": list(requests), **devices}},
        }
    )
    assert isinstance(obj, ResourceClaim)
    return obj


def allocate(
    classes: list[DeviceClass],
    slices: list[ResourceSlice],
    claims: list[ResourceClaim],
    *,
    features: Features | None = None,
    allocated: AllocatedState | None = None,
    taint_rules: list[DeviceTaintRule] | None = None,
) -> AllocationOutcome:
    allocator = Allocator(
        features or Features(),
        allocated or AllocatedState(),
        {c.name: c for c in classes},
        slices,
        taint_rules=taint_rules or (),
        new_share_id=lambda: "00000000-0000-4000-8000-000000000001",
    )
    return allocator.allocate(standard_node("node-1"), claims)


def picked(outcome: AllocationOutcome) -> list[list[str]]:
    """Per claim, ``request:driver/pool/device`` of every result, in result order."""
    assert outcome.error is None, str(outcome.error)
    assert outcome.results is not None, str(outcome.explanation)
    return [
        [f"{r.request}:{r.driver}/{r.pool}/{r.device}" for r in (result.devices.results or [])]
        for result in outcome.results
        if result.devices is not None
    ]


def consumes(counter_set: str, **counters: str) -> list[dict[str, Any]]:
    return [{"counterSet": counter_set, "counters": {c: {"value": v} for c, v in counters.items()}}]


# --- 4.16a: counters cached by pool name only ------------------------------------------------------------


def partition_and_nics(nic_pool: str) -> AllocationOutcome:
    """A GPU partition in gpu.example.com pool node-1, then two NICs that each use the whole NIC counter."""
    slices = [
        counter_slice("gpu-counters", "gpu.example.com", "node-1", {"gpu-set": {"memory": "8Gi"}}, count=2),
        resource_slice(
            "gpu-devices",
            "gpu.example.com",
            "node-1",
            [{"name": "gpu-0-half", "consumesCounters": consumes("gpu-set", memory="4Gi")}],
            count=2,
        ),
        counter_slice("nic-counters", "nic.example.com", nic_pool, {"nic-set": {"units": "4"}}, count=2),
        resource_slice(
            "nic-devices",
            "nic.example.com",
            nic_pool,
            [{"name": f"nic-{i}", "consumesCounters": consumes("nic-set", units="4")} for i in range(2)],
            count=2,
        ),
    ]
    classes = [driver_class("gpu", "gpu.example.com"), driver_class("nic", "nic.example.com")]
    return allocate(classes, slices, [claim("c", request("gpu", "gpu"), request("nics", "nic", 2))])


def test_quirk_counter_cache_keyed_by_pool_name_only_lets_same_named_pool_overcommit() -> None:
    # dra-reference 4.16a: the NIC pool shares its name with the GPU pool checked first, so its
    # own counters are never compared and both NICs get the 4 units that exist once.
    assert picked(partition_and_nics("node-1")) == [
        [
            "gpu:gpu.example.com/node-1/gpu-0-half",
            "nics:nic.example.com/node-1/nic-0",
            "nics:nic.example.com/node-1/nic-1",
        ]
    ]


def test_quirk_counter_cache_with_distinct_pool_names_refuses_the_overcommit() -> None:
    outcome = partition_and_nics("nic-pool")
    assert outcome.error is None
    assert outcome.results is None


# --- 4.7: counters kept after a later check rejects the device ------------------------------------------


def test_quirk_counters_not_released_when_a_taint_rejects_the_device() -> None:
    # dra-reference 4.7: device-1 reserves all 8 counter units, is then rejected for its taint,
    # and keeps the units reserved, so device-2 (which would fit alone) is refused too.
    slices = [
        counter_slice("counters", "driver-a", "pool-1", {"set": {"units": "8"}}, count=2),
        resource_slice(
            "devices",
            "driver-a",
            "pool-1",
            [
                {
                    "name": "device-1",
                    "consumesCounters": consumes("set", units="8"),
                    "taints": [{"key": "broken", "value": "yes", "effect": "NoSchedule"}],
                },
                {"name": "device-2", "consumesCounters": consumes("set", units="8")},
            ],
            count=2,
        ),
    ]
    outcome = allocate([driver_class("class-a", "driver-a")], slices, [claim("c", request("r", "class-a"))])
    assert outcome.error is None
    assert outcome.results is None
    assert outcome.explanation is not None
    assert outcome.explanation.requests[0].rejected == {"tainted": 1, "counters": 1}


def test_quirk_counters_not_released_when_a_constraint_rejects_the_device() -> None:
    # device-1 (numa 1) reserves the counters and then fails the matchAttribute constraint with
    # req-0's device-0 (numa 0); device-2 (numa 0) would fit but finds the counters taken.
    slices = [
        counter_slice("counters", "driver-a", "pool-1", {"set": {"units": "8"}}, count=2),
        resource_slice(
            "devices",
            "driver-a",
            "pool-1",
            [
                {"name": "device-0", "attributes": {"numa": {"int": 0}, "kind": {"string": "a"}}},
                {
                    "name": "device-1",
                    "attributes": {"numa": {"int": 1}, "kind": {"string": "b"}},
                    "consumesCounters": consumes("set", units="8"),
                },
                {
                    "name": "device-2",
                    "attributes": {"numa": {"int": 0}, "kind": {"string": "b"}},
                    "consumesCounters": consumes("set", units="8"),
                },
            ],
            count=2,
        ),
    ]
    kind = 'device.attributes["driver-a"].kind == "{}"'
    constrained = claim(
        "c",
        request("req-0", "class-a", 1, kind.format("a")),
        request("req-1", "class-a", 1, kind.format("b")),
        constraints=[{"matchAttribute": "driver-a/numa"}],
    )
    outcome = allocate([driver_class("class-a", "driver-a")], slices, [constrained])
    assert outcome.error is None
    assert outcome.results is None


# --- 4.10: a multi-allocatable device never gives its counters back --------------------------------------


def test_quirk_multi_allocatable_device_keeps_counters_after_backtracking() -> None:
    # shared-0 (multi-allocatable) takes the 4 units for req-0, then req-1's constraint fails and
    # shared-0 is given back without its counters, so dedicated-0 (also 4 units) no longer fits.
    slices = [
        counter_slice("counters", "driver-a", "pool-1", {"set": {"units": "4"}}, count=2),
        resource_slice(
            "devices",
            "driver-a",
            "pool-1",
            [
                {
                    "name": "shared-0",
                    "allowMultipleAllocations": True,
                    "attributes": {"group": {"string": "a"}},
                    "consumesCounters": consumes("set", units="4"),
                },
                {
                    "name": "dedicated-0",
                    "attributes": {"group": {"string": "b"}},
                    "consumesCounters": consumes("set", units="4"),
                },
                {"name": "plain-0", "attributes": {"group": {"string": "b"}, "plain": {"bool": True}}},
            ],
            count=2,
        ),
    ]
    plain = '"plain" in device.attributes["driver-a"]'
    outcome = allocate(
        [driver_class("class-a", "driver-a")],
        slices,
        [
            claim(
                "c",
                request("req-0", "class-a"),
                request("req-1", "class-a", 1, plain),
                constraints=[{"matchAttribute": "driver-a/group"}],
            )
        ],
    )
    assert outcome.error is None
    assert outcome.results is None


# --- 4.9: constraint trackers ---------------------------------------------------------------------------


class FakeDevice:
    """Just enough of a device for a constraint tracker: one attribute ``d/attr``."""

    def __init__(self, **attribute: Any) -> None:
        self._value = AttributeValue(DeviceAttribute.model_validate(attribute))

    def attribute(self, name: str) -> AttributeValue | None:
        return self._value if name == "d/attr" else None


def test_quirk_match_attribute_reference_is_reseeded_only_when_empty() -> None:
    tracker = MatchAttribute(0, "d/attr", list_mode=False)
    assert tracker.add(FakeDevice(int=1), "req-0")
    assert not tracker.add(FakeDevice(int=2), "req-0")
    assert tracker.add(FakeDevice(int=1), "req-0")
    tracker.remove("req-0")
    # One device left: the reference stays 1 even though it could be anything now.
    assert not tracker.add(FakeDevice(int=2), "req-0")
    tracker.remove("req-0")
    # Empty again: the next device seeds a new reference.
    assert tracker.add(FakeDevice(int=2), "req-0")


def test_quirk_match_attribute_list_intersection_is_not_widened_on_remove() -> None:
    tracker = MatchAttribute(0, "d/attr", list_mode=True)
    assert tracker.add(FakeDevice(strings=["a", "b"]), "req-0")
    assert tracker.add(FakeDevice(strings=["b", "c"]), "req-0")  # common: {b}
    tracker.remove("req-0")
    # Only {a, b} is left, but the intersection is still {b}: "a" no longer matches.
    assert not tracker.add(FakeDevice(strings=["a"]), "req-0")
    assert tracker.add(FakeDevice(string="b"), "req-0")


def test_quirk_distinct_attribute_remembers_one_value_per_request_name() -> None:
    tracker = DistinctAttribute(0, "d/attr", list_mode=False)
    assert tracker.add(FakeDevice(int=1), "req-0")
    assert tracker.add(FakeDevice(int=2), "req-0")  # replaces req-0's remembered 1
    # 1 is forgotten: a duplicate of the first device passes for another request.
    assert tracker.add(FakeDevice(int=1), "req-1")
    assert not tracker.add(FakeDevice(int=2), "req-2")


def test_quirk_distinct_attribute_lets_a_duplicate_through_in_an_allocation() -> None:
    slices = [
        resource_slice(
            "devices",
            "driver-a",
            "pool-1",
            [
                {"name": f"device-{i}", "attributes": {"numa": {"int": numa}}}
                for i, numa in enumerate([1, 2, 1])
            ],
        )
    ]
    outcome = allocate(
        [driver_class("class-a", "driver-a")],
        slices,
        [
            claim(
                "c",
                request("req-0", "class-a", 2),
                request("req-1", "class-a"),
                constraints=[{"distinctAttribute": "driver-a/numa"}],
            )
        ],
    )
    # device-2 has numa 1 like device-0, yet passes: req-0's remembered value is device-1's 2.
    assert picked(outcome) == [
        ["req-0:driver-a/pool-1/device-0", "req-0:driver-a/pool-1/device-1", "req-1:driver-a/pool-1/device-2"]
    ]


# --- 4.16a: consumable capacity ---------------------------------------------------------------------------


def shared_device_consumption(request_amount: str, policy: dict[str, Any]) -> dict[str, Any]:
    slices = [
        resource_slice(
            "devices",
            "driver-a",
            "pool-1",
            [
                {
                    "name": "nic-0",
                    "allowMultipleAllocations": True,
                    "capacity": {"bandwidth": {"value": "100G", "requestPolicy": policy}},
                }
            ],
        )
    ]
    wanted = request("req-0", "class-a", capacity={"requests": {"bandwidth": request_amount}})
    outcome = allocate([driver_class("class-a", "driver-a")], slices, [claim("c", wanted)])
    assert outcome.error is None and outcome.results is not None, str(outcome.explanation)
    consumed: dict[str, Any] = outcome.results[0].to_json()["devices"]["results"][0]["consumedCapacity"]
    return consumed


def test_quirk_step_rounding_is_reported_in_binary_units() -> None:
    policy = {"default": "10G", "validRange": {"min": "10G", "step": "10G"}}
    assert shared_device_consumption("45G", policy) == {"bandwidth": "48828125Ki"}


def test_quirk_step_rounding_works_in_whole_units() -> None:
    # 1500m rounded on a 500m grid starting at 500m would be 1500m; Value() makes it 1 + 1*1 = 2.
    policy = {"default": "500m", "validRange": {"min": "500m", "step": "500m"}}
    assert shared_device_consumption("1500m", policy) == {"bandwidth": "2"}


def test_quirk_unrequested_capacity_without_policy_is_consumed_whole() -> None:
    slices = [
        resource_slice(
            "devices",
            "driver-a",
            "pool-1",
            [{"name": "nic-0", "allowMultipleAllocations": True, "capacity": {"queues": {"value": "8"}}}],
        )
    ]
    classes = [driver_class("class-a", "driver-a")]
    one = allocate(classes, slices, [claim("c", request("req-0", "class-a"))])
    assert one.results is not None
    assert one.results[0].to_json()["devices"]["results"][0]["consumedCapacity"] == {"queues": "8"}
    two = allocate(
        classes, slices, [claim("c", request("req-0", "class-a")), claim("d", request("req-0", "class-a"))]
    )
    assert two.error is None
    assert two.results is None


# --- 4.16a: allocation mode All, configs, selector errors ----------------------------------------------


def test_quirk_all_mode_fails_on_incomplete_pool_of_another_driver() -> None:
    slices = [
        resource_slice("a", "driver-a", "pool-a", [{"name": "device-0"}]),
        resource_slice("b", "driver-b", "pool-b", [{"name": "device-0"}], count=2),
    ]
    all_of_a = {"name": "req-0", "exactly": {"deviceClassName": "class-a", "allocationMode": "All"}}
    outcome = allocate([driver_class("class-a", "driver-a")], slices, [claim("c", all_of_a)])
    assert outcome.results is None
    assert "asks for all devices, but resource pool driver-b/pool-b is currently being updated" in str(
        outcome.error
    )


def test_quirk_claim_config_is_repeated_once_per_named_request() -> None:
    slices = [resource_slice("a", "driver-a", "pool-1", [{"name": "device-0"}, {"name": "device-1"}])]
    config = [{"requests": ["req-0", "req-1"], "opaque": {"driver": "driver-a", "parameters": {"x": 1}}}]
    outcome = allocate(
        [driver_class("class-a", "driver-a")],
        slices,
        [claim("c", request("req-0", "class-a"), request("req-1", "class-a"), config=config)],
    )
    assert outcome.results is not None
    configs = outcome.results[0].to_json()["devices"]["config"]
    entry = {"source": "FromClaim", "requests": ["req-0", "req-1"], "opaque": config[0]["opaque"]}
    assert configs == [entry, entry]


def test_quirk_selector_runtime_error_only_matters_if_the_search_reaches_the_device() -> None:
    good = {"name": "device-good", "attributes": {"model": {"string": "x"}}}
    bad = {"name": "device-bad"}
    selector = 'device.attributes["driver-a"].model == "x"'
    classes = [driver_class("class-a", "driver-a")]

    first_good = allocate(
        classes,
        [resource_slice("s", "driver-a", "p", [good, bad])],
        [claim("c", request("r", "class-a", 1, selector))],
    )
    assert picked(first_good) == [["r:driver-a/p/device-good"]]

    first_bad = allocate(
        classes,
        [resource_slice("s", "driver-a", "p", [bad, good])],
        [claim("c", request("r", "class-a", 1, selector))],
    )
    assert first_bad.results is None
    assert str(first_bad.error).startswith("claim ns/c: selector #0: CEL runtime error:")


# --- DeviceTaintRule overlay ------------------------------------------------------------------------------


def taint_rule(selector: dict[str, str] | None) -> DeviceTaintRule:
    spec: dict[str, Any] = {"taint": {"key": "maintenance", "value": "now", "effect": "NoSchedule"}}
    if selector is not None:
        spec["deviceSelector"] = selector
    obj = decode(
        {
            "apiVersion": "resource.k8s.io/v1beta2",
            "kind": "DeviceTaintRule",
            "metadata": {"name": "rule"},
            "spec": spec,
        }
    )
    assert isinstance(obj, DeviceTaintRule)
    return obj


def test_device_taint_rules_add_their_taint_to_matching_devices() -> None:
    slices = [resource_slice("s", "driver-a", "pool-1", [{"name": "device-0"}, {"name": "device-1"}])]
    classes = [driver_class("class-a", "driver-a")]
    claims = [claim("c", request("r", "class-a"))]
    ruled = allocate(classes, slices, claims, taint_rules=[taint_rule({"device": "device-0"})])
    assert picked(ruled) == [["r:driver-a/pool-1/device-1"]]
    everything = allocate(classes, slices, claims, taint_rules=[taint_rule({})])
    assert everything.results is None
    # A rule without a selector selects nothing.
    nothing = allocate(classes, slices, claims, taint_rules=[taint_rule(None)])
    assert picked(nothing) == [["r:driver-a/pool-1/device-0"]]


def test_allocated_devices_are_skipped_by_device_id() -> None:
    slices = [resource_slice("s", "driver-a", "pool-1", [{"name": "device-0"}, {"name": "device-1"}])]
    state = AllocatedState(allocated_devices=frozenset({DeviceID("driver-a", "pool-1", "device-0")}))
    outcome = allocate(
        [driver_class("class-a", "driver-a")], slices, [claim("c", request("r", "class-a"))], allocated=state
    )
    assert picked(outcome) == [["r:driver-a/pool-1/device-1"]]


def test_quirk_allow_multiple_allocations_is_visible_to_selectors_with_the_feature_off() -> None:
    # dra-reference 4.16a: stored selectors always see device.allowMultipleAllocations.
    slices = [
        resource_slice(
            "s",
            "driver-a",
            "pool-1",
            [{"name": "dedicated"}, {"name": "shared", "allowMultipleAllocations": True}],
        )
    ]
    multi_only = device_class("class-a", 'device.driver == "driver-a" && device.allowMultipleAllocations')
    outcome = allocate(
        [multi_only],
        slices,
        [claim("c", request("r", "class-a"))],
        features=Features(consumable_capacity=False),
    )
    # Without the feature the device is allocated like any other: no shareID, no consumed capacity.
    assert picked(outcome) == [["r:driver-a/pool-1/shared"]]
    assert outcome.results is not None
    assert "shareID" not in outcome.results[0].to_json()["devices"]["results"][0]


def test_quirk_failed_capacity_recheck_leaves_the_constraint_updated() -> None:
    # dra-reference 4.7: in All mode the device list is computed before anything is in flight.
    # req-0 first takes 1 of shared-d's 2 units; req-1 (all of d and f, 2 units each, distinct x)
    # then adds shared-d to its distinct constraint, fails the capacity re-check and does not take
    # the constraint back. After req-0 moves to shared-e, the stale "a" makes shared-d look like a
    # duplicate of itself, and All mode turns that into an error instead of a result.
    def shared(name: str, x: str) -> dict[str, Any]:
        return {
            "name": name,
            "allowMultipleAllocations": True,
            "attributes": {"x": {"string": x}},
            "capacity": {"units": {"value": "2"}},
        }

    slices = [
        resource_slice(
            "s",
            "driver-a",
            "pool-1",
            [shared("shared-d", "a"), shared("shared-e", "c"), shared("shared-f", "b")],
        )
    ]
    x_in = 'device.attributes["driver-a"].x in {}'
    first = request("req-0", "class-a", 1, x_in.format('["a", "c"]'), capacity={"requests": {"units": "1"}})
    every = {
        "name": "req-1",
        "exactly": {
            "deviceClassName": "class-a",
            "allocationMode": "All",
            "selectors": [{"cel": {"expression": x_in.format('["a", "b"]')}}],
            "capacity": {"requests": {"units": "2"}},
        },
    }
    constraints = [{"requests": ["req-1"], "distinctAttribute": "driver-a/x"}]
    outcome = allocate(
        [driver_class("class-a", "driver-a")], slices, [claim("c", first, every, constraints=constraints)]
    )
    assert outcome.results is None
    assert str(outcome.error) == (
        "claim ns/c, request req-1: cannot add device driver-a/pool-1/shared-d because a claim constraint "
        "would not be satisfied"
    )


def test_fork_answers_like_a_fresh_allocator_despite_the_pool_name_cache() -> None:
    slices = [
        counter_slice("gpu-counters", "gpu.example.com", "node-1", {"gpu-set": {"memory": "8Gi"}}, count=2),
        resource_slice(
            "gpu-devices",
            "gpu.example.com",
            "node-1",
            [{"name": "gpu-0-half", "consumesCounters": consumes("gpu-set", memory="4Gi")}],
            count=2,
        ),
        counter_slice("nic-counters", "nic.example.com", "node-1", {"nic-set": {"units": "4"}}, count=2),
        resource_slice(
            "nic-devices",
            "nic.example.com",
            "node-1",
            [{"name": f"nic-{i}", "consumesCounters": consumes("nic-set", units="4")} for i in range(2)],
            count=2,
        ),
    ]
    classes = {
        c.name: c for c in [driver_class("gpu", "gpu.example.com"), driver_class("nic", "nic.example.com")]
    }
    node = standard_node("node-1")
    gpu_claim, nic_claim = [claim("g", request("gpu", "gpu"))], [claim("n", request("nics", "nic", 2))]

    base = Allocator(Features(), AllocatedState(), classes, slices, budget=SearchBudget(max_invocations=50))
    assert base.allocate(node, gpu_claim).results is not None  # caches "node-1" from the GPU pool
    fork = base.fork(budget=SearchBudget(max_invocations=60))
    # The base keeps its cache (quirk: both NICs fit); the fork starts afresh like a new Allocator.
    assert base.allocate(node, nic_claim).results is not None
    fresh = Allocator(Features(), AllocatedState(), classes, slices).allocate(node, nic_claim)
    forked = fork.allocate(node, nic_claim)
    assert fresh.results is None and forked.results is None
    assert forked.invocations == fresh.invocations
    # A fork takes its own budget.
    assert isinstance(
        base.fork(budget=SearchBudget(max_invocations=1)).allocate(node, nic_claim).error, SearchAbortedError
    )


def test_admin_pick_counts_as_in_use_for_later_non_admin_requests() -> None:
    # dra-reference 4.13: the in-flight set does not tell admin picks apart, so a normal claim after an
    # admin claim finds the device taken, while the reverse order shares it.
    slices = [resource_slice("s", "driver-a", "pool-1", [{"name": "device-1"}])]
    classes = [driver_class("class-a", "driver-a")]
    admin, normal = claim("a", request("r", "class-a", adminAccess=True)), claim("b", request("r", "class-a"))
    assert allocate(classes, slices, [admin, normal]).results is None
    assert picked(allocate(classes, slices, [normal, admin])) == [
        ["r:driver-a/pool-1/device-1"],
        ["r:driver-a/pool-1/device-1"],
    ]
