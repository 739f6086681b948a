"""NodeUnschedulable: a cordoned node (``spec.unschedulable``) takes only pods that tolerate it.

Upstream ``pkg/scheduler/framework/plugins/nodeunschedulable/node_unschedulable.go``: a pod that
tolerates the ``node.kubernetes.io/unschedulable:NoSchedule`` taint also tolerates the flag.
"""

from __future__ import annotations

from policies.api.core import Taint
from policies.scheduler.cluster import NodeInfo
from policies.scheduler.framework import Cycle, Prepared, Status, unschedulable
from policies.scheduler.tainttoleration import GATE, NO_SCHEDULE, tolerated

NAME = "NodeUnschedulable"
REASON = "node(s) were unschedulable"
UNSCHEDULABLE_TAINT = Taint(key="node.kubernetes.io/unschedulable", effect=NO_SCHEDULE)
REFUSED = unschedulable(NAME, REASON, unresolvable=True)


def pre_filter(cycle: Cycle) -> Prepared | None:
    if tolerated(cycle.pod.spec.tolerations or (), UNSCHEDULABLE_TAINT, cycle.gates.enabled(GATE)):
        return None

    def check(node: NodeInfo) -> Status | None:
        return REFUSED if node.unschedulable else None

    return Prepared(check)
