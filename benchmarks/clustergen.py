"""A seeded generator of large DRA clusters as `kubectl get -o json` prints them, for benchmarks/scale.py.

The shape is the one a GPU fleet at Kubernetes' supported limit has (issue 23): nodes with their
image lists and conditions, one ResourceSlice of GPUs per node, a few hundred namespaces with
quotas, allocated claims reserved by the running pods that use them, and many more bound pods
without claims. Pods look like the API server stores them (defaulted fields, a projected
service-account volume, five conditions, container statuses), about 4 KB of JSON each, less
``managedFields`` (which draguard's reader drops first anyway).

Everything is a function of the seed and the sizes, so two runs measure the same cluster.
"""

from __future__ import annotations

import json
import os
import random
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

DRIVER = "gpu.example.com"
CLASS = "gpu.example.com"
CREATED = "2026-11-01T08:00:00Z"
GPU_SELECTOR = (
    "device.attributes['gpu.example.com'].productName.startsWith('A100') || "
    "device.attributes['gpu.example.com'].productName.startsWith('H100')"
)
APPS = ("trainer", "inference", "notebook", "etl", "web", "batch", "metrics", "cache")
# Every node holds two versions of each app's image; an image's digest and size are its content's,
# the same on every node.
IMAGES = [
    {
        "names": [
            f"registry.example.com/{app}@sha256:{zlib.crc32(f'{app}:v{v}'.encode()):064x}",
            f"registry.example.com/{app}:v{v}",
        ],
        "sizeBytes": 50_000_000 + zlib.crc32(f"{app}:v{v}".encode()) % 8_950_000_000,
    }
    for app in APPS
    for v in (1, 2)
]


@dataclass(frozen=True)
class Sizes:
    nodes: int = 5000
    gpus: int = 8
    claims: int = 20000
    pods: int = 100000
    namespaces: int = 200

    @classmethod
    def scaled(cls, factor: float) -> Sizes:
        """Every count times ``factor`` (at least one namespace and node), GPUs per node kept."""
        return cls(
            nodes=max(1, int(cls.nodes * factor)),
            claims=int(cls.claims * factor),
            pods=int(cls.pods * factor),
            namespaces=max(1, int(cls.namespaces * factor)),
        )


def node_name(n: int) -> str:
    return f"gpu-node-{n:05d}"


def namespace_name(n: int) -> str:
    return f"team-{n:03d}"


def _uid(rng: random.Random) -> str:
    return "%08x-%04x-%04x-%04x-%012x" % (  # noqa: UP031 (the uuid layout, from one generator)
        rng.getrandbits(32),
        rng.getrandbits(16),
        rng.getrandbits(16),
        rng.getrandbits(16),
        rng.getrandbits(48),
    )


def node(n: int, rng: random.Random) -> dict[str, Any]:
    name = node_name(n)
    zone = f"zone-{'abc'[n % 3]}"
    conditions = [
        {
            "type": t,
            "status": "False",
            "reason": f"KubeletHas{r}",
            "message": f"kubelet has {m}",
            "lastHeartbeatTime": CREATED,
            "lastTransitionTime": CREATED,
        }
        for t, r, m in (
            ("MemoryPressure", "SufficientMemory", "sufficient memory available"),
            ("DiskPressure", "NoDiskPressure", "no disk pressure"),
            ("PIDPressure", "SufficientPID", "sufficient PID available"),
        )
    ] + [
        {
            "type": "Ready",
            "status": "True",
            "reason": "KubeletReady",
            "message": "kubelet is posting ready status",
            "lastHeartbeatTime": CREATED,
            "lastTransitionTime": CREATED,
        }
    ]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": _uid(rng),
            "resourceVersion": str(1000 + n),
            "creationTimestamp": CREATED,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "topology.kubernetes.io/zone": zone,
                "node.kubernetes.io/instance-type": "gpu-8x",
                "nvidia.com/gpu.product": "A100-SXM4-80GB" if n % 2 else "H100-SXM5-80GB",
            },
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
        },
        "spec": {"podCIDR": f"10.{n // 256}.{n % 256}.0/24", "providerID": f"example://{name}"},
        "status": {
            "capacity": {"cpu": "128", "memory": "1056Gi", "pods": "110", "ephemeral-storage": "3500Gi"},
            "allocatable": {"cpu": "126", "memory": "1040Gi", "pods": "110", "ephemeral-storage": "3200Gi"},
            "conditions": conditions,
            "addresses": [
                {"type": "InternalIP", "address": f"10.200.{n // 256}.{n % 256}"},
                {"type": "Hostname", "address": name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "kubeletVersion": "v1.36.2",
                "containerRuntimeVersion": "containerd://2.1.0",
                "kernelVersion": "6.8.0",
                "osImage": "Ubuntu 24.04 LTS",
                "architecture": "amd64",
                "operatingSystem": "linux",
                "machineID": f"{rng.getrandbits(128):032x}",
            },
            "images": IMAGES,
        },
    }


