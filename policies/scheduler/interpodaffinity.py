"""InterPodAffinity: the required pod affinity and anti-affinity, the pod's and the bound pods'.

Upstream ``pkg/scheduler/framework/plugins/interpodaffinity/filtering.go`` and the affinity terms
of ``pkg/scheduler/framework/types.go`` (``AffinityTerm.Matches``: the term's namespaces, the
pod's own when it names none and has no namespace selector, or the namespaces its selector
matches; then its label selector). PreFilter counts, per topology pair, the bound pods that match
all the pod's affinity terms, those that match its anti-affinity terms, and the bound pods whose
anti-affinity terms match the pod. A node is refused when:

* a term's topology key is missing or no matching pod is in its domain (affinity), unless no pod
  anywhere matches and the pod matches its own terms (the first of a group);
* a pod matching an anti-affinity term is in its domain;
* a bound pod's anti-affinity term matches the pod and that pod is in the same domain.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from policies.scheduler.affinityterms import NO_TERMS, PodTerms, Term
from policies.scheduler.cluster import Cluster, NodeInfo
from policies.scheduler.framework import (
    FITTING,
    STATIC,
    Cycle,
    Prepared,
    ScorePart,
    Status,
    between,
    unschedulable,
)
from policies.scheduler.podinfo import PodInfo

NAME = "InterPodAffinity"
REASON_AFFINITY = "node(s) didn't match pod affinity rules"
REASON_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
REASON_EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"

TopologyPair = tuple[str, str]
AFFINITY_REFUSED = unschedulable(NAME, REASON_AFFINITY, unresolvable=True)
ANTI_AFFINITY_REFUSED = unschedulable(NAME, REASON_ANTI_AFFINITY)
EXISTING_REFUSED = unschedulable(NAME, REASON_EXISTING_ANTI_AFFINITY)


def _merged(term: Term, cluster: Cluster) -> Term:
    return term.merged(cluster.snapshot.namespaces, cluster.namespace_labels)


def _matches(term: Term, pod: PodInfo, namespace_labels: Mapping[str, str]) -> bool:
    return term.matches(pod.namespace, pod.labels, namespace_labels)


def _terms(pod: PodInfo) -> PodTerms:
    return pod.terms if pod.terms is not None else NO_TERMS


Credits = tuple[tuple[str, int], ...]
"""``(topology key, weight)`` pairs: what a group of bound pods adds to the domains of its node."""


class _Once:
    """A function of the bound pods' labels or terms, worked out once per pod judged: the bound pods
    are read in groups sharing one labels mapping or one :class:`PodTerms` (``NodePods``), and the
    pods of a template share them across nodes. Keyed by identity: what is keyed is the snapshot's,
    alive while the pod is judged."""

    def __init__(self, work: Callable[..., Credits]) -> None:
        self.work = work
        self.done: dict[tuple[object, int], Credits] = {}

    def __call__(self, namespace: str, shared: object) -> Credits:
        key = (namespace, id(shared))
        found = self.done.get(key)
        if found is None:
            found = self.done[key] = self.work(namespace, shared)
        return found


def _credit(counts: dict[TopologyPair, int], node: NodeInfo, credits: Credits, times: int) -> None:
    """Add each credit's weight, ``times`` over, to the node's domain of its topology key."""
    for key, weight in credits:
        value = node.labels.get(key)
        if value is not None:
            counts[(key, value)] = counts.get((key, value), 0) + weight * times


def _existing_anti_affinity(cycle: Cycle) -> dict[TopologyPair, int]:
    """Topology pairs where a bound pod's anti-affinity term matches the incoming pod."""
    pod = cycle.info
    namespace_labels = cycle.cluster.namespace_labels(pod.namespace)

    def credits(_: str, terms: PodTerms) -> Credits:
        anti = terms.required_anti_affinity
        return tuple((t.topology_key, 1) for t in anti if _matches(t, pod, namespace_labels))

    of_terms = _Once(credits)
    counts: dict[TopologyPair, int] = {}
    for node in cycle.cluster.with_required_anti_affinity:
        for group in node.load.terms_groups:
            _credit(counts, node, of_terms("", group.terms), group.pods)
    return counts


def _incoming(cycle: Cycle, affinity: list[Term], anti: list[Term]) -> tuple[dict[TopologyPair, int], ...]:
    """Topology pairs with bound pods matching all affinity terms, and any anti-affinity term."""
    with_affinity: dict[TopologyPair, int] = {}
    with_anti: dict[TopologyPair, int] = {}
    if not affinity and not anti:
        return with_affinity, with_anti

    # The incoming pod's terms have their namespace selectors merged into the names.
    def affinity_credits(namespace: str, labels: Mapping[str, str]) -> Credits:
        if affinity and all(t.matches(namespace, labels, {}) for t in affinity):
            return tuple((t.topology_key, 1) for t in affinity)
        return ()

    def anti_credits(namespace: str, labels: Mapping[str, str]) -> Credits:
        return tuple((t.topology_key, 1) for t in anti if t.matches(namespace, labels, {}))

    of_affinity, of_anti = _Once(affinity_credits), _Once(anti_credits)
    for node in cycle.cluster.nodes:
        for namespace, groups in node.load.by_namespace.items():
            for group in groups:
                _credit(with_affinity, node, of_affinity(namespace, group.labels), group.pods)
                _credit(with_anti, node, of_anti(namespace, group.labels), group.pods)
    return with_affinity, with_anti


