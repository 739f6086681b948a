"""Headroom against the plain path: copies placed one at a time with the dry run itself.

The reference places copy after copy as ``allocate --sequence`` does: a whole dry run per copy on a
snapshot rebuilt from the previous placement (:func:`place`, a new :class:`Prepared`), the best
node taken (the first of equals in node order). Headroom's shortcuts (verdicts and scores kept
for the nodes a placement did not touch) must give the same nodes, in the same order, and the
same message for the copy that does not fit. Shapes: whole GPUs, partitions sharing counters,
consumable capacity, taints, a network pool every node reaches, host ports, topology spread, and
seeded mixes of them. Quotas are checked against the test's own arithmetic.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime
from typing import Any

import pytest

from policies.api.core import Pod
from policies.api.defaults import apply_defaults
from policies.api.kinds import decode
from policies.dryrun import DryRun, FeatureGates, Prepared, Question, with_uid
from policies.dryrun.headroom import MAX, QUOTA, SCHEDULER, Headroom, headroom
from policies.dryrun.run import place
from policies.priority import admitted
from policies.snapshot import Snapshot

V1 = "resource.k8s.io/v1"
GPU = "gpu.example.com"
NIC = "nic.example.com"
ZONE = "topology.kubernetes.io/zone"
NS = "team-a"


# --- objects --------------------------------------------------------------------------------------


def node(name: str, zone: str, cpu: str = "16", **spec: Any) -> dict[str, Any]:
    labels = {ZONE: zone, "kubernetes.io/hostname": name}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
        "status": {"allocatable": {"cpu": cpu, "memory": "64Gi", "pods": "110"}},
    }


def pool_slice(
    name: str, driver: str, pool: str, count: int = 1, node_name: str | None = None, **spec: Any
) -> dict[str, Any]:
    where: dict[str, Any] = {"nodeName": node_name} if node_name else {"allNodes": True}
    body = {"driver": driver, "pool": {"name": pool, "generation": 1, "resourceSliceCount": count}}
    return {
        "apiVersion": V1,
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {**body, **where, **spec},
    }


def gpus(node_name: str, count: int, tainted: int = 0) -> dict[str, Any]:
    devices: list[dict[str, Any]] = [
        {"name": f"gpu-{i}", "attributes": {"index": {"int": i}}} for i in range(count)
    ]
    for device in devices[:tainted]:
        device["taints"] = [{"key": "example.com/unhealthy", "effect": "NoSchedule"}]
    return pool_slice(f"{node_name}-gpus", GPU, node_name, node_name=node_name, devices=devices)


def partitioned(node_name: str) -> list[dict[str, Any]]:
    """One GPU as partitions sharing its counters (8 memory units): whole, two halves, four
    quarters; attribute ``units`` the memory each takes. Counters in a slice of their own."""
    sizes = [(8, "whole"), (4, "half-0"), (4, "half-1"), *((2, f"quarter-{i}") for i in range(4))]
    devices = [
        {
            "name": name,
            "attributes": {"units": {"int": units}},
            "consumesCounters": [{"counterSet": "gpu-0", "counters": {"memory": {"value": str(units)}}}],
        }
        for units, name in sizes
    ]
    counters = [{"name": "gpu-0", "counters": {"memory": {"value": "8"}}}]
    pool = f"{node_name}-mig"
    return [
        pool_slice(f"{pool}-counters", GPU, pool, 2, node_name, sharedCounters=counters),
        pool_slice(f"{pool}-devices", GPU, pool, 2, node_name, devices=devices),
    ]


def shared_nic(node_name: str, bandwidth: str) -> dict[str, Any]:
    device = {
        "name": "nic-0",
        "allowMultipleAllocations": True,
        "capacity": {"bandwidth": {"value": bandwidth}},
    }
    return pool_slice(f"{node_name}-nics", NIC, f"{node_name}-nics", node_name=node_name, devices=[device])


def network_pool(count: int) -> dict[str, Any]:
    """Devices on a fabric every node reaches (no nodeName)."""
    return pool_slice("fabric", NIC, "fabric", devices=[{"name": f"link-{i}"} for i in range(count)])


def device_class(name: str, driver: str, expression: str = "") -> dict[str, Any]:
    selector = f'device.driver == "{driver}"' + (f" && {expression}" if expression else "")
    return {
        "apiVersion": V1,
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": selector}}]},
    }


UNITS = "has(device.attributes['gpu.example.com'].units)"
CLASSES = [
    device_class("gpu", GPU, f"!{UNITS}"),
    device_class("mig-quarter", GPU, f"{UNITS} && device.attributes['gpu.example.com'].units == 2"),
    device_class("mig-half", GPU, f"{UNITS} && device.attributes['gpu.example.com'].units == 4"),
    device_class("nic", NIC),
]


def template(name: str, requests: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": V1,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"spec": {"devices": {"requests": requests}}},
    }


def request(name: str, device_class_name: str, **exactly: Any) -> dict[str, Any]:
    return {"name": name, "exactly": {"deviceClassName": device_class_name, **exactly}}


def sub(name: str, device_class_name: str) -> dict[str, Any]:
    """A subrequest of firstAvailable."""
    return {"name": name, "deviceClassName": device_class_name}


def pod(name: str = "train", templates: tuple[str, ...] = (), cpu: str = "1", **spec: Any) -> dict[str, Any]:
    claims = [{"name": t, "resourceClaimTemplateName": t} for t in templates]
    container: dict[str, Any] = {
        "name": "main",
        "image": "registry.example.com/train:1",
        "resources": {"requests": {"cpu": cpu}, "claims": [{"name": t} for t in templates]},
    }
    container.update(spec.pop("container", {}))
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": {"app": name}},
        "spec": {"resourceClaims": claims, "containers": [container], **spec},
    }


def prepared(objects: list[dict[str, Any]]) -> tuple[Prepared, Pod]:
    """The cluster as the API server stores it, and its one pending pod."""
    stored, _ = admitted([apply_defaults(decode(o), datetime.now(UTC)) for o in objects])
    snapshot = Snapshot.build(stored)
    (pending,) = snapshot.pending.values()
    return Prepared.of(snapshot, FeatureGates()), with_uid(pending)


def one_by_one(ready: Prepared, asked: Pod, limit: int) -> tuple[list[str], str]:
    """The reference: a whole dry run per copy on the snapshot the previous copies left."""
    nodes: list[str] = []
    while len(nodes) < limit:
        name = f"{asked.name}-copy-{len(nodes) + 1}"
        meta = asked.metadata.model_copy(update={"name": name, "uid": f"dryrun-{asked.namespace}-{name}"})
        outcome = DryRun(ready).outcome(Question(asked.model_copy(update={"metadata": meta})))
        if not outcome.fitting:
            return nodes, outcome.message
        best = outcome.preferred()[0]
        nodes.append(best)
        ready = ready.after(place(outcome, best))
    return nodes, ""


def agrees(objects: list[dict[str, Any]], limit: int = 200) -> Headroom:
    ready, asked = prepared(objects)
    expected, message = one_by_one(ready, asked, limit)
    found = headroom(ready, asked, limit=limit)
    assert found.nodes == expected
    if message:
        assert (found.stop.by, found.stop.message) == (SCHEDULER, message)
    else:
        assert found.stop.by == MAX
    return found


# --- shapes ---------------------------------------------------------------------------------------


def zones(count: int) -> list[tuple[str, str]]:
    return [(f"node-{i}", "ab"[i % 2]) for i in range(count)]


def test_whole_gpus_fill_the_nodes_as_the_scores_prefer() -> None:
    objects = [*CLASSES, template("gpu", [request("g", "gpu")]), pod(templates=("gpu",))]
    for i, (name, zone) in enumerate(zones(6)):
        objects += [node(name, zone, cpu=str(2 + i)), gpus(name, i % 3 + 1)]
    found = agrees(objects)
    assert len(found.nodes) == 1 + 2 + 3 + 1 + 2 + 3  # every GPU (cpu suffices)
    assert "cannot allocate all claims" in found.stop.message


def test_cpu_runs_out_before_the_gpus() -> None:
    objects = [*CLASSES, template("gpu", [request("g", "gpu")]), pod(templates=("gpu",), cpu="3")]
    for name, zone in zones(3):
        objects += [node(name, zone, cpu="7"), gpus(name, 4)]
    found = agrees(objects)
    assert len(found.nodes) == 3 * 2
    assert "Insufficient cpu" in found.stop.message


def test_partitions_share_their_counters() -> None:
    objects = [*CLASSES, template("q", [request("q", "mig-quarter")]), pod(templates=("q",))]
    objects += [node("node-0", "a"), *partitioned("node-0"), node("node-1", "b"), *partitioned("node-1")]
    found = agrees(objects)
    assert len(found.nodes) == 2 * 4


def test_halves_after_quarters_took_the_counters() -> None:
    """Two quarter claims per pod: a half is left per GPU and never fits the pod's second claim."""
    objects = [*CLASSES, template("h", [request("h", "mig-half", count=2)]), pod(templates=("h",))]
    objects += [node("node-0", "a"), *partitioned("node-0"), node("node-1", "b"), gpus("node-1", 2)]
    found = agrees(objects)
    assert found.nodes == ["node-0"]


