"""NodeResourcesFit and NodeResourcesBalancedAllocation: requests against allocatable, and scoring.

Upstream ``pkg/scheduler/framework/plugins/noderesources/fit.go`` (``fitsRequest``: the pod count,
then cpu, memory, ephemeral-storage and every scalar resource the pod requests against what the
node's allocatable leaves after its pods; every shortfall is one reason), ``least_allocated.go``,
``balanced_allocation.go`` and ``resource_allocation.go`` (default profile: cpu and memory, weight
1 each). With DRAExtendedResource, an extended resource a DeviceClass backs and that the node does
not offer through a device plugin is left to the DynamicResources plugin.

A Node manifest without ``status.allocatable`` (written by hand) cannot be judged: the node passes
and the answer says NodeResourcesFit was not checked there.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from policies.scheduler.cluster import NodeInfo
from policies.scheduler.framework import MAX_NODE_SCORE, Cycle, Prepared, Status, unschedulable
from policies.scheduler.resources import Resource, non_zero_requests
from policies.scheduler.resources import requests as requests  # what the filter fits, by its name here

NAME = "NodeResourcesFit"
BALANCED = "NodeResourcesBalancedAllocation"
TOO_MANY_PODS = "Too many pods"


def insufficient(want: Resource, node: NodeInfo, backed_by_dra: Callable[[str], bool]) -> Status | None:
    """upstream fitsRequest: one reason per shortfall, in its order; unresolvable (preemption cannot
    help) when the pod asks for more than the node has at all. None when the node fits, or when
    its allocatable is unknown."""
    allocatable = node.allocatable
    if allocatable is None:
        return None
    reasons = []
    unresolvable = False
    if len(node.pods) + 1 > allocatable.allowed_pods:
        reasons.append(TOO_MANY_PODS)
    used = node.requested
    wants = (
        []
        if want.is_zero()
        else [
            ("cpu", want.milli_cpu, allocatable.milli_cpu, used.milli_cpu),
            ("memory", want.memory, allocatable.memory, used.memory),
            (
                "ephemeral-storage",
                want.ephemeral_storage,
                allocatable.ephemeral_storage,
                used.ephemeral_storage,
            ),
            *(
                (name, wanted, allocatable.scalars.get(name, 0), used.scalars.get(name, 0))
                for name, wanted in want.scalars.items()
                if not (allocatable.scalars.get(name, 0) == 0 and backed_by_dra(name))
            ),
        ]
    )
    for name, wanted, have, taken in wants:
        if wanted > 0 and wanted > have - taken:
            reasons.append(f"Insufficient {name}")
            unresolvable = unresolvable or wanted > have
    return unschedulable(NAME, *reasons, unresolvable=unresolvable) if reasons else None


def pre_filter(cycle: Cycle) -> Prepared:
    want = cycle.info.requests  # requests(pod), computed once with the pod's record
    backed = cycle.cluster.resolver.backs if cycle.gates.enabled("DRAExtendedResource") else (lambda _: False)

    def check(node: NodeInfo) -> Status | None:
        return insufficient(want, node, backed)

    return Prepared(check)


# --- scoring ----------------------------------------------------------------------------------------


def _fractions(requested: Sequence[int], allocatable: Sequence[int]) -> list[tuple[int, int]]:
    return [(r, a) for r, a in zip(requested, allocatable, strict=True) if a]


def least_allocated(pod_wants: Resource, node: NodeInfo) -> int:
    """upstream leastResourceScorer over cpu and memory with the non-zero requests."""
    allocatable = node.allocatable
    if allocatable is None:
        return 0
    used = node.non_zero_requested
    pairs = _fractions(
        (used.milli_cpu + pod_wants.milli_cpu, used.memory + pod_wants.memory),
        (allocatable.milli_cpu, allocatable.memory),
    )
    if not pairs:
        return 0
    return sum(0 if r > a else (a - r) * MAX_NODE_SCORE // a for r, a in pairs) // len(pairs)


def balanced_allocation(pod_wants: Resource, node: NodeInfo) -> int:
    """upstream 1.36 balancedResourceScorer: how much the pod improves the node's balance, mapped
    onto 0..100 around 50 (``50 + (50 + balance with the pod - balance without it) / 2``, Go's
    division toward zero), each balance being 100 * (1 - the spread of the cpu and memory
    fractions). Checked against the scores a 1.36.2 kube-scheduler logs at -v=10."""
    allocatable = node.allocatable
    if allocatable is None:
        return 0
    used = node.requested
    without = _balance((used.milli_cpu, used.memory), allocatable)
    with_pod = _balance((used.milli_cpu + pod_wants.milli_cpu, used.memory + pod_wants.memory), allocatable)
    return MAX_NODE_SCORE // 2 + int((MAX_NODE_SCORE // 2 + with_pod - without) / 2)


def _balance(requested: tuple[int, int], allocatable: Resource) -> int:
    """upstream balancedResourceScore: 100 * (1 - the standard deviation of the fractions)."""
    fractions = [
        min(r / a, 1.0) for r, a in _fractions(requested, (allocatable.milli_cpu, allocatable.memory))
    ]
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        mean = sum(fractions) / len(fractions)
        std = math.sqrt(sum((f - mean) ** 2 for f in fractions) / len(fractions))
    else:
        std = 0.0
    return int((1 - std) * MAX_NODE_SCORE)


def scoring_requests(cycle: Cycle) -> tuple[Resource, Resource]:
    """What the pod adds when nodes are scored: with the defaults (least allocated) and as
    requested (balanced allocation, skipped for a pod that requests neither cpu nor memory).
    Least allocated counts the containers only: 1.36's NodeResourcesFit builds its scorer without
    the PodLevelResources switch (fit.go ``NewFit``, ``nodeResourceStrategyTypeMap``), so a
    pod-level request is not seen there (a 1.36.2 kube-scheduler scores so)."""
    pod, info = cycle.pod, cycle.info
    if not pod.spec.resources:  # the pod's record has both (a headroom's copies share one)
        return info.non_zero_requests, info.requests
    containers_only = pod.model_copy(update={"spec": pod.spec.model_copy(update={"resources": None})})
    return non_zero_requests(containers_only), info.requests