def resource_slice(n: int, gpus: int, rng: random.Random) -> dict[str, Any]:
    name = node_name(n)
    model = "A100-SXM4-80GB" if n % 2 else "H100-SXM5-80GB"
    devices = [
        {
            "name": f"gpu-{d}",
            "attributes": {
                "type": {"string": "gpu"},
                "productName": {"string": model},
                "architecture": {"string": "Ampere" if n % 2 else "Hopper"},
                "brand": {"string": "Nvidia"},
                "cudaComputeCapability": {"version": "8.0.0" if n % 2 else "9.0.0"},
                "driverVersion": {"version": "575.57.8"},
                "index": {"int": d},
                "minor": {"int": d},
                "uuid": {"string": f"GPU-{_uid(rng)}"},
                "pcieBusID": {"string": f"0000:{0x18 + d * 16:02x}:00.0"},
            },
            "capacity": {"memory": {"value": "80Gi"}},
        }
        for d in range(gpus)
    ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {
            "name": f"{name}-{DRIVER}-{rng.getrandbits(20):05x}",
            "uid": _uid(rng),
            "resourceVersion": str(10000 + n),
            "creationTimestamp": CREATED,
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Node", "name": name, "uid": _uid(rng), "controller": True}
            ],
        },
        "spec": {
            "driver": DRIVER,
            "nodeName": name,
            "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def device_class() -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": CLASS, "uid": "class-uid", "resourceVersion": "1", "creationTimestamp": CREATED},
        "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}]},
    }


def namespace(n: int) -> list[dict[str, Any]]:
    name = namespace_name(n)
    return [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": name,
                "uid": f"ns-{n}",
                "labels": {"kubernetes.io/metadata.name": name, "team": name},
            },
            "spec": {"finalizers": ["kubernetes"]},
            "status": {"phase": "Active"},
        },
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "compute", "namespace": name, "uid": f"rq-{n}"},
            "spec": {
                "hard": {
                    "requests.cpu": "4000",
                    "requests.memory": "16Ti",
                    "pods": "2000",
                    f"requests.{CLASS}.deviceclass.resource.kubernetes.io/devices": "400",
                }
            },
        },
    ]


CLAIM_SPEC: dict[str, Any] = {
    "devices": {
        "requests": [
            {
                "name": "gpu",
                "exactly": {
                    "deviceClassName": CLASS,
                    "allocationMode": "ExactCount",
                    "count": 1,
                    "selectors": [{"cel": {"expression": GPU_SELECTOR}}],
                },
            }
        ]
    }
}


def template(ns: str, app: str) -> dict[str, Any]:
    """The ResourceClaimTemplate ``<app>-gpu`` the app's pods name: one GPU."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {
            "name": f"{app}-gpu",
            "namespace": ns,
            "uid": f"rct-{ns}-{app}",
            "creationTimestamp": CREATED,
        },
        "spec": {"spec": CLAIM_SPEC},
    }


def claim(
    name: str, ns: str, node: str, device: int, pod_name: str, pod_uid: str, rng: random.Random
) -> dict[str, Any]:
    """A claim made from a template for ``pod_name`` and allocated one GPU of ``node``."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": name,
            "namespace": ns,
            "uid": _uid(rng),
            "resourceVersion": str(rng.randrange(10**6, 10**7)),
            "creationTimestamp": CREATED,
            "generateName": f"{pod_name}-gpu-",
            "annotations": {"resource.kubernetes.io/pod-claim-name": "gpu"},
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": pod_name,
                    "uid": pod_uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
            "finalizers": ["resource.kubernetes.io/delete-protection"],
        },
        "spec": CLAIM_SPEC,
        "status": {
            "allocation": {
                "devices": {
                    "results": [{"request": "gpu", "driver": DRIVER, "pool": node, "device": f"gpu-{device}"}]
                },
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
                    ]
                },
            },
            "reservedFor": [{"resource": "pods", "name": pod_name, "uid": pod_uid}],
        },
    }