def shared_links() -> list[dict[str, Any]]:
    """Two nodes with a shareable NIC of 100G and 40G, and a pod taking 30G of one."""
    share = request("link", "nic", capacity={"requests": {"bandwidth": "30G"}})
    objects = [*CLASSES, template("link", [share]), pod(templates=("link",))]
    objects += [node("node-0", "a"), shared_nic("node-0", "100G")]
    return [*objects, node("node-1", "b"), shared_nic("node-1", "40G")]


def test_consumable_capacity_is_shared_until_used_up() -> None:
    found = agrees(shared_links())
    assert len(found.nodes) == 3 + 1


def test_tainted_devices_are_left_unless_tolerated() -> None:
    objects = [*CLASSES, template("gpu", [request("g", "gpu")]), pod(templates=("gpu",))]
    objects += [
        node("node-0", "a"),
        gpus("node-0", 4, tainted=3),
        node("node-1", "b"),
        gpus("node-1", 2, tainted=2),
    ]
    assert len(agrees(objects).nodes) == 1
    tolerant = request("g", "gpu", tolerations=[{"key": "example.com/unhealthy", "operator": "Exists"}])
    objects[len(CLASSES)] = template("gpu", [tolerant])
    assert len(agrees(objects).nodes) == 6


def test_a_node_taint_stops_copies_without_toleration() -> None:
    taint = [{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}]
    objects = [*CLASSES, template("gpu", [request("g", "gpu")]), pod(templates=("gpu",))]
    objects += [node("node-0", "a", taints=taint), gpus("node-0", 4), node("node-1", "b"), gpus("node-1", 1)]
    found = agrees(objects)
    assert found.nodes == ["node-1"]
    assert "untolerated taint" in found.stop.message


