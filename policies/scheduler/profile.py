"""kube-scheduler 1.36's default profile, run the way the scheduler runs it, for one pod.

Upstream ``pkg/scheduler/schedule_one.go`` (``findNodesThatFitPod``, ``prioritizeNodes``),
``pkg/scheduler/framework/runtime/framework.go`` (``RunPreFilterPlugins``, ``RunFilterPlugins``,
``RunPostFilterPlugins``, ``RunScorePlugins``), ``pkg/scheduler/framework/types.go``
(``FitError``). The filters run in the order of ``kube-scheduler --write-config-to`` for
1.36: NodeUnschedulable, NodeName, TaintToleration, NodeAffinity, NodePorts, NodeResourcesFit,
(the volume plugins), PodTopologySpread, InterPodAffinity, DynamicResources, (NodeDeclaredFeatures).
A node gets the first refusal; a plugin whose PreFilter refuses makes every node refused with its
message; an Error status anywhere aborts the attempt. The DRA filter runs last, so the allocator
searches only nodes that every other filter let through.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from types import MappingProxyType
from typing import Protocol

from policies.api.resource import AllocationResult
from policies.scheduler import (
    imagelocality,
    interpodaffinity,
    nodeaffinity,
    nodename,
    nodeports,
    noderesources,
    nodeunschedulable,
    podtopologyspread,
    tainttoleration,
)
from policies.scheduler.cluster import NodeInfo
from policies.scheduler.dynamicresources import DynamicResources
from policies.scheduler.framework import (
    NODE,
    Code,
    Cycle,
    PreFilterOutcome,
    Prepared,
    ScorePart,
    Status,
    by_highest,
    by_highest_reversed,
    zeros,
)

# The plugins of the default profile that draguard does not run, and why (said once per answer).
NOT_CHECKED = {
    "VolumeRestrictions, NodeVolumeLimits, VolumeBinding, VolumeZone": "volumes (draguard does not read "
    "PersistentVolumeClaims, PersistentVolumes, StorageClasses or CSINodes)",
    "NodeDeclaredFeatures": "node-declared features (status.declaredFeatures)",
}


class FilterPlugin(Protocol):
    """A filter plugin: ``NAME`` and its PreFilter (see :mod:`policies.scheduler.framework`)."""

    @property
    def NAME(self) -> str: ...

    def pre_filter(self, cycle: Cycle) -> PreFilterOutcome: ...


def default_filters(dra: DynamicResources) -> list[FilterPlugin]:
    """The default profile's filter plugins in upstream's order, DynamicResources last."""
    return [
        nodeunschedulable,
        nodename,
        tainttoleration,
        nodeaffinity,
        nodeports,
        noderesources,
        podtopologyspread,
        interpodaffinity,
        dra,
    ]


@dataclass(frozen=True)
class Verdict:
    """One node's answer: ``status`` None when it fits; the DRA results (one per claim) when it does."""

    node: str
    status: Status | None = None
    results: tuple[AllocationResult | None, ...] = ()

    @property
    def fits(self) -> bool:
        return self.status is None


@dataclass
class Attempt:
    """One scheduling attempt of one pod over the nodes asked."""

    verdicts: list[Verdict] = field(default_factory=list)
    asked: int = 0
    prefilter: Status | None = None
    error: tuple[str, Status] | None = None
    binding_error: str | None = None
    unchecked_resources: list[str] = field(default_factory=list)
    prepared: list[tuple[str, Prepared]] = field(default_factory=list)
    order: list[str] = field(default_factory=list)

    @cached_property
    def fitting(self) -> list[Verdict]:
        """The nodes that fit (none when the attempt was aborted, or its binding fails); read once
        it is complete and its binding judged."""
        return (
            [v for v in self.verdicts if v.fits] if self.error is None and self.binding_error is None else []
        )

    @property
    def complete(self) -> bool:
        return len(self.verdicts) == self.asked


class Pace(Protocol):
    """The shell's clock, per node and per attempt (policies/ has none of its own)."""

    def begin_node(self) -> None: ...

    def over(self) -> bool: ...


class Unpaced:
    """No deadlines: every node is asked."""

    def begin_node(self) -> None:
        pass

    def over(self) -> bool:
        return False


