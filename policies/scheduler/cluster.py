"""The scheduler's view of the cluster: each node with the pods already bound to it.

Upstream ``pkg/scheduler/framework/types.go`` ``NodeInfo``: a node, its pods, the sum of their
requests (and of their requests with the scoring defaults), the host ports they hold. A pod with
``spec.nodeName`` is load on that node, never a question; pods that finished (``Succeeded``,
``Failed``) are gone from the scheduler's cache and count for nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property

from policies.api.core import Node, Pod, Taint
from policies.api.kinds import DEFAULT_NAMESPACE
from policies.scheduler.extended import DeviceClassResolver
from policies.scheduler.podinfo import EMPTY_NODE, NodePods, PodInfo
from policies.scheduler.ports import HostPorts
from policies.scheduler.resources import Resource
from policies.snapshot import Snapshot


@dataclass(frozen=True)
class NodeInfo:
    """A node and its bound pods (:class:`NodePods`), with what the filters and the scoring read."""

    node: Node
    name: str
    labels: Mapping[str, str]
    load: NodePods = EMPTY_NODE

    @classmethod
    def of(cls, node: Node, load: NodePods = EMPTY_NODE) -> NodeInfo:
        return cls(node, node.name, node.labels, load)

    @property
    def pods(self) -> tuple[PodInfo, ...]:
        return self.load.pods

    @property
    def requested(self) -> Resource:
        return self.load.requested

    @property
    def non_zero_requested(self) -> Resource:
        return self.load.non_zero_requested

    @property
    def used_ports(self) -> HostPorts:
        return self.load.used_ports

    def with_pods(self, pods: Iterable[PodInfo]) -> NodeInfo:
        return self._with_load(self.load.with_pods(pods))

    @cached_property
    def image_sizes(self) -> Mapping[str, int]:
        """Size by name of each image the node holds (upstream NodeInfo.ImageStates), worked out
        once per node rather than per scored pod (a node lists up to 50 images)."""
        status = self.node.status
        images = (status.images if status is not None else None) or ()
        return {name: image.size_bytes or 0 for image in images for name in image.names or ()}

    def with_pod(self, pod: PodInfo) -> NodeInfo:
        """The node with ``pod`` added (upstream NodeInfo.AddPod)."""
        return self._with_load(self.load.with_pod(pod))

    def without_pods(self, gone: Iterable[PodInfo]) -> NodeInfo:
        """The node without ``gone`` (upstream NodeInfo.RemovePod for each)."""
        return self._with_load(self.load.without(gone))

    def _with_load(self, load: NodePods) -> NodeInfo:
        """The same node with other pods: what was worked out from the Node alone carries over (a
        headroom adds a pod to a node per copy, and reading its allocatable again cost a tenth of
        the placement)."""
        changed = NodeInfo(self.node, self.name, self.labels, load)
        for name in _OF_THE_NODE:
            if name in self.__dict__:
                changed.__dict__[name] = self.__dict__[name]
        return changed

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
    def pods_with_required_anti_affinity(self) -> tuple[PodInfo, ...]:
        return tuple(p for p in self.pods if p.has_required_anti_affinity)

    @cached_property
    def pods_with_affinity(self) -> tuple[PodInfo, ...]:
        return tuple(p for p in self.pods if p.has_pod_affinity)


# NodeInfo's cached properties that read the Node only, not its pods.
_OF_THE_NODE = ("image_sizes", "taints", "unschedulable", "allocatable")


@dataclass(frozen=True)
class Cluster:
    """Every node in input order with its bound pods, the snapshot they come from, and what the
    plugins look up across nodes: nodes by name, the names of the nodes with pods that have
    required anti-affinity or any affinity (upstream HavePodsWithRequiredAntiAffinityList,
    HavePodsWithAffinityList), which DeviceClass backs an extended resource, and the pending pods
    nominated to a node. Built by :meth:`of`; :meth:`with_nodes` derives the cluster after pods
    land on a few nodes, and a :meth:`growing` copy takes them in place (:meth:`grow`) in time
    proportional to those nodes (a headroom places thousands of pods one after another on 5,000
    nodes)."""

    snapshot: Snapshot
    nodes: Sequence[NodeInfo]
    by_name: Mapping[str, NodeInfo]
    positions: Mapping[str, int]
    anti_affinity_nodes: tuple[str, ...]
    pod_affinity_nodes: tuple[str, ...]
    resolver: DeviceClassResolver
    nominations: tuple[tuple[PodInfo, str], ...]

    @classmethod
    def of(cls, snapshot: Snapshot) -> Cluster:
        loads = snapshot.node_pods
        nodes = tuple(NodeInfo.of(n, loads.get(n.name, EMPTY_NODE)) for n in snapshot.nodes.values())
        by_name = {info.name: info for info in nodes}
        return cls(
            snapshot,
            nodes,
            by_name,
            {info.name: i for i, info in enumerate(nodes)},
            _names(nodes, _has_anti_affinity),
            _names(nodes, _has_affinity),
            DeviceClassResolver(snapshot.classes.values()),
            tuple(
                (pod, pod.nominated_node)
                for pod in snapshot.pods.values()
                if pod.nominated_node and pod.nominated_node in by_name and pod.pending
            ),
        )

    @property
    def with_required_anti_affinity(self) -> tuple[NodeInfo, ...]:
        """upstream HavePodsWithRequiredAntiAffinityList."""
        return tuple(self.by_name[n] for n in self.anti_affinity_nodes)

    @property
    def with_pod_affinity(self) -> tuple[NodeInfo, ...]:
        """upstream HavePodsWithAffinityList."""
        return tuple(self.by_name[n] for n in self.pod_affinity_nodes)

    def namespace_labels(self, namespace: str) -> Mapping[str, str]:
        return self.snapshot.namespace_labels(namespace or DEFAULT_NAMESPACE) or {}

    def nominated(self, pod: Pod) -> Mapping[str, tuple[PodInfo, ...]]:
        """Per node, the pending pods nominated to it (``status.nominatedNodeName``, after a
        preemption) that are at least as important as ``pod`` (upstream addGENominatedPods)."""
        found: dict[str, list[PodInfo]] = {}
        for other, node in self.nominations:
            if other.key != pod.key and other.priority >= (pod.spec.priority or 0):
                found.setdefault(node, []).append(other)
        return {node: tuple(pods) for node, pods in found.items()}

    def with_nodes(self, infos: Iterable[NodeInfo]) -> Cluster:
        """The cluster with the nodes ``infos`` name replaced by them (other pods on them); the
        snapshot and what depends on it alone are kept."""
        return self.growing().grow(infos)

    def growing(self) -> Cluster:
        """A copy whose nodes :meth:`grow` replaces in place: copying the node list and index for
        every placement was a third of a headroom's time on 5,000 nodes. This cluster is left as
        it is."""
        return replace(self, nodes=list(self.nodes), by_name=dict(self.by_name))

    def grow(self, infos: Iterable[NodeInfo]) -> Cluster:
        """Only on a :meth:`growing` copy: the nodes ``infos`` name replaced by them, in place; the
        nodes with affinity pods are listed again (in a new cluster sharing the nodes) only when a
        changed node joins or leaves them."""
        nodes, by_name = self.nodes, self.by_name
        if not isinstance(nodes, list) or not isinstance(by_name, dict):
            raise TypeError("Cluster.grow: only on a growing() copy")
        moved = False
        for info in infos:
            before = by_name[info.name]
            nodes[self.positions[info.name]] = by_name[info.name] = info
            moved |= _has_anti_affinity(before) != _has_anti_affinity(info)
            moved |= _has_affinity(before) != _has_affinity(info)
        if not moved:
            return self
        return replace(
            self,
            anti_affinity_nodes=_names(nodes, _has_anti_affinity),
            pod_affinity_nodes=_names(nodes, _has_affinity),
        )

    def with_node(self, info: NodeInfo) -> Cluster:
        """The cluster with the node ``info`` names replaced by ``info`` (other pods on it)."""
        return self.with_nodes([info])


def _has_anti_affinity(info: NodeInfo) -> bool:
    return bool(info.pods_with_required_anti_affinity)


def _has_affinity(info: NodeInfo) -> bool:
    return bool(info.pods_with_affinity)


def _names(nodes: Iterable[NodeInfo], wanted: Callable[[NodeInfo], bool]) -> tuple[str, ...]:
    return tuple(info.name for info in nodes if wanted(info))
