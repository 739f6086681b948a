"""Errors the allocator reports instead of a result.

Upstream ``Allocate`` returns an error for fatal input problems (unknown class, CEL error, a
feature used while disabled, ...): the scheduler then stops trying the pod everywhere. One error
is special, ``ErrFailedAllocationOnNode`` (``structured/allocator.go``): it only rejects the node
("invalid resource pools were encountered"), other nodes may still work.
"""

from __future__ import annotations


class AllocationError(Exception):
    """A fatal problem with the input; the message uses upstream's wording."""

    @property
    def message(self) -> str:
        return str(self)


class FailedOnNodeError(AllocationError):
    """Allocation failed on this node only (upstream wraps ErrFailedAllocationOnNode)."""


class SearchAbortedError(AllocationError):
    """The search ran out of its budget (effort or deadline), like a cancelled scheduler Filter."""
