"""The cluster's objects, kept current one change at a time and published as Snapshots.

The webhook's live state (list and watch) applies every event here as it arrives: the change costs
what it touches (the object, its pool's devices, its node's pod sums), never a rebuild of the whole
cluster. :meth:`Store.snapshot` then publishes: the kinds changed since the last publish get a
fresh copy of their map (a C-level dict copy, about a millisecond for 100,000 pods, once per
batch of events), the others are shared with the previous Snapshot. Snapshots are immutable, so a
request keeps the one it started with while the store moves on.

Unlike :meth:`Snapshot.build` (manifests, where names may repeat and every object counts), the
store holds one object per key, as the API server does. Not thread-safe: the caller serializes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import Any

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
from policies.scheduler.podinfo import NodePods, PodInfo, moved
from policies.snapshot import Devices, Key, Namespaced, Snapshot

KINDS: Mapping[str, type[TypedObject]] = MappingProxyType(
    {
        "DeviceClass": DeviceClass,
        "ResourceSlice": ResourceSlice,
        "ResourceClaim": ResourceClaim,
        "ResourceClaimTemplate": ResourceClaimTemplate,
        "Pod": Pod,
        "Node": Node,
        "Namespace": Namespace,
        "ResourceQuota": ResourceQuota,
        "DeviceTaintRule": DeviceTaintRule,
        "PriorityClass": PriorityClass,
    }
)
PoolKey = tuple[str, str]


def key_of(obj: TypedObject | PodInfo) -> Key:
    """The store's key: ``(namespace or default, name)``, ``("", name)`` for cluster-scoped kinds."""
    namespace = obj.namespace
    if isinstance(obj, PodInfo | ResourceClaim | ResourceClaimTemplate | ResourceQuota):
        namespace = namespace or DEFAULT_NAMESPACE
    return (namespace, obj.name)


def _version(obj: Any) -> str:
    return obj.version if isinstance(obj, PodInfo) else obj.metadata.resource_version or ""


