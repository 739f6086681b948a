"""One immutable view of the cluster that every decision reads.

The webhook builds a new Snapshot as watch events arrive and swaps it in atomically; a request keeps
the one it started with. The offline commands build one from manifest files. Either way the rules,
the allocator and the dry run see the same shape, so all entry points agree.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Iterator, Mapping, Sequence, ValuesView
from dataclasses import dataclass, field, replace
from functools import cached_property
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Self, TypeVar

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
from policies.api.scheduling import PriorityClass
from policies.footprint import DeviceKey, device_index, yields_node_resources

if TYPE_CHECKING:
    from policies.scheduler.podinfo import NodePods, PodInfo

Key = tuple[str, str]
"""``(namespace, name)`` of a namespaced object."""


K = TypeVar("K")
V = TypeVar("V")


def claim_key(claim: ResourceClaim) -> Key:
    return (claim.namespace or DEFAULT_NAMESPACE, claim.name)


class Grouped(Mapping[K, V]):
    """Objects held in groups (:class:`Namespaced` by namespace, :class:`Devices` by pool).

    Groups make two things cheap: one group's objects (a pod create reads its namespace's claims
    for the quota, not the cluster's 20,000), and a changed copy (:meth:`with_`, the store's
    publish): the copy shares every group's map but those that changed.
    """

    __slots__ = ("_groups", "_len")

    def __init__(self, groups: Mapping[Any, Mapping[K, V]] | None = None) -> None:
        self._groups: Mapping[Any, Mapping[K, V]] = groups or {}
        self._len = sum(len(m) for m in self._groups.values())

    @staticmethod
    def group_of(key: K) -> Any:
        raise NotImplementedError

    @classmethod
    def of(cls, items: Iterable[tuple[K, V]]) -> Self:
        groups: dict[Any, dict[K, V]] = {}
        for key, value in items:
            groups.setdefault(cls.group_of(key), {})[key] = value
        return cls(groups)

    def __getitem__(self, key: K) -> V:
        return self._groups[self.group_of(key)][key]

    def __contains__(self, key: object) -> bool:
        try:
            inner = self._groups.get(self.group_of(key))  # type: ignore[arg-type]
        except (TypeError, IndexError):
            return False
        return inner is not None and key in inner

    def get(self, key: K, default: Any = None) -> Any:
        inner = self._groups.get(self.group_of(key))
        return default if inner is None else inner.get(key, default)

    def __iter__(self) -> Iterator[K]:
        for inner in self._groups.values():
            yield from inner

    def __len__(self) -> int:
        return self._len

    def values(self) -> ValuesView[V]:
        return _Values(self)

    def group(self, group: Any) -> Mapping[K, V]:
        return self._groups.get(group, _NONE)

    def groups(self) -> Iterable[Mapping[K, V]]:
        return self._groups.values()

    def group_items(self) -> Iterable[tuple[Any, Mapping[K, V]]]:
        return self._groups.items()

    def with_(self, changes: Mapping[K, V | None]) -> Self:
        """A copy with ``changes`` written over (None: deleted); only their groups are copied."""
        groups = dict(self._groups)
        copied: set[Any] = set()
        for key, value in changes.items():
            group = self.group_of(key)
            if group not in copied:
                groups[group] = dict(groups.get(group) or {})
                copied.add(group)
            inner = groups[group]
            assert isinstance(inner, dict)
            if value is None:
                inner.pop(key, None)
            else:
                inner[key] = value
        return type(self)({g: inner for g, inner in groups.items() if inner})


class Namespaced(Grouped[Key, V]):
    """Objects by ``(namespace, name)``, held namespace by namespace."""

    __slots__ = ()

    @staticmethod
    def group_of(key: Key) -> str:
        return key[0]

    def namespace(self, namespace: str) -> Mapping[Key, V]:
        """The objects of one namespace (``""`` meaning ``default``, as for keys)."""
        return self.group(namespace or DEFAULT_NAMESPACE)


class Devices(Grouped[DeviceKey, Device]):
    """Every device of the pools' newest generations by ``(driver, pool, device)``, held pool by
    pool. The store makes one from the last (``base``, held weakly) when slices change, saying
    which pools did (``changed``; of those, the ones it put last, being new or removed and
    published again: ``appended``, in its order) and which pools have devices that yield
    node-allocatable resources (``yielding``), so that what is worked out over all devices can be
    brought up to date from the changed pools alone (a pod's review must not walk 40,000 devices)."""

    __slots__ = ("__dict__", "__weakref__", "_base", "_yielding", "appended", "changed")

    def __init__(
        self,
        groups: Mapping[Any, Mapping[DeviceKey, Device]] | None = None,
        base: Devices | None = None,
        changed: frozenset[tuple[str, str]] = frozenset(),
        yielding: frozenset[tuple[str, str]] | None = None,
        appended: tuple[tuple[str, str], ...] = (),
    ) -> None:
        super().__init__(groups)
        self._base = weakref.ref(base) if base is not None else None
        self.changed = changed
        self.appended = appended
        self._yielding = yielding

    @staticmethod
    def group_of(key: DeviceKey) -> tuple[str, str]:
        return key[:2]

    @property
    def base(self) -> Devices | None:
        """The index this one was made from, if still in use (then only ``changed`` differ)."""
        return self._base() if self._base is not None else None

    @cached_property
    def yield_node_resources(self) -> bool:
        """Whether any device declares node-allocatable resources (KEP-5517)."""
        if self._yielding is not None:
            return bool(self._yielding)
        return any(yields_node_resources(d) for d in self.values())


class _Values(ValuesView[V]):
    def __init__(self, mapping: Grouped[Any, V]) -> None:
        super().__init__(mapping)
        self._grouped = mapping

    def __iter__(self) -> Iterator[V]:
        for inner in self._grouped.groups():
            yield from inner.values()


_NONE: Mapping[Any, Any] = MappingProxyType({})


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
    claims: Namespaced[ResourceClaim] = field(default_factory=Namespaced)
    all_claims: tuple[ResourceClaim, ...] = ()
    templates: Mapping[Key, ResourceClaimTemplate] = field(default_factory=dict)
    pods: Namespaced[PodInfo] = field(default_factory=Namespaced)
    pending: Mapping[Key, Pod] = field(default_factory=dict)
    nodes: Mapping[str, Node] = field(default_factory=dict)
    namespaces: Mapping[str, Namespace] = field(default_factory=dict)
    quotas: tuple[ResourceQuota, ...] = ()
    taint_rules: tuple[DeviceTaintRule, ...] = ()
    priority_classes: Mapping[str, PriorityClass] = field(default_factory=dict)
    devices: Devices = field(default_factory=Devices)
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
        priority_classes: dict[str, PriorityClass] = {}
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
            elif isinstance(obj, PriorityClass):
                priority_classes[obj.name] = obj
        built = cls(
            classes=MappingProxyType(classes),
            slices=tuple(slices),
            claims=Namespaced.of((claim_key(c), c) for c in claims),
            all_claims=tuple(claims),
            templates=MappingProxyType(templates),
            nodes=MappingProxyType(nodes),
            namespaces=MappingProxyType(namespaces),
            quotas=tuple(quotas.values()),
            taint_rules=tuple(rules.values()),
            priority_classes=MappingProxyType(priority_classes),
            devices=Devices.of(device_index(slices).items()),
        )
        return built.with_claims_and_pods((), pods) if pods else built

    def with_claims_and_pods(
        self, claims: Sequence[ResourceClaim], pods: Sequence[Pod], records: Sequence[PodInfo] | None = None
    ) -> Snapshot:
        """The snapshot with ``claims`` and ``pods`` written over the objects of the same keys (or
        added), as a placement or a deallocation leaves the cluster: only the nodes of the pods
        written have their sums recomputed. ``records``: the pods' records, when the caller has them
        already (a headroom's thousands of copies)."""
        # Imported here: the scheduler's modules are not loaded by the commands that read no pod
        # (a validate of DRA objects), where importing them was a fifth of the run.
        from policies.scheduler.podinfo import PodInfo, is_pending, moved, pod_key

        written = {claim_key(c): c for c in claims}
        by_key = dict(written)
        kept = [by_key.pop(claim_key(c), c) for c in self.all_claims] if written else list(self.all_claims)
        infos: dict[Key, PodInfo | None] = {}
        pending = dict(self.pending)
        loads = dict(self.node_pods)
        for i, pod in enumerate(pods):
            key = pod_key(pod)
            info = records[i] if records is not None else PodInfo.of(pod)
            moved(loads, infos.get(key) or self.pods.get(key), info)
            infos[key] = info
            pending.pop(key, None)
            if is_pending(pod):
                pending[key] = pod
        return replace(
            self,
            claims=self.claims.with_(written),
            all_claims=(*kept, *by_key.values()),
            pods=self.pods.with_(infos),
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