def _restriction(prepared: Sequence[tuple[str, Prepared]]) -> tuple[frozenset[str] | None, str]:
    """The intersection of the PreFilter results that name nodes, and the plugins that named them."""
    names: frozenset[str] | None = None
    plugins = []
    for plugin, p in prepared:
        if p.node_names is not None:
            names = p.node_names if names is None else names & p.node_names
            plugins.append(plugin)
    return names, " ".join(sorted(plugins))


def run(cycle: Cycle, plugins: Sequence[FilterPlugin], nodes: Sequence[NodeInfo], pace: Pace) -> Attempt:
    """PreFilter every plugin, then Filter every node in order (upstream RunFilterPlugins: the first
    refusal is the node's answer). ``nodes``: the nodes asked (all of them, unless the caller
    picked some). ``pace.over()`` stops early: the attempt is then incomplete."""
    attempt = Attempt(asked=len(nodes), order=[p.NAME for p in plugins])
    prepared = attempt.prepared
    for plugin in plugins:
        outcome = plugin.pre_filter(cycle)
        if isinstance(outcome, Status):
            return _refused_before_filters(attempt, nodes, replace(outcome, plugin=plugin.NAME))
        if outcome is not None:
            prepared.append((plugin.NAME, outcome))
    restricted, by = _restriction(prepared)
    if restricted is not None and not restricted:
        conflict = f"node(s) didn't satisfy plugin(s) [{by}] simultaneously"
        return _refused_before_filters(
            attempt, nodes, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (conflict,))
        )
    outside = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (f"node(s) didn't satisfy plugin(s) [{by}]",))
    refilter = Refilter(cycle, attempt)
    for node in nodes:
        if pace.over():
            break
        if restricted is not None and node.name not in restricted:
            attempt.verdicts.append(Verdict(node.name, outside))
            continue
        if node.name in refilter.nominated:
            verdict = Verdict(node.name, refilter.status(node, changed=False))
        else:
            verdict = _filter(node, prepared)
        attempt.verdicts.append(verdict)
        if verdict.status is not None and verdict.status.is_error and attempt.error is None:
            attempt.error = (node.name, verdict.status)
        if node.allocatable is None:
            attempt.unchecked_resources.append(node.name)
    return attempt


def _refused_before_filters(attempt: Attempt, nodes: Sequence[NodeInfo], status: Status) -> Attempt:
    """A PreFilter refusal: every node gets it (upstream sets it as every node's status)."""
    attempt.prefilter = status
    attempt.verdicts = [Verdict(n.name, status) for n in nodes]
    if status.is_error:
        attempt.error = ("", status)
    return attempt


def _filter(node: NodeInfo, prepared: Sequence[tuple[str, Prepared]]) -> Verdict:
    for _, p in prepared:
        status = p.filter(node)
        if status is not None:
            return Verdict(node.name, status)
    return Verdict(node.name)


# The PreFilters that count the pods of other nodes: run again when a node's pods are not the
# cluster's (upstream runs their AddPod/RemovePod extensions); the others' results stand.
POD_COUNTING: Mapping[str, Callable[[Cycle], Prepared | None]] = MappingProxyType(
    {interpodaffinity.NAME: interpodaffinity.pre_filter, podtopologyspread.NAME: podtopologyspread.pre_filter}
)


class Refilter:
    """An attempt's filters, run again on a node whose pods changed (preemption's victims gone)
    and, as upstream RunFilterPluginsWithNominatedPods, with the pods nominated to the node that
    are at least as important as the pod: a node passes only if it passes with them and without."""

    def __init__(self, cycle: Cycle, attempt: Attempt) -> None:
        self.cycle = cycle
        self.prepared = dict(attempt.prepared)
        self.order = attempt.order
        self.nominated = cycle.cluster.nominated(cycle.pod)
        # Removing pods never gives a PreFilter that skipped something to count; a nominated pod
        # with required anti-affinity may give InterPodAffinity one.
        self.recounted = {name for name in POD_COUNTING if name in self.prepared}
        if any(p.has_required_anti_affinity for pods in self.nominated.values() for p in pods):
            self.recounted.add(interpodaffinity.NAME)

    def status(self, node: NodeInfo, changed: bool = True) -> Status | None:
        """The node's first refusal (None: the pod fits); ``changed``: its pods are not the cluster's."""
        added = self.nominated.get(node.name, ())
        if added:
            found = self._status(node.with_pods(added), True)
            if found is not None:
                return found
        return self._status(node, changed)

    def _status(self, node: NodeInfo, changed: bool) -> Status | None:
        recounted = self.recounted if changed else set()
        cycle = replace(self.cycle, cluster=self.cycle.cluster.with_node(node)) if recounted else None
        for name in self.order:
            recount = cycle is not None and name in recounted
            found = POD_COUNTING[name](cycle) if cycle is not None and recount else self.prepared.get(name)
            status = found.filter(node) if found is not None else None
            if status is not None:
                return status
        return None


