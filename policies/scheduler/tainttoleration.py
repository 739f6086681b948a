"""TaintToleration: a node's NoSchedule and NoExecute taints must be tolerated by the pod.

Upstream ``pkg/scheduler/framework/plugins/tainttoleration/taint_toleration.go`` and the toleration
matching of ``k8s.io/component-helpers/scheduling/corev1/helpers.go``
(``FindMatchingUntoleratedTaint``, ``Toleration.ToleratesTaint``). Scoring: the fewer
``PreferNoSchedule`` taints the pod does not tolerate, the better (normalized in reverse).
"""

from __future__ import annotations

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


def tolerated(tolerations: Iterable[Toleration], taint: Taint) -> bool:
    return any(tolerates(t, taint) for t in tolerations)


def first_untolerated(taints: Iterable[Taint], tolerations: Sequence[Toleration]) -> Taint | None:
    """The first NoSchedule or NoExecute taint no toleration tolerates (FindMatchingUntoleratedTaint)."""
    for taint in taints:
        if taint.effect in FILTERED_EFFECTS and not tolerated(tolerations, taint):
            return taint
    return None


def pre_filter(cycle: Cycle) -> Prepared:
    tolerations = tuple(cycle.pod.spec.tolerations or ())

    def check(node: NodeInfo) -> Status | None:
        return None if first_untolerated(node.taints, tolerations) is None else REFUSED

    return Prepared(check)


def score(cycle: Cycle, node: NodeInfo) -> int:
    """How many PreferNoSchedule taints the pod does not tolerate (lower is better)."""
    tolerations = [t for t in cycle.pod.spec.tolerations or () if t.effect in (None, "", PREFER_NO_SCHEDULE)]
    return sum(1 for t in node.taints if t.effect == PREFER_NO_SCHEDULE and not tolerated(tolerations, t))
