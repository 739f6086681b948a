"""NodeAffinity: ``spec.nodeSelector`` and the required node affinity, ``matchFields`` included.

Upstream ``pkg/scheduler/framework/plugins/nodeaffinity/node_affinity.go`` and
``k8s.io/component-helpers/scheduling/corev1/nodeaffinity`` (``GetRequiredNodeAffinity``: every
nodeSelector label, and then one of the terms, a term that does not parse being skipped).
PreFilter narrows the nodes to those a ``metadata.name In`` field term names, as upstream's
``PreFilterResult`` does; the other nodes are then not filtered at all. Scoring: the sum of the
weights of the preferred terms the node matches (normalized).
"""

from __future__ import annotations

from dataclasses import dataclass

from policies.allocator.nodes import lazy_selector_matches, term_matches, term_parses
from policies.api.base import NodeSelector, NodeSelectorTerm
from policies.api.core import Pod
from policies.scheduler.cluster import NodeInfo
from policies.scheduler.framework import Cycle, Prepared, Status, unschedulable

NAME = "NodeAffinity"
REASON_POD = "node(s) didn't match Pod's node affinity/selector"
REASON_CONFLICT = "pod affinity terms conflict"
NAME_FIELD = "metadata.name"
REFUSED = unschedulable(NAME, REASON_POD, unresolvable=True)


def _required(pod: Pod) -> NodeSelector | None:
    affinity = pod.spec.affinity
    node_affinity = affinity.node_affinity if affinity is not None else None
    return node_affinity.required_during_scheduling_ignored_during_execution if node_affinity else None


@dataclass(frozen=True)
class RequiredAffinity:
    """upstream RequiredNodeAffinity: every nodeSelector label, then one of the required terms. A
    term that does not parse is dropped once per pod ("ignore parsing errors")."""

    labels: tuple[tuple[str, str], ...]
    terms: tuple[NodeSelectorTerm, ...] | None

    @classmethod
    def of(cls, pod: Pod) -> RequiredAffinity:
        required = _required(pod)
        terms = None if required is None else tuple(t for t in required.node_selector_terms if term_parses(t))
        return cls(tuple((pod.spec.node_selector or {}).items()), terms)

    def matches(self, node: NodeInfo) -> bool:
        labels = node.labels
        if self.labels and any(labels.get(k) != v for k, v in self.labels):
            return False
        return self.terms is None or any(term_matches(t, node.name, labels) for t in self.terms)


def _named_nodes(pod: Pod) -> frozenset[str] | Status | None:
    """The nodes the required terms name with ``metadata.name In``; None when some term names none
    (then every node may match); a Status when the terms contradict each other."""
    required = _required(pod)
    if required is None or not required.node_selector_terms:
        return None
    names: set[str] = set()
    for term in required.node_selector_terms:
        term_names: set[str] | None = None
        for req in term.match_fields or ():
            if req.key == NAME_FIELD and req.operator == "In":
                values = set(req.values or ())
                term_names = values if term_names is None else term_names & values
        if term_names is None:
            return None
        names |= term_names
    if not names:
        return unschedulable(NAME, REASON_CONFLICT, unresolvable=True)
    return frozenset(names)


def pre_filter(cycle: Cycle) -> Prepared | Status | None:
    pod = cycle.pod
    if _required(pod) is None and pod.spec.node_selector is None:
        return None
    named = _named_nodes(pod)
    if isinstance(named, Status):
        return named

    required = RequiredAffinity.of(pod)

    def check(node: NodeInfo) -> Status | None:
        return None if required.matches(node) else REFUSED

    return Prepared(check, named)


def prefers(pod: Pod) -> bool:
    """Whether the pod has preferred node affinity terms (upstream PreScore skips it otherwise)."""
    affinity = pod.spec.affinity
    node_affinity = affinity.node_affinity if affinity is not None else None
    return bool(node_affinity and node_affinity.preferred_during_scheduling_ignored_during_execution)


def score(cycle: Cycle, node: NodeInfo) -> int:
    """The weights of the preferred terms the node matches (upstream PreferredSchedulingTerms.Score;
    the API server refuses terms that do not parse, so none reach here)."""
    affinity = cycle.pod.spec.affinity
    node_affinity = affinity.node_affinity if affinity is not None else None
    preferred = (
        (node_affinity.preferred_during_scheduling_ignored_during_execution or ()) if node_affinity else ()
    )
    return sum(
        p.weight
        for p in preferred
        if p.weight
        and lazy_selector_matches(NodeSelector(node_selector_terms=[p.preference]), node.name, node.labels)
    )