class _ByNamespace:
    """One kind's objects by namespace, and the namespaces changed since the last publish, whose
    maps alone the next publish copies."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[Key, Any]] = {}
        self._published: dict[str, Mapping[Key, Any]] = {}
        self._changed: set[str] = set()

    def __len__(self) -> int:
        return sum(len(inner) for inner in self.objects.values())

    def __iter__(self) -> Iterator[Key]:
        for inner in self.objects.values():
            yield from inner

    def get(self, key: Key) -> Any:
        inner = self.objects.get(key[0])
        return None if inner is None else inner.get(key)

    def values(self) -> Iterator[Any]:
        for inner in self.objects.values():
            yield from inner.values()

    def __setitem__(self, key: Key, value: Any) -> None:
        self.objects.setdefault(key[0], {})[key] = value
        self._changed.add(key[0])

    def pop(self, key: Key) -> Any:
        inner = self.objects.get(key[0])
        found = None if inner is None else inner.pop(key, None)
        if found is not None:
            self._changed.add(key[0])
            if not inner:
                del self.objects[key[0]]
        return found

    def publish(self) -> Namespaced[Any]:
        for namespace in self._changed:
            inner = self.objects.get(namespace)
            if inner:
                self._published[namespace] = MappingProxyType(dict(inner))
            else:
                self._published.pop(namespace, None)
        self._changed = set()
        return Namespaced(dict(self._published))


class Store:
    """Objects by kind and key (pods as :class:`PodInfo`, pending pods also whole), with each
    pool's devices and each node's pod sums kept current."""

    def __init__(self) -> None:
        self._objects: dict[str, dict[Key, Any] | _ByNamespace] = {
            kind: _ByNamespace() if kind in _NAMESPACED else {} for kind in KINDS
        }
        self._pending: dict[Key, Pod] = {}
        self._loads: dict[str, NodePods] = {}
        self._pools: dict[PoolKey, dict[Key, ResourceSlice]] = {}
        # Each pool's devices: a new dict when the pool changes, never changed after, so that
        # published snapshots share it.
        self._pool_devices: dict[PoolKey, Mapping[DeviceKey, Device]] = {}
        self._changed_pools: set[PoolKey] = set()
        self._appended: dict[PoolKey, None] = {}  # pools put last since the last snapshot, in order
        self._yielding: set[PoolKey] = set()  # pools with a device that yields node resources
        self._dirty: set[str] = set(KINDS)
        self._published = Snapshot()

    def __len__(self) -> int:
        return sum(len(objects) for objects in self._objects.values())

    def count(self, kind: str) -> int:
        return len(self._objects[kind])

    def version(self, kind: str, key: Key) -> str | None:
        """The resourceVersion of the stored object, None when there is none: a re-list reuses an
        object whose version did not change instead of decoding it again."""
        found = self._objects[kind].get(key)
        return None if found is None else _version(found)

    def put(self, obj: TypedObject) -> None:
        """Add or replace an object of any kind but Pod (see :meth:`put_pod`)."""
        kind = type(obj).__name__
        key = key_of(obj)
        before = self._objects[kind].get(key)
        self._objects[kind][key] = obj
        self._dirty.add(kind)
        if isinstance(obj, ResourceSlice):
            self._slice_changed(before, obj)

    def put_pod(self, info: PodInfo, whole: Pod | None = None) -> None:
        """Add or replace a pod; ``whole``: the pod itself, kept while it waits for a node."""
        key = key_of(info)
        moved(self._loads, self._objects["Pod"].get(key), info)
        self._objects["Pod"][key] = info
        self._pending.pop(key, None)
        if whole is not None and info.pending:
            self._pending[key] = whole
        self._dirty.add("Pod")

    def delete(self, kind: str, key: Key) -> None:
        objects = self._objects[kind]
        before = objects.pop(key) if isinstance(objects, _ByNamespace) else objects.pop(key, None)
        if before is None:
            return
        self._dirty.add(kind)
        if kind == "Pod":
            moved(self._loads, before, None)
            self._pending.pop(key, None)
        elif kind == "ResourceSlice":
            self._slice_changed(before, None)

    def retain(self, kind: str, keys: Iterable[Key]) -> None:
        """Delete the objects of ``kind`` not in ``keys`` (what a completed re-list did not see)."""
        kept = set(keys)
        for key in [k for k in self._objects[kind] if k not in kept]:
            self.delete(kind, key)

    def _slice_changed(self, before: ResourceSlice | None, after: ResourceSlice | None) -> None:
        """Recompute the devices of the pools the slice left and joined, from their slices."""
        pools = {(s.spec.driver, s.spec.pool.name): s for s in (before, after) if s is not None}
        for pool, slc in pools.items():
            key = key_of(slc)
            members = self._pools.setdefault(pool, {})
            if after is not None and pool == (after.spec.driver, after.spec.pool.name):
                members[key] = after
            else:
                members.pop(key, None)
            self._changed_pools.add(pool)
            self._yielding.discard(pool)
            if not members:
                del self._pools[pool]
            index = device_index(members.values())
            if not index:  # no devices: no group, as Snapshot.build of the same slices has none
                self._pool_devices.pop(pool, None)
                self._appended.pop(pool, None)
                continue
            if pool not in self._pool_devices:
                self._appended[pool] = None
            self._pool_devices[pool] = index
            if any(yields_node_resources(d) for d in index.values()):
                self._yielding.add(pool)

    def snapshot(self) -> Snapshot:
        """The objects as they are now; the kinds unchanged since the last call share its maps."""
        if not self._dirty:
            return self._published
        dirty, objects = self._dirty, self._objects
        changes: dict[str, Any] = {}
        if "DeviceClass" in dirty:
            changes["classes"] = _names(objects["DeviceClass"])
        if "ResourceSlice" in dirty:
            changes["slices"] = tuple(objects["ResourceSlice"].values())
            changes["devices"] = Devices(
                dict(self._pool_devices),
                self._published.devices,
                frozenset(self._changed_pools),
                frozenset(self._yielding),
                tuple(self._appended),
            )
            self._changed_pools, self._appended = set(), {}
        if "ResourceClaim" in dirty:
            changes["claims"] = claims = _published(objects["ResourceClaim"])
            changes["all_claims"] = tuple(claims.values())
        if "ResourceClaimTemplate" in dirty:
            changes["templates"] = _published(objects["ResourceClaimTemplate"])
        if "Pod" in dirty:
            changes["pods"] = _published(objects["Pod"])
            changes["pending"] = MappingProxyType(dict(self._pending))
            changes["node_pods"] = MappingProxyType(dict(self._loads))
        if "Node" in dirty:
            changes["nodes"] = _names(objects["Node"])
        if "Namespace" in dirty:
            changes["namespaces"] = _names(objects["Namespace"])
        if "ResourceQuota" in dirty:
            changes["quotas"] = tuple(objects["ResourceQuota"].values())
        if "DeviceTaintRule" in dirty:
            changes["taint_rules"] = tuple(objects["DeviceTaintRule"].values())
        if "PriorityClass" in dirty:
            changes["priority_classes"] = _names(objects["PriorityClass"])
        self._published = replace(self._published, **changes)
        self._dirty = set()
        return self._published


_NAMESPACED = frozenset({"ResourceClaim", "ResourceClaimTemplate", "Pod", "ResourceQuota"})


def _published(objects: dict[Key, Any] | _ByNamespace) -> Namespaced[Any]:
    assert isinstance(objects, _ByNamespace)
    return objects.publish()


def _names(objects: dict[Key, Any] | _ByNamespace) -> Mapping[str, Any]:
    """Cluster-scoped objects by name, as the Snapshot keys them."""
    assert isinstance(objects, dict)
    return MappingProxyType({name: obj for (_, name), obj in objects.items()})
