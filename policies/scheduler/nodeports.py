"""NodePorts: the host ports a pod asks for must be free on the node.

Upstream ``pkg/scheduler/framework/plugins/nodeports/node_ports.go``, ``pkg/scheduler/util``
``GetHostPorts`` (containers and restartable init containers) and
``pkg/scheduler/framework/types.go`` ``HostPortInfo`` (an empty IP is 0.0.0.0 and conflicts with
every IP of the same protocol and port; an empty protocol is TCP).
"""

from __future__ import annotations

from policies.scheduler.cluster import NodeInfo
from policies.scheduler.framework import Cycle, Prepared, Status, unschedulable
from policies.scheduler.ports import ALL_IPS, HostPort, host_ports

NAME = "NodePorts"
REASON = "node(s) didn't have free ports for the requested pod ports"
REFUSED = unschedulable(NAME, REASON)


def conflicts(wanted: HostPort, used: frozenset[HostPort]) -> bool:
    ip, protocol, port = wanted
    if ip == ALL_IPS:
        return any(p == protocol and n == port for _, p, n in used)
    return (ALL_IPS, protocol, port) in used or wanted in used


def pre_filter(cycle: Cycle) -> Prepared | None:
    wanted = host_ports(cycle.pod)
    if not wanted:
        return None

    def check(node: NodeInfo) -> Status | None:
        return REFUSED if any(conflicts(w, node.used_ports) for w in wanted) else None

    return Prepared(check)
