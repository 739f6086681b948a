"""PodTopologySpread: the pod's ``DoNotSchedule`` spread constraints.

Upstream ``pkg/scheduler/framework/plugins/podtopologyspread/filtering.go`` and ``common.go``:
PreFilter counts, per constraint and topology value, the pods of the pod's namespace that the
constraint's selector matches (terminating pods left out), on every node that has all the
constraints' topology keys and passes the node inclusion policies (``nodeAffinityPolicy`` Honor
and ``nodeTaintsPolicy`` Ignore by default). A node fits when ``matching pods in its domain + (1
if the pod matches itself) - the global minimum <= maxSkew``; the minimum is 0 while fewer than
``minDomains`` domains exist. A node without a constraint's topology key is refused outright.

The cluster-level default constraints apply only to pods that Services or controllers select,
which draguard does not read; they are ``ScheduleAnyway`` (scoring only) in any case.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from policies.api.core import Pod, TopologySpreadConstraint
from policies.scheduler.cluster import NodeInfo
from policies.scheduler.framework import (
    FITTING,
    MAX_NODE_SCORE,
    STATIC,
    Cycle,
    Prepared,
    ScorePart,
    Status,
    unschedulable,
)
from policies.scheduler.labels import Selector, label_keys, selector
from policies.scheduler.nodeaffinity import RequiredAffinity
from policies.scheduler.tainttoleration import GATE, first_untolerated

NAME = "PodTopologySpread"
REASON = "node(s) didn't match pod topology spread constraints"
REASON_MISSING_LABEL = REASON + " (missing required label)"
REFUSED = unschedulable(NAME, REASON)
MISSING_LABEL = unschedulable(NAME, REASON_MISSING_LABEL, unresolvable=True)


@dataclass(frozen=True)
class Constraint:
    max_skew: int
    topology_key: str
    selector: Selector
    min_domains: int
    honor_affinity: bool
    honor_taints: bool

    @classmethod
    def of(cls, raw: TopologySpreadConstraint, pod: Pod, match_label_keys: bool) -> Constraint:
        labels = pod.metadata.labels or {}
        chosen = selector(raw.label_selector)
        if match_label_keys:
            chosen = chosen.plus(label_keys(labels, raw.match_label_keys, "In"))
        return cls(
            raw.max_skew,
            raw.topology_key,
            chosen,
            raw.min_domains if raw.min_domains is not None else 1,
            (raw.node_affinity_policy or "Honor") == "Honor",
            (raw.node_taints_policy or "Ignore") == "Honor",
        )

    def includes(self, pod: Pod, required: RequiredAffinity, node: NodeInfo, comparisons: bool) -> bool:
        """upstream matchNodeInclusionPolicies (``comparisons``: the toleration operators' gate)."""
        if self.honor_affinity and not required.matches(node):
            return False
        tolerations = pod.spec.tolerations or ()
        return not (
            self.honor_taints and first_untolerated(node.taints, tolerations, comparisons) is not None
        )


def constraints(pod: Pod, match_label_keys: bool, when: str = "DoNotSchedule") -> list[Constraint]:
    """The pod's constraints with ``whenUnsatisfiable: when`` (filtering: DoNotSchedule, scoring:
    ScheduleAnyway)."""
    return [
        Constraint.of(c, pod, match_label_keys)
        for c in pod.spec.topology_spread_constraints or ()
        if c.when_unsatisfiable == when
    ]


class _Counter:
    """Per node, its pods of ``namespace`` that ``chosen`` matches, terminating pods left out
    (upstream countPodsMatchSelector). The node's pods are read by labels (``NodePods.by_namespace``),
    and each labels mapping is matched once per pod judged: the pods of a template share one."""

    def __init__(self, chosen: Selector, namespace: str) -> None:
        self.chosen = chosen
        self.namespace = namespace
        self.matched: dict[int, bool] = {}

    def __call__(self, node: NodeInfo) -> int:
        found = 0
        for group in node.load.by_namespace.get(self.namespace, ()):
            if group.live and self._matches(group.labels):
                found += group.live
        return found

    def _matches(self, labels: Mapping[str, str]) -> bool:
        # Keyed by identity: the labels mappings are the snapshot's, alive while the pod is judged.
        matched = self.matched.get(id(labels))
        if matched is None:
            matched = self.matched[id(labels)] = self.chosen.matches(labels)
        return matched


def pre_filter(cycle: Cycle) -> Prepared | None:
    pod = cycle.pod
    chosen = constraints(pod, cycle.gates.enabled("MatchLabelKeysInPodTopologySpread"))
    if not chosen:
        return None
    counts: list[dict[str, int]] = [{} for _ in chosen]
    required = RequiredAffinity.of(pod)
    comparisons = cycle.gates.enabled(GATE)
    counters = [_Counter(c.selector, pod.namespace) for c in chosen]
    for node in cycle.cluster.nodes:
        if any(c.topology_key not in node.labels for c in chosen):
            continue
        for i, c in enumerate(chosen):
            if c.includes(pod, required, node, comparisons):
                value = node.labels[c.topology_key]
                counts[i][value] = counts[i].get(value, 0) + counters[i](node)
    minimum = [
        0 if len(by_value) < c.min_domains else min(by_value.values(), default=2**31 - 1)
        for c, by_value in zip(chosen, counts, strict=True)
    ]
    own_labels = pod.metadata.labels or {}
    itself = [1 if c.selector.matches(own_labels) else 0 for c in chosen]  # the pod counts itself

    def check(node: NodeInfo) -> Status | None:
        for i, c in enumerate(chosen):
            value = node.labels.get(c.topology_key)
            if value is None:
                return MISSING_LABEL
            if counts[i].get(value, 0) + itself[i] - minimum[i] > c.max_skew:
                return REFUSED
        return None

    return Prepared(check)


# --- scoring (upstream scoring.go) ---------------------------------------------------------------------

HOSTNAME = "kubernetes.io/hostname"


def score_part(cycle: Cycle) -> ScorePart:
    """Weight 2, the scores of :func:`score`; with ScheduleAnyway constraints a node's depends on the
    pods of every fitting node."""
    soft = constraints(cycle.pod, cycle.gates.enabled("MatchLabelKeysInPodTopologySpread"), "ScheduleAnyway")
    return ScorePart(NAME, 2, lambda fitting: score(cycle, fitting), scope=FITTING if soft else STATIC)


def score(cycle: Cycle, fitting: Sequence[NodeInfo]) -> dict[str, int]:
    """upstream PreScore, Score and NormalizeScore for the pod's ScheduleAnyway constraints: a node
    scores, per constraint, the matching pods of its domain (of its own pods for the hostname key)
    times ln(domains among the fitting nodes + 2), plus maxSkew - 1; the fewer the better, scaled
    to 0..100; a fitting node without every topology key scores 0. Every node 0 without such
    constraints (the plugin skips; the cluster's default constraints need the Services and
    controllers selecting the pod, which draguard does not read)."""
    pod = cycle.pod
    soft = constraints(pod, cycle.gates.enabled("MatchLabelKeysInPodTopologySpread"), "ScheduleAnyway")
    names = [n.name for n in fitting]
    if not soft:
        return dict.fromkeys(names, 0)
    keys = [c.topology_key for c in soft]
    scored = [n for n in fitting if all(k in n.labels for k in keys)]
    counts: list[dict[str, int]] = [{} for _ in soft]
    for i, c in enumerate(soft):
        if c.topology_key != HOSTNAME:
            counts[i] = dict.fromkeys({n.labels[c.topology_key] for n in scored}, 0)
    weights = [
        math.log((len(scored) if c.topology_key == HOSTNAME else len(counts[i])) + 2)
        for i, c in enumerate(soft)
    ]
    required = RequiredAffinity.of(pod)
    comparisons = cycle.gates.enabled(GATE)
    counters = [_Counter(c.selector, pod.namespace) for c in soft]
    for node in cycle.cluster.nodes:
        if not all(k in node.labels for k in keys):
            continue
        for i, c in enumerate(soft):
            value = node.labels[c.topology_key]
            if value in counts[i] and c.includes(pod, required, node, comparisons):
                counts[i][value] += counters[i](node)
    raw: dict[str, int] = {}
    for node in scored:
        total = 0.0
        for i, c in enumerate(soft):
            if c.topology_key == HOSTNAME:
                found = counters[i](node)
            else:
                found = counts[i][node.labels[c.topology_key]]
            total += found * weights[i] + (c.max_skew - 1)
        raw[node.name] = math.floor(total + 0.5)  # Go math.Round (never negative here)
    low, high = min(raw.values(), default=0), max(raw.values(), default=0)
    return {
        name: 0
        if name not in raw
        else MAX_NODE_SCORE
        if high == 0
        else MAX_NODE_SCORE * (high + low - raw[name]) // high
        for name in names
    }
