"""policies.store: a store updated object by object publishes what Snapshot.build makes of the same
objects, and never changes a snapshot it published.

The live state applies watch events one at a time to a :class:`Store`; the offline commands build a
:class:`Snapshot` from all objects at once. Both must agree, or the webhook decides differently from
``draguard validate``/``allocate`` on the same cluster. A seeded random walk of puts and deletes (slices
split over several per pool, generations bumped, slices moved between pools, per-device node names,
devices that hand out node resources; claims with and without a namespace; pods bound, pending,
finished, moved, being deleted; nodes, namespaces, quotas, templates, PriorityClasses, DeviceClasses,
taint rules) is applied to a store and to a plain dict of the current objects; at every publish the
store's snapshot is compared with ``Snapshot.build`` of the dict, field by field.

Orders the store does not promise are compared as sets: ``all_claims`` and ``quotas`` come grouped by
namespace, a node's pods in the order kube-scheduler's cache keeps them (an updated pod is removed and
added last, upstream ``cache.updatePod``), and a node whose last pod left keeps an empty entry.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from typing import Any

import pytest

from policies.api.base import TypedObject
from policies.api.core import Pod
from policies.api.kinds import decode
from policies.api.resource import ResourceSlice
from policies.footprint import yields_node_resources
from policies.scheduler.podinfo import PodInfo
from policies.snapshot import Devices, Snapshot
from policies.store import Store, key_of

DRIVERS = ("gpu.example.com", "nic.example.com")
NODES = tuple(f"node-{i}" for i in range(5))
NAMESPACES = ("team-a", "team-b", "default")
DRA = "resource.k8s.io/v1"
STEPS = 700


# --- objects, in the style of the DRA example driver's demos ---------------------------------------


def device(rng: random.Random, index: int, owner: str, per_device: bool) -> dict[str, Any]:
    """A device named after its slice: names are unique in a pool (the API server's validation)."""
    obj: dict[str, Any] = {
        "name": f"{owner}-gpu-{index}",
        "attributes": {
            "index": {"int": index},
            "model": {"string": rng.choice(["LATEST-GPU-MODEL", "OLDER-GPU-MODEL"])},
            "driverVersion": {"version": rng.choice(["1.0.0", "1.1.0"])},
        },
        "capacity": {"memory": {"value": rng.choice(["40Gi", "80Gi"])}},
    }
    if per_device:
        obj["nodeName"] = rng.choice(NODES)
    if rng.random() < 0.2:
        obj["nodeAllocatableResources"] = {"memory": {"overhead": {"perPod": "1Gi"}}}
    return obj


def resource_slice(
    rng: random.Random, name: str, driver: str, pool: str, generation: int, count: int
) -> dict[str, Any]:
    per_device = pool == "fabric"  # a network-attached pool: each device names its node
    spec: dict[str, Any] = {
        "driver": driver,
        "pool": {"name": pool, "generation": generation, "resourceSliceCount": count},
        "devices": [device(rng, i, name, per_device) for i in range(rng.randrange(0, 4))],
    }
    if per_device:
        spec["perDeviceNodeSelection"] = True
    else:
        spec["nodeName"] = pool
    return {"apiVersion": DRA, "kind": "ResourceSlice", "metadata": {"name": name}, "spec": spec}


def claim(rng: random.Random, name: str, namespace: str | None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "uid": f"uid-{name}-{rng.getrandbits(16)}"}
    if namespace is not None:
        metadata["namespace"] = namespace
    obj: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": metadata,
        "spec": {
            "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}
        },
    }
    if rng.random() < 0.5:
        node = rng.choice(NODES)
        obj["status"] = {
            "allocation": {
                "devices": {
                    "results": [
                        {
                            "request": "gpu",
                            "driver": DRIVERS[0],
                            "pool": node,
                            "device": f"gpu-{rng.randrange(3)}",
                        }
                    ]
                },
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
                    ]
                },
            }
        }
    return obj