def test_network_devices_every_node_reaches_are_counted_once() -> None:
    objects = [*CLASSES, template("gpu", [request("g", "gpu")]), template("link", [request("l", "nic")])]
    objects.append(pod(templates=("gpu", "link")))
    for name, zone in zones(3):
        objects += [node(name, zone), gpus(name, 2)]
    objects.append(network_pool(4))
    assert len(agrees(objects).nodes) == 4


def test_host_ports_take_one_copy_per_node() -> None:
    port = {"ports": [{"containerPort": 8080, "hostPort": 8080}]}
    objects = [*CLASSES, pod(container=port)]
    objects += [node(name, zone) for name, zone in zones(4)]
    found = agrees(objects)
    assert sorted(found.nodes) == [f"node-{i}" for i in range(4)]
    assert "free ports" in found.stop.message


def test_topology_spread_sees_every_copy_placed() -> None:
    spread = [
        {
            "maxSkew": 1,
            "topologyKey": ZONE,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "train"}},
        }
    ]
    objects = [*CLASSES, template("gpu", [request("g", "gpu")])]
    objects.append(pod(templates=("gpu",), topologySpreadConstraints=spread))
    objects += [node("node-0", "a"), gpus("node-0", 5), node("node-1", "b"), gpus("node-1", 2)]
    found = agrees(objects)
    assert len(found.nodes) == 2 + 3  # zone b's two, then skew 1 lets zone a take three
    assert "topology spread constraints" in found.stop.message


def test_copies_sharing_one_claim_go_where_it_was_allocated() -> None:
    """A claim named by the pod is shared by every copy: the first allocates it, the others
    follow it to its node until the node's cpu runs out."""
    shared = {
        "apiVersion": V1,
        "kind": "ResourceClaim",
        "metadata": {"name": "team-gpu", "namespace": NS},
        "spec": {"devices": {"requests": [request("g", "gpu")]}},
    }
    spec = pod(cpu="3")
    spec["spec"]["resourceClaims"] = [{"name": "g", "resourceClaimName": "team-gpu"}]
    spec["spec"]["containers"][0]["resources"]["claims"] = [{"name": "g"}]
    objects = [*CLASSES, shared, spec]
    objects += [
        node("node-0", "a", cpu="10"),
        gpus("node-0", 1),
        node("node-1", "b", cpu="7"),
        gpus("node-1", 1),
    ]
    found = agrees(objects)
    assert found.nodes == ["node-0"] * 3  # node-0 scores best (least allocated); 9 of its 10 cpus


def test_max_stops_early() -> None:
    objects = [*CLASSES, template("gpu", [request("g", "gpu")]), pod(templates=("gpu",))]
    objects += [node("node-0", "a"), gpus("node-0", 8)]
    found = agrees(objects, limit=3)
    assert (len(found.nodes), found.stop.by) == (3, MAX)


