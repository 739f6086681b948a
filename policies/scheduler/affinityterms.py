"""A pod's pod-affinity terms, parsed once per pod as kube-scheduler's PodInfo holds them.

Upstream ``pkg/scheduler/framework/types.go``: ``AffinityTerm`` (namespaces, namespace selector,
label selector with the pod's matchLabelKeys and mismatchLabelKeys merged in, topology key) and
``PodInfo``'s ``RequiredAffinityTerms``, ``RequiredAntiAffinityTerms``, ``PreferredAffinityTerms``
and ``PreferredAntiAffinityTerms``, computed when the pod enters the scheduler's cache, not on
every scheduling cycle: InterPodAffinity reads the terms of every bound pod with affinity on every
attempt (25,000 such pods at 100,000 took half a second to parse per attempt).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from policies.api.core import Affinity, PodAffinity, PodAffinityTerm
from policies.scheduler.labels import Selector, label_keys, selector


@dataclass(frozen=True)
class Term:
    """upstream AffinityTerm."""

    namespaces: frozenset[str]
    namespace_selector: Selector
    selector: Selector
    topology_key: str

    @classmethod
    def of(cls, namespace: str, labels: Mapping[str, str], raw: PodAffinityTerm) -> Term:
        """The term as written in the spec of a pod of ``namespace`` with ``labels``."""
        chosen = selector(raw.label_selector).plus(
            [
                *label_keys(labels, raw.match_label_keys, "In"),
                *label_keys(labels, raw.mismatch_label_keys, "NotIn"),
            ]
        )
        names = raw.namespaces or ([namespace] if raw.namespace_selector is None else [])
        return cls(frozenset(names), selector(raw.namespace_selector), chosen, raw.topology_key)

    def matches(self, namespace: str, labels: Mapping[str, str], namespace_labels: Mapping[str, str]) -> bool:
        """Whether a pod of ``namespace`` with ``labels`` is one the term selects."""
        if namespace in self.namespaces or self.namespace_selector.matches(namespace_labels):
            return self.selector.matches(labels)
        return False

    def merged(self, namespaces: Iterable[str], labels_of: Callable[[str], Mapping[str, str]]) -> Term:
        """The namespaces the namespace selector matches, listed (upstream
        mergeAffinityTermNamespacesIfNotEmpty, done for the incoming pod's own terms)."""
        if not self.namespace_selector.requirements:
            return self  # nothing to list: selects no namespace, or every one
        listed = {ns for ns in namespaces if self.namespace_selector.matches(labels_of(ns))}
        return Term(self.namespaces | listed, Selector(None), self.selector, self.topology_key)


@dataclass(frozen=True)
class PodTerms:
    """A pod's four lists of terms (the preferred ones with their weights)."""

    required_affinity: tuple[Term, ...]
    required_anti_affinity: tuple[Term, ...]
    preferred_affinity: tuple[tuple[int, Term], ...]
    preferred_anti_affinity: tuple[tuple[int, Term], ...]

    @classmethod
    def of(cls, namespace: str, labels: Mapping[str, str], affinity: Affinity | None) -> PodTerms | None:
        """The terms of a pod's ``affinity``; None without a pod (anti-)affinity section."""
        if affinity is None or (affinity.pod_affinity is None and affinity.pod_anti_affinity is None):
            return None

        def required(section: PodAffinity | None) -> tuple[Term, ...]:
            found: Sequence[PodAffinityTerm] = (
                (section.required_during_scheduling_ignored_during_execution or []) if section else []
            )
            return tuple(Term.of(namespace, labels, t) for t in found)

        def preferred(section: PodAffinity | None) -> tuple[tuple[int, Term], ...]:
            found = (section.preferred_during_scheduling_ignored_during_execution or []) if section else []
            return tuple((t.weight, Term.of(namespace, labels, t.pod_affinity_term)) for t in found)

        pod, anti = affinity.pod_affinity, affinity.pod_anti_affinity
        return cls(required(pod), required(anti), preferred(pod), preferred(anti))


NO_TERMS = PodTerms((), (), (), ())
