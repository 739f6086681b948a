"""The DRA structured allocator, ported from Kubernetes 1.36 (see ``allocator.py``).

Build one ``Allocator`` per cluster snapshot and ask it about nodes::

    allocator = Allocator(Features(), AllocatedState.from_claims(allocated, Features()), classes, slices)
    outcome = allocator.allocate(node, claims)
    if outcome.error:            # fatal input problem (FailedOnNodeError: only this node)
        ...
    elif outcome.results is None:  # does not fit; outcome.explanation says why
        print(outcome.explanation.message())

Modules: ``pools`` (slices per node, pool validity), ``search`` (request validation and the
backtracking search), ``constraints``, ``capacity`` (consumable capacity), ``results``
(AllocationResult assembly), ``explain`` (why a claim does not fit), ``nodes`` (node selectors).
"""

from policies.allocator.allocator import AllocationOutcome, Allocator
from policies.allocator.budget import SearchBudget
from policies.allocator.errors import AllocationError, FailedOnNodeError, SearchAbortedError
from policies.allocator.explain import (
    ConstraintRejection,
    Explanation,
    PoolProblem,
    RequestExplanation,
    SelectorRejection,
)
from policies.allocator.features import Features
from policies.allocator.state import AllocatedState, DeviceID
from policies.allocator.taints import blocks_allocation, device_taints, tolerates

__all__ = [
    "AllocatedState",
    "AllocationError",
    "AllocationOutcome",
    "Allocator",
    "ConstraintRejection",
    "DeviceID",
    "Explanation",
    "FailedOnNodeError",
    "Features",
    "PoolProblem",
    "RequestExplanation",
    "SearchAbortedError",
    "SearchBudget",
    "SelectorRejection",
    "blocks_allocation",
    "device_taints",
    "tolerates",
]
