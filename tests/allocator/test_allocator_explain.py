"""Explanations of a failed allocation, and the search budget.

An explanation must let a person act: per request, how many of the node's devices each check
rejected. The counts here are derived from the inputs by hand, one device per reason.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from fixtures import standard_node
from test_allocator_quirks import allocate, claim, driver_class, request, resource_slice

from policies.allocator import (
    AllocatedState,
    Allocator,
    DeviceID,
    Features,
    SearchAbortedError,
    SearchBudget,
)
from policies.api.resource import ResourceSlice
from policies.cel import Environment, SelectorCache

BIG = 'device.attributes["driver-a"].size == "big"'


def one_of_each_reason() -> list[ResourceSlice]:
    """driver-a devices: usable, too small, allocated, tainted; plus one driver-b device."""
    devices: list[dict[str, Any]] = [
        {"name": "usable", "attributes": {"size": {"string": "big"}}},
        {"name": "small", "attributes": {"size": {"string": "small"}}},
        {"name": "taken", "attributes": {"size": {"string": "big"}}},
        {
            "name": "tainted",
            "attributes": {"size": {"string": "big"}},
            "taints": [{"key": "broken", "value": "yes", "effect": "NoExecute"}],
        },
    ]
    return [
        resource_slice("a", "driver-a", "pool-a", devices),
        resource_slice("b", "driver-b", "pool-b", [{"name": "other"}]),
    ]


def test_explanation_counts_each_reason_once_per_device() -> None:
    state = AllocatedState(allocated_devices=frozenset({DeviceID("driver-a", "pool-a", "taken")}))
    outcome = allocate(
        [driver_class("class-a", "driver-a")],
        one_of_each_reason(),
        [claim("gpus", request("req-0", "class-a", 2, BIG))],
        allocated=state,
    )
    assert outcome.error is None
    assert outcome.results is None
    explanation = outcome.explanation
    assert explanation is not None
    [req] = explanation.requests
    assert (req.claim, req.request, req.device_class, req.wanted, req.reached) == (
        "ns/gpus",
        "req-0",
        "class-a",
        2,
        True,
    )
    assert req.considered == 5
    assert req.rejected == {"classSelector": 1, "requestSelector": 1, "allocated": 1, "tainted": 1}
    assert req.usable == 1
    assert [(s.source, s.index, s.expression, s.devices) for s in req.selectors] == [
        ("class", 0, 'device.driver == "driver-a"', 1),
        ("request", 0, BIG, 1),
    ]
    message = explanation.message()
    assert "claim ns/gpus, request req-0 (class class-a) needs 2 devices; 5 devices considered" in message
    assert "1 is already allocated" in message and "1 usable" in message


def test_explanation_is_plain_json() -> None:
    outcome = allocate(
        [driver_class("class-a", "driver-a")], one_of_each_reason(), [claim("c", request("r", "class-a", 9))]
    )
    assert outcome.explanation is not None
    data = json.loads(json.dumps(outcome.explanation.to_json()))
    assert data["node"] == "node-1"
    assert data["requests"][0]["usable"] == 3  # every driver-a device except the tainted one
    assert data["message"] == outcome.explanation.message()


def test_explanation_names_the_constraint_that_refused_devices() -> None:
    devices = [
        {"name": "numa-0", "attributes": {"numa": {"int": 0}, "role": {"string": "a"}}},
        {"name": "numa-1", "attributes": {"numa": {"int": 1}, "role": {"string": "b"}}},
    ]
    role = 'device.attributes["driver-a"].role == "{}"'
    outcome = allocate(
        [driver_class("class-a", "driver-a")],
        [resource_slice("s", "driver-a", "pool-1", devices)],
        [
            claim(
                "c",
                request("req-0", "class-a", 1, role.format("a")),
                request("req-1", "class-a", 1, role.format("b")),
                constraints=[{"matchAttribute": "driver-a/numa"}],
            )
        ],
    )
    assert outcome.results is None and outcome.explanation is not None
    second = outcome.explanation.requests[1]
    assert second.request == "req-1"
    assert [(c.index, c.kind, c.attribute, c.devices) for c in second.constraints] == [
        (0, "matchAttribute", "driver-a/numa", 1)
    ]
    assert "1 fails constraint #0 (matchAttribute driver-a/numa)" in outcome.explanation.message()


def test_explanation_lists_unusable_pools() -> None:
    slices = [resource_slice("s", "driver-a", "pool-1", [{"name": "device-0"}], count=2)]
    outcome = allocate([driver_class("class-a", "driver-a")], slices, [claim("c", request("r", "class-a"))])
    assert outcome.results is None and outcome.explanation is not None
    [problem] = outcome.explanation.pools
    assert (problem.driver, problem.pool, problem.problem) == ("driver-a", "pool-1", "incomplete")
    assert problem.detail == "1 of 2 slices published"


def test_explanation_is_skipped_on_request_and_absent_on_success() -> None:
    allocator = Allocator(
        Features(), AllocatedState(), {"class-a": driver_class("class-a", "driver-a")}, one_of_each_reason()
    )
    node = standard_node("node-1")
    assert (
        allocator.allocate(node, [claim("c", request("r", "class-a", 9))], explain=False).explanation is None
    )
    success = allocator.allocate(node, [claim("c", request("r", "class-a", 1))])
    assert success.results is not None and success.explanation is None


# --- search budget -----------------------------------------------------------------------------------------


def five_devices_six_wanted(budget: SearchBudget) -> Allocator:
    slices = [resource_slice("s", "driver-a", "pool-1", [{"name": f"device-{i}"} for i in range(5)])]
    return Allocator(
        Features.none(),
        AllocatedState(),
        {"class-a": driver_class("class-a", "driver-a")},
        slices,
        budget=budget,
    )


def test_effort_budget_stops_the_search_and_says_how_far_it_got() -> None:
    allocator = five_devices_six_wanted(SearchBudget(max_invocations=10))
    outcome = allocator.allocate(standard_node("node-1"), [claim("c", request("r", "class-a", 6))])
    assert isinstance(outcome.error, SearchAbortedError)
    assert outcome.results is None
    assert outcome.invocations == 11
    message = str(outcome.error)
    assert message.startswith("filter operation aborted: search effort limit of 10 steps exceeded")
    assert "gave up after 11 steps, having placed at most 5 of at least 6 device(s)" in message


def test_search_without_budget_limit_finishes() -> None:
    allocator = five_devices_six_wanted(SearchBudget(max_invocations=None))
    outcome = allocator.allocate(standard_node("node-1"), [claim("c", request("r", "class-a", 6))])
    assert outcome.error is None and outcome.results is None
    # Combinations only: the root plus every non-empty subset of the 5 devices (dra-reference 4.17).
    assert outcome.invocations == 32


def test_deadline_needs_a_clock() -> None:
    with pytest.raises(ValueError, match=r"SearchBudget\.clock"):
        SearchBudget(deadline=1.0)


def test_deep_search_does_not_hit_the_recursion_limit() -> None:
    # 40 claims of 30 devices each: well over a thousand nested search steps on one path.
    devices = [{"name": f"device-{i}"} for i in range(1200)]
    many = [
        resource_slice(f"s{i}", "driver-a", "pool-1", devices[i * 100 : (i + 1) * 100], count=12)
        for i in range(12)
    ]
    claims = [claim(f"c{i}", request("r", "class-a", 30)) for i in range(40)]
    outcome = allocate([driver_class("class-a", "driver-a")], many, claims)
    assert outcome.error is None and outcome.results is not None
    assert outcome.invocations > 1200


# --- selector results shared across Allocators -------------------------------------------------------------


def test_a_shared_selector_cache_reuses_results_across_allocators() -> None:
    cache = SelectorCache(Environment(kind="stored", list_type_attributes=False))
    slices = one_of_each_reason()
    classes = {"class-a": driver_class("class-a", "driver-a")}
    wanted = [claim("c", request("r", "class-a", 1, BIG))]
    first = Allocator(Features(), AllocatedState(), classes, slices, cel_cache=cache)
    assert first.allocate(standard_node("node-1"), wanted).results is not None
    devices = slices[0].spec.devices
    assert devices
    binding = cache.bind("driver-a", "pool-a", devices[0])
    assert binding.results, "the first Allocator's selector results live in the shared cache"
    second = Allocator(Features(), AllocatedState(), classes, slices, cel_cache=cache)
    assert second.allocate(standard_node("node-1"), wanted).results is not None


def test_a_selector_cache_must_match_the_list_attribute_switch() -> None:
    cache = SelectorCache(Environment(kind="stored", list_type_attributes=True))
    with pytest.raises(ValueError, match="list_type_attributes"):
        Allocator(Features(), AllocatedState(), {}, [], cel_cache=cache)


def test_explanation_counts_devices_taken_by_other_requests_of_the_pod() -> None:
    slices = [resource_slice("s", "driver-a", "pool-1", [{"name": "device-0"}])]
    outcome = allocate(
        [driver_class("class-a", "driver-a")],
        slices,
        [claim("first", request("r", "class-a")), claim("second", request("r", "class-a"))],
    )
    assert outcome.results is None and outcome.explanation is not None
    first, second = outcome.explanation.requests
    assert (first.claim, first.usable, first.rejected) == ("ns/first", 1, {})
    assert (second.claim, second.usable, second.rejected) == ("ns/second", 0, {"inUse": 1})
    message = outcome.explanation.message()
    assert "1 device considered: 1 is taken by another request of this pod, 0 usable" in message
