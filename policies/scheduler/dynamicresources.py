"""DynamicResources: the pod's claims (and its DRA-backed extended resources) get devices on the node.

Upstream ``pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go`` and
``extendeddynamicresources.go``:

* PreFilter finds the claims (a missing one is the caller's input problem here, see
  :mod:`policies.scheduler.claims`), refuses the pod when a request's DeviceClass does not exist,
  or when a request has alternatives and DRAPrioritizedList is off; it adds the implicit claim for
  extended resources that a DeviceClass backs. An allocated claim already reserved by 256 other
  consumers passes every filter in 1.36: PreBind's update then fails at the API server
  (:meth:`DynamicResources.binding_error`).
* Filter checks each allocated claim's node selector, then asks the allocator for the rest. An
  allocator error other than "this node only" is an Error status: it aborts the whole scheduling
  attempt, on every node; so does a search that runs out of time (draguard: out of its budget),
  ``node N: timed out trying to allocate devices`` since 1.36. An allocated claim unusable on the
  node is remembered for PostFilter.
* PostFilter, when no node fits: deallocates one remembered claim that no other pod reserves
  (the next attempt allocates it afresh), or says why not.
* Score (weight 2): for each request with alternatives, ``8 - index`` of the alternative chosen.

The allocator is searched only on nodes every earlier filter let through. draguard adds what
upstream does not say: why the allocator refused (``detail``, ``explanation``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from policies.allocator import Allocator, FailedOnNodeError, SearchAbortedError
from policies.allocator.nodes import NodeSelectorError, selector_matches
from policies.api.core import Pod
from policies.api.resource import AllocationResult, DeviceRequest, ResourceClaim
from policies.scheduler import extended
from policies.scheduler.claims import (
    RESERVED_FOR_MAX,
    can_be_reserved,
    is_allocated,
    is_reserved_for,
    pod_claims,
)
from policies.scheduler.cluster import NodeInfo
from policies.scheduler.framework import Code, Cycle, Prepared, Status, unschedulable
from policies.scheduler.resources import is_dra_extended
from policies.snapshot import Snapshot

NAME = "DynamicResources"
CANNOT_ALLOCATE = "cannot allocate all claims"
NOT_AVAILABLE = "resourceclaim not available on the node"
TIMED_OUT = "timed out trying to allocate devices"
CANNOT_SCHEDULE_EXTENDED = "cannot schedule extended resource claim"
CANNOT_FIT_RESOURCE = "cannot fit resource"
FIRST_AVAILABLE_MAX = 8  # upstream FirstAvailableDeviceRequestMaxSize


Planned = AllocationResult | ResourceClaim | None
"""Per claim on a node: its allocation, the claim to allocate, or None (nothing to allocate)."""


def _filled(plan: list[Planned], fresh: list[AllocationResult]) -> tuple[AllocationResult | None, ...]:
    new = iter(fresh)
    return tuple(next(new) if isinstance(c, ResourceClaim) else c for c in plan)


def _error(message: str) -> Status:
    return Status(Code.ERROR, (message,), NAME, error=message)


def _class_problem(claim: ResourceClaim, request: DeviceRequest, cycle: Cycle) -> Status | None:
    """upstream PreFilter's request and DeviceClass checks for one request of an unallocated claim."""
    classes = cycle.cluster.snapshot.classes

    def check(class_name: str, request_name: str) -> Status | None:
        if not class_name:
            return _error(f"request {request_name}: unsupported request type")
        if class_name not in classes:
            return unschedulable(
                NAME, f"request {request_name}: device class {class_name} does not exist", unresolvable=True
            )
        return None

    if request.exactly is not None:
        return check(request.exactly.device_class_name, request.name)
    if request.first_available:
        if not cycle.gates.enabled("DRAPrioritizedList"):
            return unschedulable(
                NAME,
                f"resource claim {claim.key}, request {request.name}: has subrequests, "
                "but the DRAPrioritizedList feature is disabled",
                unresolvable=True,
            )
        for sub in request.first_available:
            if problem := check(sub.device_class_name, f"{request.name}/{sub.name}"):
                return problem
        return None
    return unschedulable(
        NAME, f"resource claim {claim.key}, request {request.name}: unknown request type", unresolvable=True
    )


