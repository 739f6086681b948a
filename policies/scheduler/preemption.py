"""DefaultPreemption, the PostFilter that runs when a pod fits nowhere: which pods it would evict, or
why it cannot help (the ``preemption: ...`` part of the PodScheduled message).

Upstream ``pkg/scheduler/framework/plugins/defaultpreemption/default_preemption.go``
(``PodEligibleToPreemptOthers``, ``SelectVictimsOnNode``) and
``pkg/scheduler/framework/preemption/preemption.go`` (``Preempt``, ``findCandidates``,
``DryRunPreemption``, ``pickOneNodeForPreemption``):

* a pod with ``preemptionPolicy: Never`` is not eligible; nor is a pod nominated to a node where a
  pod it preempted is still terminating;
* only nodes refused with a resolvable status (Unschedulable, not UnschedulableAndUnresolvable)
  are tried; on each, the pods of lower priority are removed and the filters run again (the
  node's resources, ports, pod affinity and spreading see the removal; the DRA plugin has no
  PreFilter extensions, so devices of the removed pods stay allocated). A node without such pods
  says ``No preemption victims found for incoming pod``; one where the pod still does not fit gives
  the refusing filter's reasons;
* with no candidate, the message is a FitError over every node of the cluster, the nodes not
  tried counting as ``Preemption is not helpful for scheduling``;
* with candidates, the victims of each are minimised (the most important pods reprieved first:
  higher priority, then earlier start) and one node is nominated: the fewest and least important
  victims win; the scheduler then evicts them, and the attempt's message has no PostFilter part.

draguard reads no PodDisruptionBudgets (upstream prefers candidates that violate none), and where
the scheduler breaks ties at random (equal candidates, victims that started at the same time)
draguard takes the first in node order.
"""

from __future__ import annotations

from dataclasses import dataclass

from policies.api.core import PREEMPT_NEVER, Pod
from policies.scheduler.cluster import NodeInfo
from policies.scheduler.framework import Code, Cycle, Status
from policies.scheduler.podinfo import PodInfo
from policies.scheduler.profile import Attempt, Refilter, histogram

NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"
NEVER = "not eligible due to preemptionPolicy=Never."
TERMINATING = "not eligible due to a terminating pod on the nominated node."


def priority(pod: Pod) -> int:
    """upstream corev1helpers.PodPriority: the pod's priority as admission resolved it
    (:mod:`policies.priority`; every entry point resolves pods before scheduling them)."""
    return pod.spec.priority or 0


@dataclass(frozen=True)
class Preemption:
    """DefaultPreemption's outcome: ``message`` (``preemption: ...``) when it cannot help, or the
    node it nominates and the pods it would evict there."""

    message: str | None = None
    nominated: str | None = None
    victims: tuple[PodInfo, ...] = ()


@dataclass(frozen=True)
class Candidate:
    node: str
    victims: tuple[PodInfo, ...]

    def rank(self) -> tuple[int, int, int]:
        """pickOneNodeForPreemption's criteria after the PDB one, smallest best: the highest victim
        priority, the sum of the victims' priorities, their number."""
        priorities = [p.priority for p in self.victims]
        return max(priorities), sum(p + 2**31 for p in priorities), len(priorities)


def _ineligible(cycle: Cycle, statuses: dict[str, Status]) -> str | None:
    """upstream PodEligibleToPreemptOthers: why the pod may not preempt, or None."""
    pod = cycle.pod
    if pod.spec.preemption_policy == PREEMPT_NEVER:
        return NEVER
    nominated = pod.status.nominated_node_name if pod.status is not None else None
    if not nominated:
        return None
    status = statuses.get(nominated)
    if status is not None and status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
        return None
    node = cycle.cluster.by_name.get(nominated)
    pods = node.pods if node is not None else ()
    # upstream podTerminatingByPreemption: being deleted, with the scheduler's DisruptionTarget.
    if any(p.priority < priority(pod) and p.deleting and p.preempted for p in pods):
        return TERMINATING
    return None


def _victims(refilter: Refilter, node: NodeInfo, pod: Pod) -> tuple[PodInfo, ...] | Status:
    """upstream SelectVictimsOnNode without PDBs: the lower-priority pods the pod needs gone, or
    why the node does not help. The node changes as upstream's NodeInfo does, pod by pod (its host
    ports are a set: removing a pod frees its ports even where another pod holds them too)."""
    lower = [p for p in node.pods if p.priority < priority(pod)]
    if not lower:
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (NO_VICTIMS,))
    current = node.without_pods(lower)
    refused = refilter.status(current)
    if refused is not None:
        return refused
    victims = []
    # Most important first: higher priority, then earlier start (no start time: now).
    for candidate in sorted(lower, key=lambda p: (-p.priority, _start(p))):
        current = current.with_pod(candidate)
        if refilter.status(current) is not None:
            current = current.without_pods([candidate])
            victims.append(candidate)
    return tuple(victims)


def _start(pod: PodInfo) -> str:
    return pod.start_time or "9999"  # RFC 3339 times sort as strings; none counts as now, the latest


def preempt(cycle: Cycle, attempt: Attempt) -> Preemption:
    """DefaultPreemption's PostFilter for a pod the attempt refused everywhere."""
    statuses = {v.node: v.status for v in attempt.verdicts if v.status is not None}
    why = _ineligible(cycle, statuses)
    if why is not None:
        return Preemption(f"preemption: {why}")
    refilter = Refilter(cycle, attempt)
    tried: list[Status] = []
    candidates: list[Candidate] = []
    for name, status in statuses.items():
        if status.code != Code.UNSCHEDULABLE:
            continue
        found = _victims(refilter, cycle.cluster.by_name[name], cycle.pod)
        if isinstance(found, Status):
            tried.append(found)
        else:
            candidates.append(Candidate(name, found))
    if candidates:
        best = min(candidates, key=Candidate.rank)
        return Preemption(nominated=best.node, victims=best.victims)
    total = len(cycle.cluster.nodes)
    counted = [*tried, *[Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (NOT_HELPFUL,))] * (total - len(tried))]
    return Preemption(f"preemption: 0/{total} nodes are available: {histogram(counted)}.")
