"""Label selectors (metav1.LabelSelector) as the scheduler's pod affinity and spreading read them.

Upstream ``metav1.LabelSelectorAsSelector``: no selector selects nothing, an empty one selects
everything; ``matchLabels`` are ``key == value``; ``matchExpressions`` are ``In`` and ``NotIn``
(with values), ``Exists`` and ``DoesNotExist`` (without). The API server refuses anything else, so
such a selector matches nothing here rather than failing the dry run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from policies.api.base import LabelSelector, LabelSelectorRequirement


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: str
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.operator == "In":
            return present and labels[self.key] in self.values
        if self.operator == "NotIn":
            return not present or labels[self.key] not in self.values
        if self.operator == "Exists":
            return present
        if self.operator == "DoesNotExist":
            return not present
        return False


@dataclass(frozen=True)
class Selector:
    """A parsed selector; ``requirements is None`` selects nothing."""

    requirements: tuple[Requirement, ...] | None

    def matches(self, labels: Mapping[str, str]) -> bool:
        return self.requirements is not None and all(r.matches(labels) for r in self.requirements)

    def plus(self, extra: Sequence[Requirement]) -> Selector:
        """The selector with ``extra`` ANDed in (matchLabelKeys, mismatchLabelKeys)."""
        if not extra:
            return self
        return Selector((*extra, *(self.requirements or ())))


NOTHING = Selector(None)


def selector(raw: LabelSelector | None) -> Selector:
    if raw is None:
        return NOTHING
    requirements = [Requirement(k, "In", frozenset({v})) for k, v in (raw.match_labels or {}).items()]
    requirements += [_requirement(r) for r in raw.match_expressions or ()]
    return Selector(tuple(requirements))


def _requirement(raw: LabelSelectorRequirement) -> Requirement:
    return Requirement(raw.key, raw.operator, frozenset(raw.values or ()))


def label_keys(pod_labels: Mapping[str, str], keys: Sequence[str] | None, operator: str) -> list[Requirement]:
    """``key In/NotIn (the pod's value)`` for each of ``keys`` the pod has (the API server's merge of
    matchLabelKeys / mismatchLabelKeys into the label selector, done again here for manifests that
    never went through it; merging twice selects the same pods)."""
    return [Requirement(k, operator, frozenset({pod_labels[k]})) for k in keys or () if k in pod_labels]
