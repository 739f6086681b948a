"""NodeName: a pod that names its node fits only there.

Upstream ``pkg/scheduler/framework/plugins/nodename/node_name.go``. The dry run answers only pods
without ``spec.nodeName`` (a bound pod is load, not a question), so this filter refuses nothing in
practice; it is kept so the profile is upstream's, in upstream's order.
"""

from __future__ import annotations

from policies.scheduler.cluster import NodeInfo
from policies.scheduler.framework import Cycle, Prepared, Status, unschedulable

NAME = "NodeName"
REASON = "node(s) didn't match the requested node name"
REFUSED = unschedulable(NAME, REASON, unresolvable=True)


def pre_filter(cycle: Cycle) -> Prepared | None:
    wanted = cycle.pod.spec.node_name
    if not wanted:
        return None

    def check(node: NodeInfo) -> Status | None:
        return None if node.name == wanted else REFUSED

    return Prepared(check, frozenset({wanted}))
