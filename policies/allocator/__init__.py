"""The DRA structured allocator, ported from Kubernetes 1.36 (see ``allocator.py``)."""

from policies.allocator.allocator import AllocationOutcome, Allocator
from policies.allocator.budget import SearchBudget
from policies.allocator.errors import AllocationError, FailedOnNodeError, SearchAbortedError
from policies.allocator.explain import ConstraintRejection, Explanation, PoolProblem, RequestExplanation
from policies.allocator.features import Features
from policies.allocator.state import AllocatedState, DeviceID

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
]
