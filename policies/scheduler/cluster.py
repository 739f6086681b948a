"""The scheduler's view of the cluster: each node with the pods already bound to it.

Upstream ``pkg/scheduler/framework/types.go`` ``NodeInfo``: a node, its pods, the sum of their
requests (and of their requests with the scoring defaults), the host ports they hold. A pod with
``spec.nodeName`` is load on that node, never a question; pods that finished (``Succeeded``,
``Failed``) are gone from the scheduler's cache and count for nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property

from policies.api.core import Node, Pod, Taint
from policies.api.kinds import DEFAULT_NAMESPACE
from policies.scheduler import resources
from policies.scheduler.extended import DeviceClassResolver
from policies.scheduler.ports import HostPorts, host_ports
from policies.scheduler.resources import Resource
from policies.snapshot import Snapshot

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


def is_bound(pod: Pod) -> bool:
    """Load on a node: bound (``spec.nodeName``) and not finished."""
    phase = pod.status.phase if pod.status is not None else None
    return bool(pod.spec.node_name) and phase not in TERMINAL_PHASES


def is_pending(pod: Pod) -> bool:
    """A question for the scheduler: no node yet, not finished, not being deleted."""
    phase = pod.status.phase if pod.status is not None else None
    return not pod.spec.node_name and phase not in TERMINAL_PHASES and not pod.metadata.deletion_timestamp


def has_required_anti_affinity(pod: Pod) -> bool:
    affinity = pod.spec.affinity
    anti = affinity.pod_anti_affinity if affinity is not None else None
    return bool(anti is not None and anti.required_during_scheduling_ignored_during_execution)


def has_pod_affinity(pod: Pod) -> bool:
    """upstream podWithAffinity: a pod affinity or anti-affinity section (NodeInfo.PodsWithAffinity)."""
    affinity = pod.spec.affinity
    return affinity is not None and (
        affinity.pod_affinity is not None or affinity.pod_anti_affinity is not None
    )


@dataclass(frozen=True)
class NodeInfo:
    """A node and its bound pods, with the totals the filters and the scoring read."""

    node: Node
    name: str
    labels: Mapping[str, str]
    pods: tuple[Pod, ...] = ()
    requested: Resource = field(default_factory=Resource)
    non_zero_requested: Resource = field(default_factory=Resource)
    used_ports: HostPorts = frozenset()

    @classmethod
    def of(cls, node: Node, pods: Iterable[Pod] = ()) -> NodeInfo:
        return cls(node, node.name, node.labels).with_pods(pods)

    def with_pods(self, pods: Iterable[Pod]) -> NodeInfo:
        info = self
        for pod in pods:
            info = info.with_pod(pod)
        return info

    def without_pods(self, gone: Iterable[Pod]) -> NodeInfo:
        """The node without ``gone`` (upstream NodeInfo.RemovePod for each): their requests are
        freed, and so are their host ports, which the node keeps as a set, not a count."""
        gone = list(gone)
        keys = {p.key for p in gone}
        freed = frozenset().union(*(host_ports(p) for p in gone))
        kept = NodeInfo.of(self.node, (p for p in self.pods if p.key not in keys))
        return replace(kept, used_ports=self.used_ports - freed)

    def with_pod(self, pod: Pod) -> NodeInfo:
        """The node with ``pod`` added (upstream NodeInfo.AddPod)."""
        return replace(
            self,
            pods=(*self.pods, pod),
            requested=self.requested.plus(resources.requests(pod)),
            non_zero_requested=self.non_zero_requested.plus(resources.non_zero_requests(pod)),
            used_ports=self.used_ports | host_ports(pod),
        )

    @cached_property
    def taints(self) -> tuple[Taint, ...]:
        return tuple(self.node.spec.taints or ()) if self.node.spec is not None else ()

    @cached_property
    def unschedulable(self) -> bool:
        """``spec.unschedulable``: cordoned."""
        return bool(self.node.spec is not None and self.node.spec.unschedulable)

    @cached_property
    def allocatable(self) -> Resource | None:
        """``status.allocatable``; None when the Node manifest gives none (a hand-written Node):
        then NodeResourcesFit cannot judge the node, and the answer says so."""
        status = self.node.status
        if status is None or status.allocatable is None:
            return None
        return Resource.of(status.allocatable)

    @cached_property
    def pods_with_required_anti_affinity(self) -> tuple[Pod, ...]:
        return tuple(p for p in self.pods if has_required_anti_affinity(p))

    @cached_property
    def pods_with_affinity(self) -> tuple[Pod, ...]:
        return tuple(p for p in self.pods if has_pod_affinity(p))


@dataclass(frozen=True)
class Cluster:
    """Every node in input order with its bound pods, and the snapshot they come from."""

    snapshot: Snapshot
    nodes: tuple[NodeInfo, ...]

    @classmethod
    def of(cls, snapshot: Snapshot) -> Cluster:
        by_node: dict[str, list[Pod]] = {}
        for pod in snapshot.pods.values():
            if is_bound(pod) and pod.spec.node_name in snapshot.nodes:
                by_node.setdefault(pod.spec.node_name or "", []).append(pod)
        return cls(snapshot, tuple(NodeInfo.of(n, by_node.get(n.name, ())) for n in snapshot.nodes.values()))

    @cached_property
    def by_name(self) -> Mapping[str, NodeInfo]:
        return {info.name: info for info in self.nodes}

    @cached_property
    def with_required_anti_affinity(self) -> tuple[NodeInfo, ...]:
        """upstream HavePodsWithRequiredAntiAffinityList."""
        return tuple(info for info in self.nodes if info.pods_with_required_anti_affinity)

    @cached_property
    def with_pod_affinity(self) -> tuple[NodeInfo, ...]:
        """upstream HavePodsWithAffinityList."""
        return tuple(info for info in self.nodes if info.pods_with_affinity)

    @cached_property
    def resolver(self) -> DeviceClassResolver:
        """Which DeviceClass backs an extended resource name."""
        return DeviceClassResolver(self.snapshot.classes.values())

    def namespace_labels(self, namespace: str) -> Mapping[str, str]:
        return self.snapshot.namespace_labels(namespace or DEFAULT_NAMESPACE) or {}

    def nominated(self, pod: Pod) -> Mapping[str, tuple[Pod, ...]]:
        """Per node, the pending pods nominated to it (``status.nominatedNodeName``, after a
        preemption) that are at least as important as ``pod`` (upstream addGENominatedPods)."""
        found: dict[str, list[Pod]] = {}
        for other, node in self.nominations:
            if other.key != pod.key and (other.spec.priority or 0) >= (pod.spec.priority or 0):
                found.setdefault(node, []).append(other)
        return {node: tuple(pods) for node, pods in found.items()}

    @cached_property
    def nominations(self) -> tuple[tuple[Pod, str], ...]:
        """Pending pods nominated to a node of the cluster, and the node."""
        found = []
        for pod in self.snapshot.pods.values():
            node = pod.status.nominated_node_name if pod.status is not None else None
            if node and node in self.by_name and is_pending(pod):
                found.append((pod, node))
        return tuple(found)

    def with_node(self, info: NodeInfo) -> Cluster:
        """The cluster with the node ``info`` names replaced by ``info`` (other pods on it)."""
        return replace(self, nodes=tuple(info if n.name == info.name else n for n in self.nodes))

    def with_pod(self, pod: Pod, node: str) -> Cluster:
        """The cluster after ``pod`` was bound to ``node`` (the next pod of a sequence sees it)."""
        return replace(
            self, nodes=tuple(info.with_pod(pod) if info.name == node else info for info in self.nodes)
        )
