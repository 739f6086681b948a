"""Rule ``drain``: keep a DRA driver's pod on its node while the node still has claims in use.

When a node is drained, its pods are evicted in no particular order. If the driver's kubelet
plugin goes first, the kubelet cannot unprepare the devices of the workload pods that are still
shutting down, their claims stay prepared on a node nobody cleans up, and the pods hang in
Terminating. So an eviction (``pods/eviction`` CREATE; the request names the pod) of a driver pod
is denied while claims allocated on its node are still reserved by other consumers; once the
workload pods are gone, the driver pod can be evicted. The refusal says "retry later" (429, as a
PodDisruptionBudget's does): ``kubectl drain`` and other drainers evict every pod of the node at
once and retry only that answer, so the driver pod then goes by itself after its workloads.

Driver pods are those matching ``drain.driverPodSelector``; without one the rule is inactive. The
pod is looked up in the snapshot, so the state watcher must keep the driver pods there too (it
otherwise only keeps pods that use claims): a pod the snapshot does not have is not a driver pod.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from policies.allocator.nodes import NodeSelectorError, selector_matches
from policies.api.base import NodeSelector, ObjectMeta
from policies.api.core import Node
from policies.api.resource import ResourceClaim, ResourceClaimConsumerReference
from policies.rules.common import a_few
from policies.rules.engine import Context, Finding, Request, RuleUnavailable
from policies.snapshot import Snapshot

DeviceId = tuple[str, str, str]


def node_devices(snapshot: Snapshot, node: str) -> frozenset[DeviceId]:
    """``(driver, pool, device)`` of the devices local to ``node`` (slice or per-device nodeName)."""
    return frozenset(
        (s.spec.driver, s.spec.pool.name, d.name)
        for s in snapshot.slices
        for d in s.spec.devices or ()
        if (d.node_name or s.spec.node_name) == node
    )


def consumers(claim: ResourceClaim) -> list[ResourceClaimConsumerReference]:
    return (claim.status.reserved_for or []) if claim.status is not None else []


def claims_on_node(snapshot: Snapshot, node: Node) -> Iterator[ResourceClaim]:
    """Allocated claims the node's drivers have (or will have) prepared: the allocation's node
    selector matches the node, a device comes from the node's slices, or a consumer pod runs there."""
    local = node_devices(snapshot, node.name)
    pods_here = {p.uid for p in snapshot.pods.values() if p.node_name == node.name}
    for claim in snapshot.allocated_claims():
        assert claim.status is not None and claim.status.allocation is not None
        allocation = claim.status.allocation
        results = (allocation.devices.results or []) if allocation.devices is not None else []
        if (
            _selects(allocation.node_selector, node)
            or any((r.driver, r.pool, r.device) in local for r in results)
            or any(r.uid in pods_here for r in consumers(claim))
        ):
            yield claim


def _selects(selector: NodeSelector | None, node: Node) -> bool:
    """A node selector that names the node; None (usable everywhere) says nothing about this node."""
    if selector is None:
        return False
    try:
        return selector_matches(selector, node.name, node.labels)
    except NodeSelectorError:
        return False


def is_driver_pod(labels: Mapping[str, str], match_labels: Mapping[str, str]) -> bool:
    """Whether a pod with ``labels`` is a DRA driver pod by the configured
    ``driverPodSelector.matchLabels``."""
    return all(labels.get(key) == value for key, value in match_labels.items())


class DrainRule:
    """Deny evicting a DRA driver pod while claims on its node are still reserved by other pods."""

    name = "drain"
    mutating = False

    def applies(self, request: Request, ctx: Context) -> bool:
        return (
            request.group == ""
            and request.resource == "pods"
            and request.sub_resource == "eviction"
            and request.operation == "CREATE"
            and ctx.config.rules.drain.driver_pod_selector is not None
        )

    def costly(self, request: Request, ctx: Context) -> bool:
        return False  # reads one node's claims

    def check(self, request: Request, ctx: Context) -> Sequence[Finding]:
        selector = ctx.config.rules.drain.driver_pod_selector
        assert selector is not None
        if not ctx.snapshot_fresh:
            raise RuleUnavailable("the cluster snapshot is stale: the claims on the pod's node are unknown")
        pod = ctx.snapshot.pods.get((request.namespace, request.name))
        if pod is None or not pod.node_name or not is_driver_pod(pod.labels, selector.match_labels):
            return []
        # A node missing from the snapshot still has its name (matchFields selectors, slices, pods).
        name = pod.node_name
        node = ctx.snapshot.nodes.get(name) or Node(metadata=ObjectMeta(name=name))
        held = [
            claim.key
            for claim in claims_on_node(ctx.snapshot, node)
            if any(r.uid != pod.uid for r in consumers(claim))
        ]
        if not held:
            return []
        return [Finding("deny", (
            f"DRA driver pod {pod.key} on node {node.name} must not be evicted yet: claims {a_few(held)} "
            "are still reserved by workload pods, and the driver must stay to unprepare their devices; "
            "drain the workload pods first, then evict the driver pod"
        ), retry_later=True)]
