"""Upstream's ``interrupt`` sub-tests of the allocator, mapped onto draguard's SearchBudget.

Kubernetes 1.36 ``allocator_testing.go`` ends ``TestAllocator`` with four sub-tests that run a
search long enough to be interrupted (6 devices asked for, 5 available) under a context that is
left alone (``off``), times out after 1 ns (``timeout``), has its deadline at "now" (``deadline``)
or is cancelled before the call (``cancel``). When the context is done, ``Allocate`` must fail with
an error that wraps the context's error ("filter operation aborted: <cause>"); otherwise it must not
fail. dra-reference 4.6: the allocator checks for that on every allocateOne call.

``policies/`` has no contexts and no clock: the shell passes a SearchBudget with a deadline and the
clock it is measured with. So "timeout", "deadline" and "cancel" all become a deadline that has
passed by the time the search runs; the wrapped cause is a ``TimeoutError``. The clock here is a
counter that advances on every read, which makes "later" certain without sleeping.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest
from fixtures import standard_class, standard_node

from policies.allocator import (
    AllocatedState,
    AllocationError,
    AllocationOutcome,
    Allocator,
    Features,
    SearchBudget,
)
from policies.api.kinds import decode
from policies.api.resource import API_VERSION, ResourceClaim, ResourceSlice

ABORTED_PREFIX = "filter operation aborted: "


class TickingClock:
    """A clock whose every reading is one unit later than the previous one."""

    def __init__(self) -> None:
        self._ticks = itertools.count()

    def __call__(self) -> float:
        return float(next(self._ticks))


def budget_off() -> SearchBudget:
    """Upstream "off": no deadline at all."""
    return SearchBudget()


def budget_timeout() -> SearchBudget:
    """Upstream "timeout": the deadline is 1 ns after the moment the budget is made."""
    clock = TickingClock()
    return SearchBudget(deadline=clock() + 1e-9, clock=clock)


def budget_deadline() -> SearchBudget:
    """Upstream "deadline": the deadline is the moment the budget is made."""
    clock = TickingClock()
    return SearchBudget(deadline=clock(), clock=clock)


def budget_cancel() -> SearchBudget:
    """Upstream "cancel": cancelled before the call, i.e. a deadline that has already passed."""
    clock = TickingClock()
    now = clock()
    return SearchBudget(deadline=now - 1.0, clock=clock)


def claim_six_devices() -> ResourceClaim:
    claim = decode({
        "apiVersion": API_VERSION,
        "kind": "ResourceClaim",
        "metadata": {"name": "claim-0"},
        "spec": {"devices": {"requests": [{
            "name": "req-0",
            "exactly": {"deviceClassName": "class-a", "allocationMode": "ExactCount", "count": 6},
        }]}},
    })
    assert isinstance(claim, ResourceClaim)
    return claim


def slice_five_devices() -> ResourceSlice:
    device_names = ["device-1", "device-2", "device-3", "device-4", "device-5"]
    resource_slice = decode({
        "apiVersion": API_VERSION,
        "kind": "ResourceSlice",
        "metadata": {"name": "slice-1"},
        "spec": {
            "driver": "driver-a",
            "pool": {"name": "pool-1", "generation": 1, "resourceSliceCount": 1},
            "nodeName": "node-1",
            "devices": [{"name": name} for name in device_names],
        },
    })
    assert isinstance(resource_slice, ResourceSlice)
    return resource_slice


def allocate_with(budget: SearchBudget) -> AllocationOutcome:
    """Upstream's inputs: no features, nothing allocated, class-a, node-1."""
    allocator = Allocator(
        Features.none(),
        AllocatedState(),
        {"class-a": standard_class("class-a")},
        [slice_five_devices()],
        budget=budget,
    )
    return allocator.allocate(standard_node("node-1"), [claim_six_devices()])


def test_search_without_deadline_is_not_interrupted() -> None:
    outcome = allocate_with(budget_off())

    assert outcome.error is None, f"unexpected error: {outcome.error}"
    # Six devices out of five cannot fit: the search runs to its end and finds nothing.
    assert outcome.results is None


@pytest.mark.parametrize(
    "make_budget",
    [budget_timeout, budget_deadline, budget_cancel],
    ids=["timeout", "deadline", "cancel"],
)
def test_passed_deadline_aborts_with_the_cause_wrapped(make_budget: Callable[[], SearchBudget]) -> None:
    outcome = allocate_with(make_budget())

    assert outcome.results is None
    assert isinstance(outcome.error, AllocationError), f"expected an AllocationError, got {outcome.error!r}"
    assert str(outcome.error).startswith(ABORTED_PREFIX), str(outcome.error)
    assert isinstance(outcome.error.__cause__, TimeoutError), (
        f"the error must wrap the deadline as its cause, got {outcome.error.__cause__!r}"
    )
