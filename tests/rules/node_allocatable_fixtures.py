"""A small cluster whose devices hand out node resources (KEP-5517), for the sharing and quota tests.

Two nodes, each with:

* ``cpu.example.com`` ``socket0``: 8 consumable CPUs, 1.37 ``mapping`` (default policy SamePod);
* ``gpu.example.com`` ``gpu-0``/``gpu-1``: 1.37 ``overhead`` memory 1Gi per pod, 512Mi per container
  (default MultiPod);
* ``mem.example.com`` ``hp-0``: 1.36 mapping, 1Gi of ``hugepages-2Mi`` per device (SamePod);
* ``nic.example.com`` ``nic-0`` (no node resources: unrestricted) and ``nic-1`` (attribute
  ``draguard.io/sharingPolicy: None``).
"""

from __future__ import annotations

from typing import Any

from rule_fixtures import cluster

from policies.api.base import TypedObject
from policies.api.kinds import decode
from policies.snapshot import Snapshot

NS = "team-a"
NODES = ("node-1", "node-2")


def _class(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{name}.example.com"'}}]},
    }


def _slice(driver: str, node: str, devices: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{driver}"},
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": node, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def _node_objects(node: str) -> list[dict[str, Any]]:
    cpu: dict[str, Any] = {
        "name": "socket0",
        "allowMultipleAllocations": True,
        "capacity": {"cpu.example.com/cpu": {"value": "8"}},
        "nodeAllocatableResources": {
            "cpu": {"mapping": {"capacityKey": "cpu.example.com/cpu", "capacityMultiplier": "1"}}
        },
    }
    gpus = [
        {
            "name": f"gpu-{i}",
            "attributes": {"model": {"string": "a100"}},
            "nodeAllocatableResources": {"memory": {"overhead": {"perPod": "1Gi", "perContainer": "512Mi"}}},
        }
        for i in range(2)
    ]
    hugepages = {
        "name": "hp-0",
        "nodeAllocatableResourceMappings": {"hugepages-2Mi": {"allocationMultiplier": "1Gi"}},
    }
    nics: list[dict[str, Any]] = [
        {"name": "nic-0"},
        {"name": "nic-1", "attributes": {"draguard.io/sharingPolicy": {"string": "None"}}},
    ]
    return [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": node, "labels": {"kubernetes.io/hostname": node}},
        },
        _slice("cpu.example.com", node, [cpu]),
        _slice("gpu.example.com", node, gpus),
        _slice("mem.example.com", node, [hugepages]),
        _slice("nic.example.com", node, nics),
    ]


def base_objects() -> list[TypedObject]:
    objects = [_class(c) for c in ("cpu", "gpu", "mem", "nic")]
    for node in NODES:
        objects += _node_objects(node)
    objects.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    return [decode(o) for o in objects]


def node_cluster(*extra: dict[str, Any] | TypedObject) -> Snapshot:
    return cluster(*extra, base=base_objects())


def request(name: str, cls: str, count: int = 1, capacity: str | None = None) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": cls, "allocationMode": "ExactCount", "count": count}
    if capacity is not None:
        exactly["capacity"] = {"requests": {"cpu.example.com/cpu": capacity}}
    return {"name": name, "exactly": exactly}


def claim(
    name: str,
    *requests: dict[str, Any],
    devices: tuple[str, ...] = (),
    consumed: dict[str, str] | None = None,
    reserved: tuple[str, ...] = (),
    node: str = "node-1",
    uid: str | None = None,
) -> dict[str, Any]:
    """A claim; with ``devices`` (``driver/device`` on ``node``) it is allocated for the first
    request and reserved for the pods named in ``reserved`` (uid ``uid-<pod>``)."""
    body: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": NS, "uid": uid or f"uid-{name}"},
        "spec": {"devices": {"requests": list(requests)}},
    }
    if devices:
        results = []
        for d in devices:
            driver, device = d.split("/")
            result: dict[str, Any] = {
                "request": requests[0]["name"],
                "driver": f"{driver}.example.com",
                "pool": node,
                "device": device,
            }
            if consumed is not None:
                result["consumedCapacity"] = consumed
                result["shareID"] = f"{name}-share"
            results.append(result)
        selector = {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
            ]
        }
        body["status"] = {"allocation": {"devices": {"results": results}, "nodeSelector": selector}}
        if reserved:
            body["status"]["reservedFor"] = [consumer(p) for p in reserved]
    return body


def consumer(pod_name: str) -> dict[str, str]:
    return {"resource": "pods", "name": pod_name, "uid": f"uid-{pod_name}"}


def container(name: str, *claims: str, **requests: str) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, "image": "app"}
    resources: dict[str, Any] = {}
    if requests:
        resources["requests"] = {k.replace("_", "-"): v for k, v in requests.items()}
    if claims:
        resources["claims"] = [{"name": c} for c in claims]
    if resources:
        body["resources"] = resources
    return body


def pod(
    name: str,
    *containers: dict[str, Any],
    claims: dict[str, str] | None = None,
    templates: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A pod; ``claims`` maps pod claim names to claim names, ``templates`` to template names."""
    refs = [{"name": k, "resourceClaimName": v} for k, v in (claims or {}).items()]
    refs += [{"name": k, "resourceClaimTemplateName": v} for k, v in (templates or {}).items()]
    body: dict[str, Any] = {"containers": list(containers) or [container("main")], **spec}
    if refs:
        body["resourceClaims"] = refs
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}"},
        "spec": body,
    }


def template(name: str, *requests: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"spec": {"devices": {"requests": list(requests)}}},
    }


def quota(name: str, hard: dict[str, str], used: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"hard": hard, **spec},
    }
    if used is not None:
        body["status"] = {"hard": hard, "used": used}
    return body


def reserve(claim_json: dict[str, Any], *pods: str) -> dict[str, Any]:
    """The claim with ``pods`` added to ``reservedFor`` (what the scheduler writes)."""
    status = dict(claim_json["status"])
    status["reservedFor"] = [*status.get("reservedFor", []), *(consumer(p) for p in pods)]
    return {**claim_json, "status": status}
