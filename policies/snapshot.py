"""One immutable view of the cluster that every decision reads.

The webhook builds a new Snapshot as watch events arrive and swaps it in atomically; a request keeps
the one it started with. The offline commands build one from manifest files. Either way the rules,
the allocator and the dry run see the same shape, so all entry points agree.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from types import MappingProxyType
from typing import TYPE_CHECKING

from policies.api.base import TypedObject
from policies.api.core import Namespace, Node, Pod, ResourceQuota
from policies.api.kinds import DEFAULT_NAMESPACE
from policies.api.resource import (
    Device,
    DeviceClass,
    DeviceTaintRule,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
)
from policies.footprint import DeviceKey, device_index

if TYPE_CHECKING:
    from policies.scheduler.podinfo import NodePods, PodInfo

Key = tuple[str, str]
"""``(namespace, name)`` of a namespaced object."""


def claim_key(claim: ResourceClaim) -> Key:
    return (claim.namespace or DEFAULT_NAMESPACE, claim.name)


@dataclass(frozen=True)
class Snapshot:
    """Cluster objects by kind, in the order they were seen (file order for manifests).

    Slices and ``all_claims`` keep every object even when names repeat: the allocator takes
    them as lists and never keys them by name (upstream's own test table reuses names), so a
    manifest set fed to ``draguard allocate`` must reach it whole. ``claims`` is the cluster's
    view by key (a later object with the same key replaces an earlier one, as an update would),
    for following references. A namespaced object whose manifest names no namespace is keyed
    under ``default``, where kubectl would apply it; the object itself is left as given (upstream
    messages print such a claim as ``name``, not ``default/name``).

    Pods are kept as :class:`PodInfo` records (what decisions read of a pod), and whole only while
    they wait for a node (``pending``: the questions the dry run and audit ask). What is derived
    from many objects is kept beside them, so that a snapshot changed by a few objects
    (:mod:`policies.store`, a dry run's placement) recomputes only what they touch: ``devices``
    (every device of the pools' newest generations) and ``node_pods`` (each node's bound pods with
    their sums).
    """

    classes: Mapping[str, DeviceClass] = field(default_factory=dict)
    slices: tuple[ResourceSlice, ...] = ()
    claims: Mapping[Key, ResourceClaim] = field(default_factory=dict)
    all_claims: tuple[ResourceClaim, ...] = ()
    templates: Mapping[Key, ResourceClaimTemplate] = field(default_factory=dict)
    pods: Mapping[Key, PodInfo] = field(default_factory=dict)
    pending: Mapping[Key, Pod] = field(default_factory=dict)
    nodes: Mapping[str, Node] = field(default_factory=dict)
    namespaces: Mapping[str, Namespace] = field(default_factory=dict)
    quotas: tuple[ResourceQuota, ...] = ()
    taint_rules: tuple[DeviceTaintRule, ...] = ()
    devices: Mapping[DeviceKey, Device] = field(default_factory=dict)
    node_pods: Mapping[str, NodePods] = field(default_factory=dict)

    @classmethod
    def build(cls, objects: Iterable[TypedObject]) -> Snapshot:
        """Sort objects into their kinds; a later object with the same key replaces an earlier one."""
        classes: dict[str, DeviceClass] = {}
        slices: list[ResourceSlice] = []
        claims: list[ResourceClaim] = []
        templates: dict[Key, ResourceClaimTemplate] = {}
        pods: list[Pod] = []
        nodes: dict[str, Node] = {}
        namespaces: dict[str, Namespace] = {}
        quotas: dict[Key, ResourceQuota] = {}
        rules: dict[str, DeviceTaintRule] = {}
        for obj in objects:
            key = (obj.namespace or DEFAULT_NAMESPACE, obj.name)
            if isinstance(obj, DeviceClass):
                classes[obj.name] = obj
            elif isinstance(obj, ResourceSlice):
                slices.append(obj)
            elif isinstance(obj, ResourceClaim):
                claims.append(obj)
            elif isinstance(obj, ResourceClaimTemplate):
                templates[key] = obj
            elif isinstance(obj, Pod):
                pods.append(obj)
            elif isinstance(obj, Node):
                nodes[obj.name] = obj
            elif isinstance(obj, Namespace):
                namespaces[obj.name] = obj
            elif isinstance(obj, ResourceQuota):
                quotas[key] = obj
            elif isinstance(obj, DeviceTaintRule):
                rules[obj.name] = obj
        built = cls(
            classes=MappingProxyType(classes),
            slices=tuple(slices),
            claims=MappingProxyType({claim_key(c): c for c in claims}),
            all_claims=tuple(claims),
            templates=MappingProxyType(templates),
            nodes=MappingProxyType(nodes),
            namespaces=MappingProxyType(namespaces),
            quotas=tuple(quotas.values()),
            taint_rules=tuple(rules.values()),
            devices=MappingProxyType(device_index(slices)),
        )
        return built.with_claims_and_pods((), pods) if pods else built

    def with_claims_and_pods(self, claims: Sequence[ResourceClaim], pods: Sequence[Pod]) -> Snapshot:
        """The snapshot with ``claims`` and ``pods`` written over the objects of the same keys (or
        added), as a placement or a deallocation leaves the cluster: only the nodes of the pods
        written have their sums recomputed."""
        # Imported here: the scheduler's modules are not loaded by the commands that read no pod
        # (a validate of DRA objects), where importing them was a fifth of the run.
        from policies.scheduler.podinfo import PodInfo, is_pending, moved, pod_key

        by_key = {claim_key(c): c for c in claims}
        kept = [by_key.pop(claim_key(c), c) for c in self.all_claims]
        all_claims = (*kept, *by_key.values())
        infos = dict(self.pods)
        pending = dict(self.pending)
        loads = dict(self.node_pods)
        for pod in pods:
            key = pod_key(pod)
            info = PodInfo.of(pod)
            moved(loads, infos.get(key), info)
            infos[key] = info
            pending.pop(key, None)
            if is_pending(pod):
                pending[key] = pod
        return replace(
            self,
            claims=MappingProxyType({claim_key(c): c for c in all_claims}),
            all_claims=tuple(all_claims),
            pods=MappingProxyType(infos),
            pending=MappingProxyType(pending),
            node_pods=MappingProxyType(loads),
        )

    @cached_property
    def _quotas_by_namespace(self) -> Mapping[str, tuple[ResourceQuota, ...]]:
        by_namespace: dict[str, list[ResourceQuota]] = {}
        for quota in self.quotas:
            by_namespace.setdefault(quota.namespace or DEFAULT_NAMESPACE, []).append(quota)
        return {namespace: tuple(quotas) for namespace, quotas in by_namespace.items()}

    def namespace_quotas(self, namespace: str) -> tuple[ResourceQuota, ...]:
        """The ResourceQuotas of ``namespace`` (``""`` meaning ``default``, as for keys), indexed once
        per snapshot: every pod create asks."""
        return self._quotas_by_namespace.get(namespace or DEFAULT_NAMESPACE, ())

    def allocated_claims(self) -> Iterator[ResourceClaim]:
        """Claims with ``status.allocation``: the cluster's allocated state (every one given, as the
        scheduler walks every allocated claim)."""
        for claim in self.all_claims:
            if claim.status is not None and claim.status.allocation is not None:
                yield claim

    def namespace_labels(self, namespace: str) -> Mapping[str, str] | None:
        """Labels of a namespace, or None when the snapshot does not know the namespace."""
        ns = self.namespaces.get(namespace)
        return None if ns is None else (ns.metadata.labels or {})