def pod(rng: random.Random, index: int, namespace: str) -> dict[str, Any]:
    name = f"pod-{index}"
    container: dict[str, Any] = {
        "name": "ctr0",
        "image": "ubuntu:22.04",
        "command": ["bash", "-c"],
        "args": ["trap 'exit 0' TERM; sleep 9999 & wait"],
        "resources": {
            "requests": {"cpu": f"{rng.randrange(1, 8) * 100}m", "memory": f"{rng.randrange(1, 9)}Gi"}
        },
    }
    if rng.random() < 0.3:
        container["resources"]["requests"]["example.com/widget"] = str(rng.randrange(1, 3))
    if rng.random() < 0.4:  # a port of its own: two pods of one node never hold the same one
        container["ports"] = [{"containerPort": 8080, "hostPort": 20000 + index, "protocol": "TCP"}]
    spec: dict[str, Any] = {"containers": [container], "priority": rng.choice([0, 100, 1000])}
    if rng.random() < 0.3:
        spec["initContainers"] = [
            {
                "name": "sidecar",
                "image": "busybox",
                "restartPolicy": "Always",
                "resources": {"requests": {"cpu": "50m"}},
                "ports": [{"containerPort": 9090, "hostPort": 40000 + index}],
            }
        ]
    status: dict[str, Any] = {}
    if rng.random() < 0.5:
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "single-gpu"}]
        container["resources"]["claims"] = [{"name": "gpu"}]
        status["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": f"{name}-gpu-x7k2p"}]
    if rng.random() < 0.75:
        spec["nodeName"] = rng.choice(NODES)
    phase = rng.choice(["Running", "Running", "Pending", "Succeeded", "Failed", None])
    if phase is not None:
        status["phase"] = phase
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{name}-{rng.getrandbits(24)}",
        "resourceVersion": str(rng.getrandbits(30)),
        "labels": {"app": rng.choice(["trainer", "inference"]), "pod-index": str(index % 3)},
    }
    if rng.random() < 0.15:
        metadata["deletionTimestamp"] = "2026-11-22T09:00:00Z"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": status}


def other(rng: random.Random) -> dict[str, Any]:
    """A node, namespace, quota, template, PriorityClass, DeviceClass or taint rule."""
    kind = rng.choice(
        ["Node", "Namespace", "ResourceQuota", "Template", "PriorityClass", "DeviceClass", "Taint"]
    )
    n = rng.randrange(4)
    if kind == "Node":
        labels = {"kubernetes.io/hostname": NODES[n], "zone": rng.choice("ab")}
        return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODES[n], "labels": labels}}
    if kind == "Namespace":
        return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACES[n % 3]}}
    if kind == "ResourceQuota":
        return {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": f"quota-{n % 2}", "namespace": rng.choice(NAMESPACES)},
            "spec": {"hard": {"requests.cpu": str(rng.randrange(1, 64))}},
        }
    if kind == "Template":
        return {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": f"gpu-{n}", "namespace": rng.choice(NAMESPACES)},
            "spec": {
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}
            },
        }
    if kind == "PriorityClass":
        return {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": f"tier-{n}"},
            "value": rng.randrange(1000),
        }
    if kind == "DeviceClass":
        expression = f"device.driver == '{rng.choice(DRIVERS)}'"
        return {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": f"class-{n}"},
            "spec": {"selectors": [{"cel": {"expression": expression}}]},
        }
    return {
        "apiVersion": "resource.k8s.io/v1beta2",
        "kind": "DeviceTaintRule",
        "metadata": {"name": f"maintenance-{n}"},
        "spec": {
            "deviceSelector": {"driver": DRIVERS[0]},
            "taint": {"key": "maintenance", "effect": "NoSchedule"},
        },
    }


# --- the walk ---------------------------------------------------------------------------------------


