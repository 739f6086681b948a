"""``allocate(..., quick_reject=True)`` must give upstream's answer on every upstream case.

Quick rejection skips the exhaustive search when a request cannot find enough usable devices on
the node at all. Only the step count may differ, so every case of the upstream table is run again
with it on and checked for the same results and errors (not the invocation counts).
"""

from __future__ import annotations

from typing import Any

import pytest
from fixtures import standard_node
from test_allocator_quirks import allocate, claim, driver_class, request, resource_slice
from test_upstream_cases import CaseError, Inputs, case_params, check_error, check_results, share_id_factory

from policies.allocator import AllocatedState, Allocator, Features


@pytest.mark.parametrize("case", list(case_params()))
def test_quick_reject_keeps_upstream_answers(case: dict[str, Any] | CaseError) -> None:
    if isinstance(case, CaseError):
        pytest.skip("unreadable case file: reported by test_upstream_cases")
    case.setdefault("expect", {})
    inputs = Inputs.of(case)
    allocator = Allocator(
        inputs.features, inputs.allocated, inputs.classes, inputs.slices, new_share_id=share_id_factory()
    )
    outcome = allocator.allocate(inputs.node, inputs.claims, quick_reject=True)
    check_error(case, outcome)
    check_results(case, outcome)


def test_quick_reject_skips_the_search_when_a_request_is_short_of_devices() -> None:
    slices = [resource_slice("s", "driver-a", "pool-1", [{"name": f"device-{i}"} for i in range(8)])]
    wanted = [claim("c", request("r", "class-a", 9))]
    classes = [driver_class("class-a", "driver-a")]
    full = allocate(classes, slices, wanted)
    assert full.results is None and full.invocations == 2**8
    allocator = Allocator(Features(), AllocatedState(), {"class-a": classes[0]}, slices)
    quick = allocator.allocate(standard_node("node-1"), wanted, quick_reject=True)
    assert quick.results is None and quick.error is None
    assert quick.invocations == 0
    assert quick.explanation is not None and quick.explanation.requests[0].usable == 8


def test_quick_reject_still_searches_when_a_selector_could_fail() -> None:
    # device-bad lacks the attribute: upstream's search reaches it and fails with a CEL error.
    devices: list[dict[str, Any]] = [
        {"name": "device-bad"},
        {"name": "device-good", "attributes": {"model": {"string": "x"}}},
    ]
    slices = [resource_slice("s", "driver-a", "pool-1", devices)]
    wanted = [claim("c", request("r", "class-a", 3, 'device.attributes["driver-a"].model == "x"'))]
    allocator = Allocator(
        Features(), AllocatedState(), {"class-a": driver_class("class-a", "driver-a")}, slices
    )
    outcome = allocator.allocate(standard_node("node-1"), wanted, quick_reject=True)
    assert outcome.results is None
    assert "CEL runtime error" in str(outcome.error)


def test_quick_reject_explanation_calls_every_request_reached() -> None:
    slices = [resource_slice("s", "driver-a", "pool-1", [{"name": f"device-{i}"} for i in range(2)])]
    wanted = [claim("c", request("fits", "class-a", 1), request("short", "class-a", 5))]
    allocator = Allocator(
        Features(), AllocatedState(), {"class-a": driver_class("class-a", "driver-a")}, slices
    )
    outcome = allocator.allocate(standard_node("node-1"), wanted, quick_reject=True)
    assert outcome.invocations == 0 and outcome.explanation is not None
    assert [r.reached for r in outcome.explanation.requests] == [True, True]
    assert "not reached" not in outcome.explanation.message()