@dataclass
class DynamicResources:
    """The plugin for one scheduling attempt (upstream keeps this in the cycle state).

    ``allocator``: a fork of the snapshot's allocator, for this attempt only. ``claims``: the
    claims to ask about instead of the pod's (a question about claims without a pod).
    ``begin_node``: called before each node's search, so a per-node search deadline restarts.
    ``lazy_results``: Filter only learns whether the devices fit, and :meth:`results` assembles
    a node's AllocationResults when asked (an answer that lists a few nodes of many); the scoring
    needs them all when a claim has alternatives, so they are built then anyway.
    """

    snapshot: Snapshot
    allocator: Allocator
    claims_override: Sequence[ResourceClaim] | None = None
    begin_node: Callable[[], None] = lambda: None
    lazy_results: bool = False
    claims: list[ResourceClaim] = field(default_factory=list)
    _results: dict[str, tuple[AllocationResult | None, ...]] = field(default_factory=dict)
    _plans: dict[str, tuple[NodeInfo, list[Planned]]] = field(default_factory=dict)
    _plan: list[Planned] = field(default_factory=list)
    _allocated: list[int] = field(default_factory=list)
    unavailable: set[int] = field(default_factory=set)
    extended_index: int | None = None
    prepared: bool = False
    NAME: str = NAME

    def pre_filter(self, cycle: Cycle) -> Prepared | Status | None:
        pod = cycle.pod
        self.claims = (
            list(self.claims_override) if self.claims_override is not None else pod_claims(self.snapshot, pod)
        )
        resources = self._extended_resources(cycle)
        if resources:
            found = extended.existing_claim(pod, self.snapshot.all_claims)
            self.extended_index = len(self.claims)
            self.claims.append(found if found is not None else extended.implicit_claim(pod, []))
        if not self.claims:
            return None
        for claim in self.claims:
            if is_allocated(claim):
                continue
            if self._is_implicit(claim):
                continue
            for request in claim.spec.devices.requests or ():
                if problem := _class_problem(claim, request, cycle):
                    return problem
        self.prepared = True
        self.lazy_results = self.lazy_results and not self.has_alternatives()
        # What does not depend on the node, once per attempt: per claim its allocation or the claim
        # to allocate (the implicit claim's entry is the node's, see _filter), and which are allocated.
        self._plan = [c.status.allocation if c.status and c.status.allocation else c for c in self.claims]
        self._allocated = [i for i, c in enumerate(self.claims) if is_allocated(c)]
        return Prepared(lambda node: self._filter(cycle, resources, node))

    def _is_implicit(self, claim: ResourceClaim) -> bool:
        return self.extended_index is not None and claim is self.claims[self.extended_index]

    def _extended_resources(self, cycle: Cycle) -> dict[str, int]:
        """The pod's DRA-backed extended resources and amounts (empty: none, or the gate is off)."""
        if not cycle.gates.enabled("DRAExtendedResource") or self.claims_override is not None:
            return {}
        wanted = cycle.info.requests.scalars
        resolver = cycle.cluster.resolver
        if not any(v and is_dra_extended(n) and resolver.backs(n) for n, v in wanted.items()):
            return {}
        return {n: v for n, v in wanted.items() if v and is_dra_extended(n)}

    def _node_extended_claim(
        self, cycle: Cycle, resources: dict[str, int], node: NodeInfo
    ) -> ResourceClaim | Status | None:
        """upstream filterExtendedResources: the implicit claim for this node, None when the node's
        device plugins cover everything (and the pod has no other claim), or a refusal."""
        if self.extended_index is None:
            return None
        current = self.claims[self.extended_index]
        if current.spec.devices.requests:
            return unschedulable(NAME, CANNOT_SCHEDULE_EXTENDED, unresolvable=True)
        allocatable = node.allocatable.scalars if node.allocatable is not None else {}
        resolver = cycle.cluster.resolver
        through_dra = []
        for name in resources:
            if resolver.backs(name) and not allocatable.get(name):
                through_dra.append(name)
            elif name not in allocatable:
                return unschedulable(NAME, CANNOT_FIT_RESOURCE, unresolvable=True)
        if not through_dra or is_allocated(current):
            return None
        return extended.implicit_claim(cycle.pod, extended.claim_requests(cycle.pod, through_dra, resolver))

    def _filter(self, cycle: Cycle, resources: dict[str, int], node: NodeInfo) -> Status | None:
        # Per claim: its allocation, the claim to allocate, or None (the implicit claim, when the
        # node's device plugins cover the extended resources).
        plan = self._plan
        extended_index = self.extended_index
        if extended_index is not None:
            node_claim = self._node_extended_claim(cycle, resources, node)
            if isinstance(node_claim, Status):
                return node_claim
            plan = [*plan[:extended_index], node_claim, *plan[extended_index + 1 :]]
        to_allocate = [c for c in plan if isinstance(c, ResourceClaim)]
        unavailable = [i for i in self._allocated if not self._usable_on(self.claims[i], node)]
        fresh: list[AllocationResult] = []
        if to_allocate:
            refused = self._allocate(node, to_allocate, fresh, not self.lazy_results)
            if refused is not None:
                return refused
        if unavailable:
            self.unavailable.update(unavailable)
            return unschedulable(NAME, NOT_AVAILABLE, unresolvable=True)
        if self.lazy_results and to_allocate:
            self._plans[node.name] = (node, plan)
        else:
            self._results[node.name] = _filled(plan, fresh)
        return None

    def results(self, node: str) -> tuple[AllocationResult | None, ...]:
        """The node's results, one per claim (the node fitted)."""
        found = self._results.get(node)
        if found is None and node not in self._plans:
            return (None,) * len(self.claims)  # the pod has nothing for this plugin
        if found is None:
            info, plan = self._plans[node]
            fresh: list[AllocationResult] = []
            self._allocate(info, [c for c in plan if isinstance(c, ResourceClaim)], fresh, True)
            found = self._results[node] = _filled(plan, fresh)
        return found

    def _allocate(
        self, node: NodeInfo, claims: list[ResourceClaim], into: list[AllocationResult], build: bool
    ) -> Status | None:
        """The allocator's answer for ``claims`` on the node: results appended to ``into`` (when
        ``build``), or why not."""
        self.begin_node()
        outcome = self.allocator.allocate(node.node, claims, quick_reject=True, build_results=build)
        if outcome.results is not None:  # fits (an error never comes with results)
            into += outcome.results
            return None
        unresolvable = Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        error = str(outcome.error) if outcome.error is not None else None
        explanation = outcome.explanation
        if isinstance(outcome.error, SearchAbortedError):
            # An Error since 1.36 (a timeout may be transient): it aborts the attempt on every node.
            timed_out = f"node {node.name}: {TIMED_OUT}"
            return Status(Code.ERROR, (timed_out,), NAME, error=error, explanation=explanation)
        if isinstance(outcome.error, FailedOnNodeError):
            return Status(unresolvable, (str(outcome.error),), NAME, error=error, explanation=explanation)
        if error is not None:
            return _error(error)
        return Status(unresolvable, (CANNOT_ALLOCATE,), NAME, explanation=explanation)

    @staticmethod
    def _usable_on(claim: ResourceClaim, node: NodeInfo) -> bool:
        assert claim.status is not None and claim.status.allocation is not None
        selector = claim.status.allocation.node_selector
        if selector is None:
            return True
        try:
            return selector_matches(selector, node.name, node.labels)
        except NodeSelectorError:
            return False

    def post_filter(self, pod: Pod) -> tuple[str, ResourceClaim | None]:
        """upstream PostFilter: its message, and the claim it deallocates (None: none). A PreFilter
        that skipped or refused the pod leaves upstream's cycle state without claims."""
        if not self.prepared:
            return "no new claims to deallocate", None
        for index in sorted(self.unavailable):
            claim = self.claims[index]
            if index == self.extended_index:
                continue
            reserved = (claim.status.reserved_for or []) if claim.status else []
            if not reserved or (len(reserved) == 1 and reserved[0].uid == (pod.metadata.uid or None)):
                return "deallocation of ResourceClaim completed", claim
        if (
            self.extended_index is not None
            and self.claims[self.extended_index].name != extended.IN_MEMORY_NAME
        ):
            return "deletion of ResourceClaim completed", self.claims[self.extended_index]
        return "still not schedulable", None

    def binding_error(self, pod: Pod) -> str | None:
        """The SchedulerError of PreBind when it adds the pod to an allocated claim that already has
        the most consumers the API allows (upstream PreBind's update, refused by the API server's
        validation), or None."""
        for claim in self.claims:
            if is_allocated(claim) and not can_be_reserved(claim) and not is_reserved_for(claim, pod):
                assert claim.status is not None
                count = len(claim.status.reserved_for or ()) + 1
                return (
                    f'running PreBind plugin "{NAME}": add reservation to claim {claim.key}: '
                    f'ResourceClaim.resource.k8s.io "{claim.name}" is invalid: status.reservedFor: Too many: '
                    f"{count}: must have at most {RESERVED_FOR_MAX} items"
                )
        return None

    def has_alternatives(self) -> bool:
        """Whether a claim has a request with alternatives (firstAvailable): only those score."""
        return any(r.first_available for c in self.claims for r in c.spec.devices.requests or ())

    def score(self, node: str) -> int:
        """upstream computeScore: prefer nodes where earlier alternatives of firstAvailable were chosen."""
        total = 0
        for claim, result in zip(self.claims, self.results(node), strict=True):
            devices = result.devices if result is not None else None
            chosen = {r.request for r in (devices.results or ())} if devices is not None else set()
            for request in claim.spec.devices.requests or ():
                for i, sub in enumerate(request.first_available or ()):
                    if f"{request.name}/{sub.name}" in chosen:
                        total += FIRST_AVAILABLE_MAX - i
        return total