class Walk:
    """The store and, beside it, the current objects by kind and key in a plain dict, changed alike."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.store = Store()
        self.objects: dict[str, dict[tuple[str, str], TypedObject]] = {}
        self.generations: dict[tuple[str, str], int] = {}
        self.touched_pools: set[tuple[str, str]] = set()

    def put(self, raw: dict[str, Any]) -> None:
        obj = decode(raw)
        key = key_of(obj)
        before = self.objects.get(obj.kind, {}).get(key)
        self.objects.setdefault(obj.kind, {})[key] = obj
        if isinstance(obj, Pod):
            self.store.put_pod(PodInfo.of(obj), obj)  # as webhook.state stores a pod read whole
            return
        self.store.put(obj)
        if obj.kind == "ResourceSlice":
            self._touched(before, obj)

    def delete(self, kind: str) -> None:
        objects = self.objects.get(kind)
        if not objects:
            return
        key = self.rng.choice(list(objects))
        before = objects.pop(key)
        self.store.delete(kind, key)
        if kind == "ResourceSlice":
            self._touched(before, None)

    def _touched(self, *slices: Any) -> None:
        self.touched_pools |= {(s.spec.driver, s.spec.pool.name) for s in slices if s is not None}

    def step(self) -> None:
        rng = self.rng
        roll = rng.random()
        if roll < 0.3:
            self.slice_step()
        elif roll < 0.45:
            namespace = rng.choice(["team-a", "team-b", None])  # None: a manifest that names none
            self.put(claim(rng, f"claim-{rng.randrange(6)}", namespace))
        elif roll < 0.75:
            index = rng.randrange(24)
            self.put(pod(rng, index, ("team-a", "team-b")[index % 2]))
        elif roll < 0.85:
            self.put(other(rng))
        else:
            self.delete(
                rng.choice(
                    [
                        "Pod",
                        "Pod",
                        "ResourceClaim",
                        "Node",
                        "ResourceQuota",
                        "PriorityClass",
                        "Namespace",
                        "ResourceClaimTemplate",
                        "DeviceClass",
                        "DeviceTaintRule",
                    ]
                )
            )

    def slice_step(self) -> None:
        """A driver publishing a pool: a new generation (some of its slices, others left at the
        old one), an update in place, a slice moved to another pool, or a slice deleted."""
        rng = self.rng
        driver = rng.choice(DRIVERS)
        pool = rng.choice([*NODES[:3], "fabric"])
        count = rng.randrange(1, 4)
        action = rng.random()
        if action < 0.45:
            generation = self.generations[(driver, pool)] = self.generations.get((driver, pool), 0) + 1
            for i in sorted(rng.sample(range(count), rng.randrange(1, count + 1))):
                self.put(resource_slice(rng, f"{pool}-{driver}-{i}", driver, pool, generation, count))
        elif action < 0.7:
            generation = self.generations.get((driver, pool), 1)
            i = rng.randrange(count)
            self.put(resource_slice(rng, f"{pool}-{driver}-{i}", driver, pool, generation, count))
        elif action < 0.8 and self.objects.get("ResourceSlice"):
            moved = rng.choice(list(self.objects["ResourceSlice"].values()))
            generation = self.generations.get((driver, pool), 1)
            self.put(resource_slice(rng, moved.name, driver, pool, generation, count))
        else:
            self.delete("ResourceSlice")

    def built(self) -> Snapshot:
        return Snapshot.build(obj for objects in self.objects.values() for obj in objects.values())


# --- comparing ---------------------------------------------------------------------------------------


def by_key(objects: Any) -> dict[tuple[str, str, str], Any]:
    return {(o.kind, *key_of(o)): o for o in objects}


def assert_same(got: Snapshot, want: Snapshot) -> None:
    for name in ("classes", "templates", "nodes", "namespaces", "priority_classes", "pending"):
        assert dict(getattr(got, name)) == dict(getattr(want, name)), name
    assert got.slices == want.slices  # in the order the API server's objects were last added
    assert got.taint_rules == want.taint_rules
    assert by_key(got.quotas) == by_key(want.quotas) and len(got.quotas) == len(want.quotas)
    for namespace in NAMESPACES:
        assert got.namespace_quotas(namespace) == want.namespace_quotas(namespace)
    assert dict(got.claims) == dict(want.claims) and len(got.claims) == len(want.claims)
    for namespace in (*NAMESPACES, ""):
        assert dict(got.claims.namespace(namespace)) == dict(want.claims.namespace(namespace)), namespace
    assert by_key(got.all_claims) == by_key(want.all_claims) and len(got.all_claims) == len(want.all_claims)
    assert by_key(got.allocated_claims()) == by_key(want.allocated_claims())
    assert dict(got.pods) == dict(want.pods) and len(got.pods) == len(want.pods)
    for namespace in NAMESPACES:
        assert dict(got.pods.namespace(namespace)) == dict(want.pods.namespace(namespace))
    assert loads(got) == loads(want)
    assert devices(got.devices) == devices(want.devices)
    assert dict(got.devices) == dict(want.devices) and len(got.devices) == len(want.devices)
    assert dict(got.devices) == newest_devices(want.slices)
    assert got.devices.yield_node_resources == want.devices.yield_node_resources
    assert want.devices.yield_node_resources == any(yields_node_resources(d) for d in want.devices.values())


def newest_devices(slices: Iterable[ResourceSlice]) -> dict[tuple[str, str, str], Any]:
    """Every device of each pool's highest generation, older slices of the pool left out (dra
    reference 1.3: a driver publishing a new generation replaces the pool's slices one by one)."""
    newest: dict[tuple[str, str], int] = {}
    for s in slices:
        pool = (s.spec.driver, s.spec.pool.name)
        newest[pool] = max(newest.get(pool, 0), s.spec.pool.generation)
    return {
        (s.spec.driver, s.spec.pool.name, d.name): d
        for s in slices
        if s.spec.pool.generation == newest[(s.spec.driver, s.spec.pool.name)]
        for d in s.spec.devices or ()
    }