# --- the scheduler's message ---------------------------------------------------------------------


def histogram(statuses: Iterable[Status]) -> str:
    """``N reason`` per reason, sorted as strings, joined (upstream FitError's histogram)."""
    counts = Counter(reason for s in statuses for reason in s.reasons)
    return ", ".join(sorted(f"{n} {reason}" for reason, n in counts.items()))


def fit_error(attempt: Attempt) -> str:
    """upstream FitError.Error() without its PostFilter part: ``0/N nodes are available: ...``."""
    head = f"0/{attempt.asked} nodes are available:"
    if attempt.prefilter is not None:
        return f"{head} {attempt.prefilter.message()}."
    return f"{head} {histogram(v.status for v in attempt.verdicts if v.status is not None)}."


# --- scoring -------------------------------------------------------------------------------------


def _per_node(score: Callable[[NodeInfo], int]) -> Callable[[Sequence[NodeInfo]], dict[str, int]]:
    return lambda nodes: {n.name: score(n) for n in nodes}


def _taints(cycle: Cycle, nodes: Sequence[NodeInfo]) -> dict[str, int]:
    """TaintToleration's raw scores; nodes without PreferNoSchedule taints score 0 unasked."""
    if not any(t.effect == tainttoleration.PREFER_NO_SCHEDULE for n in nodes for t in n.taints):
        return zeros(nodes)
    return {n.name: tainttoleration.score(cycle, n) for n in nodes}


def score_parts(cycle: Cycle, dra: DynamicResources) -> list[ScorePart]:
    """The default profile's score plugins for the pod (upstream RunScorePlugins). A plugin with
    nothing to tell the nodes apart (no preferred node affinity, no alternatives in the claims)
    scores every node 0 without asking each."""
    with_defaults, as_requested = noderesources.scoring_requests(cycle)
    prefers = nodeaffinity.prefers(cycle.pod)
    parts = [
        ScorePart(tainttoleration.NAME, 3, lambda nodes: _taints(cycle, nodes), by_highest_reversed),
        ScorePart(
            nodeaffinity.NAME,
            2,
            _per_node(lambda n: nodeaffinity.score(cycle, n)) if prefers else zeros,
            by_highest,
        ),
        ScorePart(
            noderesources.NAME,
            1,
            _per_node(lambda n: noderesources.least_allocated(with_defaults, n)),
            scope=NODE,
        ),
        podtopologyspread.score_part(cycle),
        imagelocality.score_part(cycle),
        interpodaffinity.score_part(cycle),
        ScorePart(
            dra.NAME,
            2,
            _per_node(lambda n: dra.score(n.name)) if dra.has_alternatives() else zeros,
            by_highest,
            NODE,
        ),
    ]
    if as_requested.milli_cpu or as_requested.memory:
        balanced = _per_node(lambda n: noderesources.balanced_allocation(as_requested, n))
        parts.append(ScorePart(noderesources.BALANCED, 1, balanced, scope=NODE))
    return parts


def scores(cycle: Cycle, dra: DynamicResources, fitting: Sequence[NodeInfo]) -> dict[str, dict[str, int]]:
    """Per fitting node, each scoring plugin's weighted score (upstream RunScorePlugins: normalized,
    times the plugin's weight in the default profile)."""
    names = [n.name for n in fitting]
    weighted: dict[str, dict[str, int]] = {}
    for part in score_parts(cycle, dra):
        weighted[part.plugin] = {n: part.weight * s for n, s in part.normalized(fitting).items()}
    return {n: {plugin: by_node[n] for plugin, by_node in weighted.items()} for n in names}