def pod(
    name: str, ns: str, node: str, app: str, uid: str, claim_name: str | None, rng: random.Random
) -> dict[str, Any]:
    """A running pod as the API server stores it, about 4 KB of JSON: its template (requests,
    the hash label) is its namespace's and app's, as for the replicas of one Deployment; the
    ``cache`` app is a StatefulSet, whose pods carry their own name and index as labels."""
    template = zlib.crc32(f"{ns}/{app}".encode())
    hash_ = f"{template:010x}"
    env: list[dict[str, Any]] = [
        {"name": f"{app.upper()}_SETTING_{i}", "value": f"value-{rng.getrandbits(32):08x}"} for i in range(8)
    ]
    env.append(
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}}}
    )
    container: dict[str, Any] = {
        "name": app,
        "image": f"registry.example.com/{app}:v{1 + rng.getrandbits(1)}",
        "imagePullPolicy": "IfNotPresent",
        "command": ["/bin/" + app],
        "args": ["--config=/etc/app/config.yaml", "--verbose"],
        "env": env,
        "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
        "resources": {
            "requests": {
                "cpu": f"{(250, 500, 1000, 2000)[template % 4]}m",
                "memory": f"{(256, 512, 1024, 4096)[template // 4 % 4]}Mi",
            },
            "limits": {"memory": "8Gi"},
        },
        "livenessProbe": {
            "httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"},
            "initialDelaySeconds": 10,
            "timeoutSeconds": 1,
            "periodSeconds": 10,
            "successThreshold": 1,
            "failureThreshold": 3,
        },
        "readinessProbe": {
            "httpGet": {"path": "/readyz", "port": 8080, "scheme": "HTTP"},
            "timeoutSeconds": 1,
            "periodSeconds": 5,
            "successThreshold": 1,
            "failureThreshold": 3,
        },
        "volumeMounts": [
            {"name": "config", "mountPath": "/etc/app"},
            {
                "name": "kube-api-access",
                "readOnly": True,
                "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
            },
        ],
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "runAsNonRoot": True,
            "capabilities": {"drop": ["ALL"]},
        },
    }
    spec: dict[str, Any] = {
        "containers": [container],
        "volumes": [
            {"name": "config", "configMap": {"name": f"{app}-config", "defaultMode": 420}},
            {
                "name": "kube-api-access",
                "projected": {
                    "defaultMode": 420,
                    "sources": [
                        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                        {
                            "configMap": {
                                "name": "kube-root-ca.crt",
                                "items": [{"key": "ca.crt", "path": "ca.crt"}],
                            }
                        },
                        {
                            "downwardAPI": {
                                "items": [
                                    {
                                        "path": "namespace",
                                        "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                                    }
                                ]
                            }
                        },
                    ],
                },
            },
        ],
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "serviceAccountName": "default",
        "serviceAccount": "default",
        "nodeName": node,
        "securityContext": {"fsGroup": 2000},
        "schedulerName": "default-scheduler",
        "tolerations": [
            {
                "key": "node.kubernetes.io/not-ready",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
            {
                "key": "node.kubernetes.io/unreachable",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
        ],
        "priority": 0,
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
    }
    if app in ("web", "cache"):
        spec["affinity"] = {
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "podAffinityTerm": {
                            "labelSelector": {"matchLabels": {"app": app}},
                            "topologyKey": "kubernetes.io/hostname",
                        },
                    }
                ]
            }
        }
    if app == "inference":
        spec["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": {"app": app}},
            }
        ]
    status_claims = []
    if claim_name is not None:
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": f"{app}-gpu"}]
        container["resources"]["claims"] = [{"name": "gpu"}]
        status_claims = [{"name": "gpu", "resourceClaimName": claim_name}]
    started = "2026-11-02T09:00:00Z"
    conditions = [
        {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": started}
        for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")
    ]
    status: dict[str, Any] = {
        "phase": "Running",
        "conditions": conditions,
        "hostIP": "10.200.0.1",
        "hostIPs": [{"ip": "10.200.0.1"}],
        "podIP": f"10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}",
        "startTime": started,
        "qosClass": "Burstable",
        "containerStatuses": [
            {
                "name": app,
                "state": {"running": {"startedAt": started}},
                "ready": True,
                "restartCount": 0,
                "image": container["image"],
                "imageID": f"registry.example.com/{app}@sha256:{rng.getrandbits(256):064x}",
                "containerID": f"containerd://{rng.getrandbits(256):064x}",
                "started": True,
            }
        ],
    }
    if status_claims:
        status["resourceClaimStatuses"] = status_claims
    labels = {"app": app, "pod-template-hash": hash_, "team": ns, "tier": "gpu" if claim_name else "cpu"}
    owner = {"kind": "ReplicaSet", "name": f"{app}-{hash_}"}
    if app == "cache":
        labels = {
            "app": app,
            "team": ns,
            "statefulset.kubernetes.io/pod-name": name,
            "apps.kubernetes.io/pod-index": str(rng.randrange(1000)),
            "controller-revision-hash": hash_,
        }
        owner = {"kind": "StatefulSet", "name": app}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "generateName": name[: name.rindex("-") + 1],
            "namespace": ns,
            "uid": uid,
            "resourceVersion": str(rng.randrange(10**6, 10**8)),
            "creationTimestamp": started,
            "labels": labels,
            "annotations": {"kubectl.kubernetes.io/restartedAt": started, "prometheus.io/scrape": "true"},
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    **owner,
                    "uid": f"{owner['kind'].lower()}-{ns}-{app}",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": spec,
        "status": status,
    }