def loads(snapshot: Snapshot) -> dict[str, Any]:
    """Each node's pods (as a set) and their sums; a node without pods as no entry."""
    return {
        node: (
            {(p.namespace, p.name): p for p in found.pods},
            found.requested,
            found.non_zero_requested,
            found.used_ports,
        )
        for node, found in snapshot.node_pods.items()
        if found.pods
    }


def devices(index: Devices) -> dict[tuple[str, str], dict[Any, Any]]:
    """Devices by pool; a pool whose slices list no device (the store keeps an empty map) as none."""
    return {pool: dict(group) for pool, group in index.group_items() if group}


def fingerprint(snapshot: Snapshot) -> tuple[Any, ...]:
    """What a snapshot holds, by identity: it must not change once published."""

    def ids(mapping: Mapping[Any, Any]) -> tuple[tuple[Any, int], ...]:
        return tuple((k, id(v)) for k, v in mapping.items())

    return (
        ids(snapshot.classes), tuple(map(id, snapshot.slices)), ids(snapshot.claims),
        tuple(map(id, snapshot.all_claims)), ids(snapshot.templates), ids(snapshot.pods),
        ids(snapshot.pending), ids(snapshot.nodes), ids(snapshot.namespaces), tuple(map(id, snapshot.quotas)),
        tuple(map(id, snapshot.taint_rules)), ids(snapshot.priority_classes),
        tuple((pool, ids(group)) for pool, group in snapshot.devices.group_items()),
        snapshot.devices.changed, snapshot.devices.yield_node_resources,
        tuple((node, tuple(map(id, p.pods)), p.requested, p.non_zero_requested, p.used_ports)
              for node, p in snapshot.node_pods.items()),
        tuple((ns, ids(group)) for ns, group in snapshot.claims.group_items()),
        tuple((ns, ids(group)) for ns, group in snapshot.pods.group_items()),
    )  # fmt: skip


def assert_changed_pools(got: Devices, before: Devices, touched: set[tuple[str, str]]) -> None:
    """``changed`` names every pool whose devices differ from ``base`` (by map, as the selectors
    rule compares them), and only pools touched since: beside those, only a pool that came and went
    between two publishes (absent from both)."""
    assert got.base is before
    pools = {pool for pool, _ in got.group_items()} | {pool for pool, _ in before.group_items()}
    differing = {pool for pool in pools if got.group(pool) is not before.group(pool)}
    assert differing <= got.changed, differing - got.changed
    assert got.changed <= touched, got.changed - touched
    for pool in got.changed - differing:
        assert not got.group(pool) and not before.group(pool), pool


def mixed_generations(snapshot: Snapshot) -> set[tuple[str, str]]:
    """Pools with slices of more than one generation (the older ones must not count)."""
    seen: dict[tuple[str, str], set[int]] = {}
    for s in snapshot.slices:
        seen.setdefault((s.spec.driver, s.spec.pool.name), set()).add(s.spec.pool.generation)
    return {pool for pool, generations in seen.items() if len(generations) > 1}


@pytest.mark.parametrize("seed", [23, 5517, 4815])
def test_a_store_updated_object_by_object_publishes_what_build_makes_of_the_same_objects(seed: int) -> None:
    walk = Walk(seed)
    published: list[tuple[Snapshot, tuple[Any, ...]]] = []
    previous = walk.store.snapshot()
    checked = changed_pools = mixed = 0
    for step in range(STEPS):
        walk.step()
        if walk.rng.random() < 0.3 or step == STEPS - 1:
            snapshot = walk.store.snapshot()
            assert_same(snapshot, walk.built())
            if snapshot.devices is not previous.devices:
                assert_changed_pools(snapshot.devices, previous.devices, walk.touched_pools)
                changed_pools += len(snapshot.devices.changed)
            else:
                assert not walk.touched_pools
            mixed += len(mixed_generations(snapshot))
            walk.touched_pools = set()
            if step % 5 == 0:
                published.append((snapshot, fingerprint(snapshot)))
            previous = snapshot
            checked += 1
    for snapshot, then in published:
        assert fingerprint(snapshot) == then  # a snapshot taken earlier never changes afterwards
    # The walk reached the cases it is meant to: many publishes, pools changing, pods of every kind.
    final = walk.built()
    assert checked > 100 and changed_pools > 50 and mixed > 50
    assert final.pending and any(p.deleting for p in final.pods.values())
    assert any(p.phase in ("Succeeded", "Failed") and p.node_name for p in final.pods.values())
    assert any(not c.metadata.namespace for c in final.all_claims)
