"""TaintToleration: a node's NoSchedule and NoExecute taints must be tolerated by the pod.

Upstream ``pkg/scheduler/framework/plugins/tainttoleration/taint_toleration.go`` and the toleration
matching of ``k8s.io/component-helpers/scheduling/corev1/helpers.go``
(``FindMatchingUntoleratedTaint``) and ``k8s.io/api/core/v1/toleration.go``
(``Toleration.ToleratesTaint``, with the comparison operators of KEP-5471). Scoring: the fewer
``PreferNoSchedule`` taints the pod does not tolerate, the better (normalized in reverse).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from policies.allocator.taints import tolerates
from policies.api.core import Taint, Toleration
from policies.scheduler.cluster import NodeInfo
from policies.scheduler.framework import Cycle, Prepared, Status, unschedulable

NAME = "TaintToleration"
REASON = "node(s) had untolerated taint(s)"
NO_SCHEDULE = "NoSchedule"
NO_EXECUTE = "NoExecute"
PREFER_NO_SCHEDULE = "PreferNoSchedule"
FILTERED_EFFECTS = frozenset({NO_SCHEDULE, NO_EXECUTE})
REFUSED = unschedulable(NAME, REASON, unresolvable=True)


GATE = "TaintTolerationComparisonOperators"
COMPARISONS = frozenset({"Lt", "Gt"})
_INT64 = re.compile(r"[+-]?[0-9]+")


def _int64(text: str | None) -> int | None:
    """Go strconv.ParseInt(text, 10, 64), None where it fails."""
    if text is None or not _INT64.fullmatch(text):
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


def tolerates_taint(toleration: Toleration, taint: Taint, comparisons: bool) -> bool:
    """core/v1 ``Toleration.ToleratesTaint``: ``Lt`` and ``Gt`` compare the taint's value with the
    toleration's as integers (the taint's less, or greater), only with the
    TaintTolerationComparisonOperators gate (alpha, off in 1.36); a value that is not an integer
    tolerates nothing."""
    if toleration.operator not in COMPARISONS:
        return tolerates(toleration, taint)
    if not comparisons or (toleration.effect and toleration.effect != taint.effect):
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    wanted, have = _int64(toleration.value), _int64(taint.value)
    if wanted is None or have is None:
        return False
    return have < wanted if toleration.operator == "Lt" else have > wanted


def tolerated(tolerations: Iterable[Toleration], taint: Taint, comparisons: bool = False) -> bool:
    return any(tolerates_taint(t, taint, comparisons) for t in tolerations)


def first_untolerated(
    taints: Iterable[Taint], tolerations: Sequence[Toleration], comparisons: bool = False
) -> Taint | None:
    """The first NoSchedule or NoExecute taint no toleration tolerates (FindMatchingUntoleratedTaint)."""
    for taint in taints:
        if taint.effect in FILTERED_EFFECTS and not tolerated(tolerations, taint, comparisons):
            return taint
    return None


def pre_filter(cycle: Cycle) -> Prepared:
    tolerations = tuple(cycle.pod.spec.tolerations or ())
    comparisons = cycle.gates.enabled(GATE)

    def check(node: NodeInfo) -> Status | None:
        return None if first_untolerated(node.taints, tolerations, comparisons) is None else REFUSED

    return Prepared(check)


def score(cycle: Cycle, node: NodeInfo) -> int:
    """How many PreferNoSchedule taints the pod does not tolerate (lower is better)."""
    tolerations = [t for t in cycle.pod.spec.tolerations or () if t.effect in (None, "", PREFER_NO_SCHEDULE)]
    comparisons = cycle.gates.enabled(GATE)
    return sum(
        1
        for t in node.taints
        if t.effect == PREFER_NO_SCHEDULE and not tolerated(tolerations, t, comparisons)
    )