def mixed(seed: int) -> list[dict[str, Any]]:
    """A seeded mix: nodes of every shape above, and a pod asking for one of them."""
    rng = random.Random(seed)
    objects: list[dict[str, Any]] = [*CLASSES]
    for i, (name, zone) in enumerate(zones(rng.randint(2, 7))):
        objects.append(node(name, zone, cpu=str(rng.randint(2, 12))))
        shape = ("both", "nic")[i] if i < 2 else rng.choice(["gpus", "mig", "nic", "both"])
        if shape in ("gpus", "both"):
            objects.append(gpus(name, rng.randint(1, 4), tainted=rng.choice([0, 0, 1])))
        if shape in ("mig", "both"):
            objects += partitioned(name)
        if shape == "nic":
            objects.append(shared_nic(name, f"{rng.choice([40, 100])}G"))
    if rng.random() < 0.4:
        objects.append(network_pool(rng.randint(1, 6)))
    wanted = rng.choice(
        [
            [request("g", "gpu")],
            [request("q", "mig-quarter")],
            [request("q", "mig-half")],
            [request("n", "nic", capacity={"requests": {"bandwidth": "20G"}})],
            [{"name": "any", "firstAvailable": [sub("g", "gpu"), sub("q", "mig-quarter")]}],
        ]
    )
    objects.append(template("want", wanted))
    objects.append(pod(templates=("want",), cpu=rng.choice(["500m", "1", "2"])))
    return objects


@pytest.mark.parametrize("seed", range(12))
def test_seeded_mixes_agree_with_the_plain_path(seed: int) -> None:
    agrees(mixed(seed))


# --- quotas ---------------------------------------------------------------------------------------


def quota(hard: dict[str, str], used: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "team-a", "namespace": NS},
        "spec": {"hard": hard},
        "status": {"hard": hard, "used": used or {}},
    }


def test_a_pod_count_quota_stops_the_copies_first() -> None:
    objects = [*CLASSES, template("gpu", [request("g", "gpu")]), pod(templates=("gpu",))]
    objects += [node("node-0", "a"), gpus("node-0", 8), quota({"pods": "5"}, {"pods": "2"})]
    ready, asked = prepared(objects)
    found = headroom(ready, asked)
    assert len(found.nodes) == 5 - 2
    assert found.stop.by == QUOTA
    assert found.stop.message == (
        'pods "train-copy-4" is forbidden: exceeded quota: team-a, requested: pods=1, used: pods=5, '
        "limited: pods=5"
    )


def test_a_device_class_quota_refuses_the_template_claim() -> None:
    objects = [*CLASSES, template("gpu", [request("g", "gpu", count=2)]), pod(templates=("gpu",))]
    hard = {"gpu.deviceclass.resource.k8s.io/devices": "7"}
    objects += [node("node-0", "a"), gpus("node-0", 8), quota(hard)]
    ready, asked = prepared(objects)
    found = headroom(ready, asked)
    assert len(found.nodes) == 3  # 2 devices each: 6 of 7, the fourth would make 8
    assert found.stop.by == QUOTA
    assert found.stop.message.startswith(
        'resourceclaims "train-copy-4-gpu" is forbidden: exceeded quota: team-a'
    )


def test_node_allocatable_devices_are_charged_as_cpu() -> None:
    """A CPU driver's devices yield node cpu (KEP-5517): the quota on requests.cpu counts each
    copy's container cpu and its device's cores."""
    cores = {
        "name": "cores",
        "allowMultipleAllocations": True,
        "capacity": {"cpus": {"value": "64"}},
        "nodeAllocatableResourceMappings": {"cpu": {"capacityKey": "cpus"}},
    }
    cpu_pool = pool_slice("node-0-cpu", "cpu.example.com", "node-0-cpu", node_name="node-0", devices=[cores])
    take = {"name": "c", "exactly": {"deviceClassName": "cpu", "capacity": {"requests": {"cpus": "4"}}}}
    objects = [
        device_class("cpu", "cpu.example.com"),
        template("cpu", [take]),
        pod(templates=("cpu",), cpu="1"),
    ]
    objects += [
        node("node-0", "a", cpu="128"),
        cpu_pool,
        quota({"requests.cpu": "30"}, {"requests.cpu": "4"}),
    ]
    ready, asked = prepared(objects)
    found = headroom(ready, asked)
    assert found.stop.by == QUOTA
    assert len(found.nodes) == (30 - 4) // (1 + 4)
    assert "requests.cpu" in found.stop.message