@dataclass
class Cluster:
    """Where the pieces of a generated cluster went, for a benchmark that asks questions of it."""

    sizes: Sizes
    files: dict[str, str]


def _pods_and_claims(
    sizes: Sizes, rng: random.Random
) -> Iterator[tuple[dict[str, Any], dict[str, Any] | None]]:
    """Each bound pod with its claim, if it holds one: the first ``claims`` pods hold one GPU each,
    spread over the nodes' devices without reuse; every pod runs on a node that has room for it."""
    free = [(n, d) for d in range(sizes.gpus) for n in range(sizes.nodes)]
    for i in range(sizes.pods):
        ns = namespace_name(i % sizes.namespaces)
        app = APPS[i % len(APPS)]
        name = f"{app}-{i:06d}-{rng.getrandbits(20):05x}"
        uid = _uid(rng)
        if i < sizes.claims and i < len(free):
            n, d = free[i]
            claim_name = f"{name}-gpu-{rng.getrandbits(20):05x}"
            yield (
                pod(name, ns, node_name(n), app, uid, claim_name, rng),
                claim(claim_name, ns, node_name(n), d, name, uid, rng),
            )
        else:
            yield pod(name, ns, node_name(i % sizes.nodes), app, uid, None, rng), None


def _write_list(path: str, items: Iterator[dict[str, Any]]) -> None:
    """A ``kind: List`` as ``kubectl get -o json`` writes it, item by item (never the whole in memory)."""
    with open(path, "w", encoding="utf-8") as out:
        out.write('{\n    "apiVersion": "v1",\n    "items": [\n')
        for i, item in enumerate(items):
            out.write(",\n" if i else "")
            out.write(json.dumps(item))
        out.write('\n    ],\n    "kind": "List",\n    "metadata": {"resourceVersion": ""}\n}\n')


def write(directory: str, sizes: Sizes = Sizes(), seed: int = 23) -> Cluster:
    """The cluster as one ``kubectl get <kind> -A -o json`` file per kind in ``directory``.

    Pods and claims are written in one pass (each pod names its claim, each claim its pod); the
    claims are collected while the pods stream out, at about 2 KB each."""
    os.makedirs(directory, exist_ok=True)
    rng = random.Random(seed)
    files = {
        kind: os.path.join(directory, f"{kind}.json")
        for kind in (
            "deviceclasses", "namespaces", "nodes", "resourceslices", "resourceclaimtemplates",
            "resourceclaims", "pods",
        )
    }  # fmt: skip
    _write_list(files["deviceclasses"], iter([device_class()]))
    _write_list(
        files["resourceclaimtemplates"],
        (template(namespace_name(n), app) for n in range(sizes.namespaces) for app in APPS),
    )
    _write_list(files["namespaces"], (obj for n in range(sizes.namespaces) for obj in namespace(n)))
    _write_list(files["nodes"], (node(n, rng) for n in range(sizes.nodes)))
    _write_list(files["resourceslices"], (resource_slice(n, sizes.gpus, rng) for n in range(sizes.nodes)))
    claims: list[dict[str, Any]] = []

    def pods() -> Iterator[dict[str, Any]]:
        for pod_, claim_ in _pods_and_claims(sizes, rng):
            if claim_ is not None:
                claims.append(claim_)
            yield pod_

    _write_list(files["pods"], pods())
    _write_list(files["resourceclaims"], iter(claims))
    return Cluster(sizes, files)