def pre_filter(cycle: Cycle) -> Prepared | None:
    pod = cycle.info
    affinity = [_merged(t, cycle.cluster) for t in _terms(pod).required_affinity]
    anti = [_merged(t, cycle.cluster) for t in _terms(pod).required_anti_affinity]
    existing = _existing_anti_affinity(cycle)
    if not existing and not affinity and not anti:
        return None
    with_affinity, with_anti = _incoming(cycle, affinity, anti)
    first_of_group = not with_affinity and bool(affinity) and all(_matches(t, pod, {}) for t in affinity)

    def satisfies_affinity(node: NodeInfo) -> bool:
        found = True
        for t in affinity:
            value = node.labels.get(t.topology_key)
            if value is None:
                return False
            if with_affinity.get((t.topology_key, value), 0) <= 0:
                found = False
        return found or first_of_group

    def check(node: NodeInfo) -> Status | None:
        if not satisfies_affinity(node):
            return AFFINITY_REFUSED
        if any(
            with_anti.get((t.topology_key, node.labels.get(t.topology_key, "")), 0) > 0
            for t in anti
            if t.topology_key in node.labels
        ):
            return ANTI_AFFINITY_REFUSED
        if any(existing.get(pair, 0) > 0 for pair in node.labels.items()):
            return EXISTING_REFUSED
        return None

    return Prepared(check)


# --- scoring (upstream scoring.go) ---------------------------------------------------------------------

HARD_POD_AFFINITY_WEIGHT = 1  # InterPodAffinityArgs.hardPodAffinityWeight, default profile


def score_part(cycle: Cycle) -> ScorePart:
    """upstream PreScore, Score and NormalizeScore: per topology pair, the weights of the incoming
    pod's preferred terms that bound pods match (anti-affinity negative), of the bound pods'
    required affinity terms (weight 1) and preferred terms that the incoming pod matches; a node
    sums the pairs of its labels, and the sums are scaled to 0..100 between their minimum and
    maximum (:func:`between`). Every node 0 when nothing matched (the plugin skips). Weight 2. A
    node's sum depends on pods elsewhere in its domains only through the pod's own preferred
    terms; without them, only bound pods with affinity count, which placing such a pod does not add."""
    pod = cycle.info
    wanted = [(w, _merged(t, cycle.cluster)) for w, t in _terms(pod).preferred_affinity]
    unwanted = [(w, _merged(t, cycle.cluster)) for w, t in _terms(pod).preferred_anti_affinity]
    everything = bool(wanted or unwanted)
    found: list[dict[TopologyPair, int]] = []

    def raw(nodes: Sequence[NodeInfo]) -> dict[str, int]:
        if not found:  # the pairs, counted once for the pod
            found.append(_pairs(cycle, wanted, unwanted))
        pairs = found[0]
        return {n.name: sum(pairs.get(pair, 0) for pair in n.labels.items()) if pairs else 0 for n in nodes}

    return ScorePart(NAME, 2, raw, between, FITTING if everything else STATIC)


def _pairs(
    cycle: Cycle, wanted: list[tuple[int, Term]], unwanted: list[tuple[int, Term]]
) -> dict[TopologyPair, int]:
    pod = cycle.info
    everything = bool(wanted or unwanted)
    own_namespace = cycle.cluster.namespace_labels(pod.namespace)

    def own_credits(namespace: str, labels: Mapping[str, str]) -> Credits:
        """The incoming pod's preferred terms that bound pods of ``namespace`` with ``labels`` match."""
        weighted = [(w, t) for w, t in wanted] + [(-w, t) for w, t in unwanted]
        return tuple((t.topology_key, w) for w, t in weighted if t.matches(namespace, labels, {}))

    def their_credits(_: str, terms: PodTerms) -> Credits:
        """The bound pods' terms (``terms``) that the incoming pod matches."""
        weighted = [(HARD_POD_AFFINITY_WEIGHT, t) for t in terms.required_affinity]
        weighted += [*terms.preferred_affinity, *((-w, t) for w, t in terms.preferred_anti_affinity)]
        return tuple((t.topology_key, w) for w, t in weighted if _matches(t, pod, own_namespace))

    of_labels, of_terms = _Once(own_credits), _Once(their_credits)
    pairs: dict[TopologyPair, int] = {}
    for node in cycle.cluster.nodes if everything else cycle.cluster.with_pod_affinity:
        if not node.labels:
            continue
        if everything:
            for namespace, groups in node.load.by_namespace.items():
                for group in groups:
                    _credit(pairs, node, of_labels(namespace, group.labels), group.pods)
        for terms_group in node.load.terms_groups:
            _credit(pairs, node, of_terms("", terms_group.terms), terms_group.pods)
    return pairs
