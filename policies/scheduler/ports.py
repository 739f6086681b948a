"""The host ports a pod holds on its node, as kube-scheduler keys them.

Upstream ``pkg/scheduler/util/utils.go`` ``GetHostPorts``: ports with a host port, of the regular
containers and of the init containers that run for the pod's whole life (``restartPolicy:
Always``); ``HostPortInfo`` sanitizes an empty IP to 0.0.0.0 and an empty protocol to TCP. A pod on
the host network gets ``hostPort = containerPort`` from the API server's defaulting
(:mod:`policies.api.defaults`).
"""

from __future__ import annotations

from policies.api.core import Pod

ALL_IPS = "0.0.0.0"
HostPort = tuple[str, str, int]
"""``(host IP, protocol, port)``."""
HostPorts = frozenset[HostPort]


def host_ports(pod: Pod) -> HostPorts:
    containers = [c for c in pod.spec.init_containers or () if c.restart_policy == "Always"]
    containers += pod.spec.containers
    return frozenset(
        (p.host_ip or ALL_IPS, p.protocol or "TCP", p.host_port)
        for c in containers
        for p in c.ports or ()
        if p.host_port is not None and p.host_port > 0
    )
