"""policies.scheduler.podinfo: a pod read from the API server's JSON (``Shapes.record``, what the live
state and ``serve --state`` keep) is the same record as one made from the whole decoded pod
(``PodInfo.of``, what the offline commands keep), and the pods of one template share what they can.

The pods are written as ``kubectl get pod -o json`` prints them (managedFields, defaulted fields,
service-account volumes, conditions, container statuses), in the style of the DRA drivers' demos:
GPU test pods asking for claims from templates, a driver's kubelet-plugin pod on the host network,
a trainer with a restartable sidecar and affinity terms.
"""

from __future__ import annotations

import copy
import dataclasses
from datetime import UTC, datetime
from typing import Any

import pytest

from policies.api.core import Pod
from policies.api.defaults import apply_defaults
from policies.api.kinds import decode
from policies.scheduler.podinfo import PodInfo, Shapes
from policies.scheduler.resources import Resource
from policies.stored import Reader, trim

NOW = datetime(2026, 11, 22, 9, 0, tzinfo=UTC)
CREATED = "2026-11-20T08:14:03Z"
STARTED = "2026-11-20T08:14:05Z"


def _ready_conditions(*extra: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": STARTED}
        for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")
    ] + list(extra)


def _condition(kind: str, reason: str, message: str, at: str = STARTED) -> dict[str, Any]:
    return {"type": kind, "status": "True", "reason": reason, "message": message, "lastProbeTime": None,
            "lastTransitionTime": at}  # fmt: skip


def _service_account_volume(suffix: str) -> dict[str, Any]:
    return {
        "name": f"kube-api-access-{suffix}",
        "projected": {
            "defaultMode": 420,
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
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
    }


def _container(name: str, requests: dict[str, str], suffix: str, **more: Any) -> dict[str, Any]:
    return {
        "name": name,
        "image": "ubuntu:24.04",
        "imagePullPolicy": "IfNotPresent",
        "command": ["bash", "-c"],
        "args": ["export; trap 'exit 0' TERM; sleep 9999 & wait"],
        "resources": {"requests": requests},
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "volumeMounts": [
            {
                "name": f"kube-api-access-{suffix}",
                "readOnly": True,
                "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
            }
        ],
        **more,
    }


def _status(name: str, image: str = "ubuntu:24.04", **more: Any) -> dict[str, Any]:
    return {
        "name": name,
        "state": {"running": {"startedAt": STARTED}},
        "lastState": {},
        "ready": True,
        "restartCount": 0,
        "image": f"docker.io/library/{image}",
        "imageID": "docker.io/library/ubuntu@sha256:" + "3f" * 32,
        "containerID": "containerd://" + "a1" * 32,
        "started": True,
        **more,
    }


def gpu_test_pod(
    name: str,
    *,
    namespace: str = "gpu-test2",
    node: str | None = "kind-worker",
    uid: str = "5c9f0d1e-2b6a-4c1e-9f3e-7d8a0b1c2d3e",
    labels: dict[str, str] | None = None,
    claim_suffix: str = "7x9kq",
    phase: str = "Running",
) -> dict[str, Any]:
    """A pod of the example driver's gpu-test2 demo: one container, a claim from ``single-gpu``,
    as the API server stores it once the kubelet runs it."""
    suffix = "b7x2n"
    container = _container("ctr0", {"cpu": "250m", "memory": "256Mi"}, suffix)
    container["resources"]["claims"] = [{"name": "gpu"}]
    spec: dict[str, Any] = {
        "containers": [container],
        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "single-gpu"}],
        "volumes": [_service_account_volume(suffix)],
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "serviceAccountName": "default",
        "serviceAccount": "default",
        "securityContext": {},
        "schedulerName": "default-scheduler",
        "tolerations": [
            {"key": k, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
            for k in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
        ],
        "priority": 0,
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
    }
    status: dict[str, Any] = {"phase": phase, "qosClass": "Burstable"}
    if node is not None:
        spec["nodeName"] = node
        status.update(
            {
                "conditions": _ready_conditions(),
                "hostIP": "172.18.0.3",
                "hostIPs": [{"ip": "172.18.0.3"}],
                "podIP": "10.244.1.7",
                "podIPs": [{"ip": "10.244.1.7"}],
                "startTime": STARTED,
                "containerStatuses": [_status("ctr0")],
                "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": f"{name}-gpu-{claim_suffix}"}],
            }
        )
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid,
            "resourceVersion": "48213",
            "creationTimestamp": CREATED,
            "labels": labels if labels is not None else {"app": "pod"},
            "managedFields": [
                {
                    "manager": "kubectl-client-side-apply",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "time": CREATED,
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:spec": {"f:containers": {'k:{"name":"ctr0"}': {".": {}}}}},
                }
            ],
        },
        "spec": spec,
        "status": status,
    }


def kubelet_plugin_pod(host_port: bool) -> dict[str, Any]:
    """The driver's kubelet plugin, a DaemonSet pod on the host network; ``host_port``: as stored
    (the API server set hostPort = containerPort), else as written."""
    port: dict[str, Any] = {"name": "metrics", "containerPort": 9090, "protocol": "TCP"}
    if host_port:
        port["hostPort"] = 9090
    pod = gpu_test_pod("dra-example-driver-kubeletplugin-8dfzv", namespace="dra-example-driver")
    container = pod["spec"]["containers"][0]
    container.update(
        {"name": "plugin", "image": "registry.k8s.io/dra-example-driver:v0.2.0", "ports": [port]},
    )
    container["resources"] = {"requests": {"cpu": "10m", "memory": "32Mi"}}
    pod["spec"].update({"hostNetwork": True, "dnsPolicy": "ClusterFirstWithHostNet", "priority": 2000001000})
    pod["spec"]["priorityClassName"] = "system-node-critical"
    del pod["spec"]["resourceClaims"]
    del pod["status"]["resourceClaimStatuses"]
    pod["status"]["containerStatuses"] = [_status("plugin", "dra-example-driver:v0.2.0")]
    pod["metadata"]["labels"] = {
        "app.kubernetes.io/name": "dra-example-driver",
        "controller-revision-hash": "6b4",
    }
    pod["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "name": "dra-example-driver-kubeletplugin",
            "uid": "ds-1",
        }
    ]
    return pod


def trainer_pod() -> dict[str, Any]:
    """A trainer with a restartable sidecar holding a host port, pod-level resources, an overhead
    (a runtime class), required anti-affinity and a node affinity, two containers sharing a claim,
    and a claim named directly beside one from a template."""
    pod = gpu_test_pod("trainer-0", namespace="ml", node="gpu-node-3")
    sidecar = _container(
        "log-shipper", {"cpu": "100m", "memory": "64Mi"}, "b7x2n", restartPolicy="Always",
        ports=[{"containerPort": 24224, "hostPort": 24224, "protocol": "TCP"}],
    )  # fmt: skip
    second = _container("ctr1", {"cpu": "2", "memory": "8Gi", "nvidia.com/gpu": "1"}, "b7x2n")
    second["resources"]["claims"] = [{"name": "gpu"}, {"name": "shared-nic"}]
    pod["spec"]["initContainers"] = [sidecar]
    pod["spec"]["containers"].append(second)
    pod["spec"]["resourceClaims"].append({"name": "shared-nic", "resourceClaimName": "rdma-nic-0"})
    pod["spec"]["resources"] = {"requests": {"cpu": "4", "memory": "16Gi"}}
    pod["spec"]["overhead"] = {"cpu": "250m", "memory": "120Mi"}
    pod["spec"]["runtimeClassName"] = "kata"
    pod["spec"]["priority"] = 1000
    pod["spec"]["priorityClassName"] = "training"
    pod["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]}
                        ]
                    }
                ]
            }
        },
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"job": "trainer"}},
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        },
    }
    pod["metadata"]["labels"] = {"job": "trainer", "batch.kubernetes.io/job-completion-index": "0"}
    pod["status"]["initContainerStatuses"] = [_status("log-shipper")]
    pod["status"]["containerStatuses"].append(_status("ctr1"))
    return pod


def preempted_pod() -> dict[str, Any]:
    """A pod the scheduler is preempting: being deleted, DisruptionTarget by PreemptionByScheduler."""
    pod = gpu_test_pod("pod1", uid="0a1b2c3d-0000-4000-8000-000000000001")
    pod["metadata"]["deletionTimestamp"] = "2026-11-22T08:59:30Z"
    pod["metadata"]["deletionGracePeriodSeconds"] = 30
    pod["status"]["conditions"].append(
        _condition(
            "DisruptionTarget", "PreemptionByScheduler",
            "default-scheduler: preempting to accommodate a higher priority pod", "2026-11-22T08:59:30Z",
        )
    )  # fmt: skip
    return pod


def evicted_pod() -> dict[str, Any]:
    """Disrupted by the taint manager, not the scheduler: not a preemption victim."""
    pod = preempted_pod()
    condition = pod["status"]["conditions"][-1]
    condition.update(
        {"reason": "DeletionByTaintManager", "message": "Taint manager: deleting due to NoExecute"}
    )
    return pod


def nominated_pod() -> dict[str, Any]:
    """A pending pod the scheduler nominated a node for after preempting pod1."""
    pod = gpu_test_pod("pod2", node=None, phase="Pending")
    pod["spec"]["priority"] = 1000
    pod["status"]["nominatedNodeName"] = "kind-worker"
    scheduled = _condition(
        "PodScheduled", "Unschedulable", "0/2 nodes are available: 1 cannot allocate all claims."
    )
    pod["status"]["conditions"] = [{**scheduled, "status": "False"}]
    return pod


def finished_pod() -> dict[str, Any]:
    pod = gpu_test_pod("pod3")
    pod["status"]["phase"] = "Succeeded"
    pod["status"]["containerStatuses"][0]["state"] = {
        "terminated": {"exitCode": 0, "reason": "Completed", "startedAt": STARTED, "finishedAt": STARTED}
    }
    return pod


def _resized(name: str, asked: str, allocated: str, reported: dict[str, str]) -> dict[str, Any]:
    """A pod whose container asks ``asked`` CPU while the kubelet has ``allocated`` and reports
    ``reported`` (the status of an in-place resize)."""
    pod = gpu_test_pod(name)
    pod["spec"]["containers"][0]["resources"]["requests"] = {"cpu": asked, "memory": "256Mi"}
    status = {
        "allocatedResources": {"cpu": allocated, "memory": "256Mi"},
        "resources": {"requests": reported},
    }
    pod["status"]["containerStatuses"][0].update(status)
    return pod


def resizing_pod() -> dict[str, Any]:
    """An in-place resize under way: the kubelet reports larger resources than the spec asks."""
    return _resized("pod4", "500m", "1", {"cpu": "1", "memory": "512Mi"})


def infeasible_resize_pod() -> dict[str, Any]:
    """A resize the node cannot take: the spec asks for 64 CPUs, the kubelet keeps the old 250m."""
    pod = _resized("pod5", "64", "250m", {"cpu": "250m", "memory": "256Mi"})
    message = "Node didn't have enough capacity: cpu, requested: 64000, capacity: 8000"
    pod["status"]["conditions"].append(_condition("PodResizePending", "Infeasible", message))
    return pod


def sidecar_resize_pod() -> dict[str, Any]:
    """A restartable sidecar being resized in place, from 100m to 300m of CPU."""
    pod = gpu_test_pod("pod6")
    sidecar = _container("proxy", {"cpu": "100m", "memory": "64Mi"}, "b7x2n", restartPolicy="Always")
    pod["spec"]["initContainers"] = [sidecar]
    pod["status"]["initContainerStatuses"] = [
        _status("proxy", resources={"requests": {"cpu": "300m", "memory": "64Mi"}})
    ]
    return pod


PODS = {
    "gpu-test": lambda: gpu_test_pod("pod0"),
    "kubelet-plugin-stored": lambda: kubelet_plugin_pod(host_port=True),
    "kubelet-plugin-written": lambda: kubelet_plugin_pod(host_port=False),
    "trainer": trainer_pod,
    "preempted": preempted_pod,
    "evicted": evicted_pod,
    "nominated": nominated_pod,
    "finished": finished_pod,
    "resizing": resizing_pod,
    "infeasible-resize": infeasible_resize_pod,
    "sidecar-resize": sidecar_resize_pod,
}
COMPARED = [f.name for f in dataclasses.fields(PodInfo) if f.name != "shape"]


def whole(raw: dict[str, Any]) -> PodInfo:
    """The record of the pod decoded whole and defaulted, as the offline commands read it."""
    pod = apply_defaults(decode(trim(raw)), NOW)
    assert isinstance(pod, Pod)
    return PodInfo.of(pod)


def recorded(raw: dict[str, Any], shapes: Shapes | None = None) -> PodInfo:
    """The record as the live state and serve --state make it (the JSON is not changed)."""
    before = copy.deepcopy(raw)
    reader = Reader(now=NOW)
    if shapes is not None:
        reader.shapes = shapes
    found = reader.pod(raw)
    assert found is not None and raw == before
    return found[0]


@pytest.mark.parametrize("name", list(PODS))
def test_a_record_from_json_agrees_with_the_record_of_the_whole_pod(name: str) -> None:
    raw = PODS[name]()
    got, want = recorded(raw), whole(raw)
    differing = {
        f: (getattr(got, f), getattr(want, f)) for f in COMPARED if getattr(got, f) != getattr(want, f)
    }
    assert not differing
    for derived in ("key", "bound", "pending", "has_pod_affinity", "has_required_anti_affinity"):
        assert getattr(got, derived) == getattr(want, derived), derived
    # What the quota and sharing rules read of the shape: the claims and the containers using them.
    assert got.shape.spec.resource_claims == want.shape.spec.resource_claims
    assert [c.resources for c in got.shape.spec.containers] == [
        c.resources for c in want.shape.spec.containers
    ]


def test_the_pods_cover_what_a_record_reads() -> None:
    """Each pod above shows the case it is named for, so that agreeing is not agreeing on nothing."""
    info = {name: whole(make()) for name, make in PODS.items()}
    assert info["gpu-test"].claims == (("gpu", "pod0-gpu-7x9kq"),)
    assert info["trainer"].claims == (("gpu", "trainer-0-gpu-7x9kq"), ("shared-nic", "rdma-nic-0"))
    assert info["kubelet-plugin-written"].host_ports == {("0.0.0.0", "TCP", 9090)}
    assert info["kubelet-plugin-stored"].host_ports == info["kubelet-plugin-written"].host_ports
    assert info["kubelet-plugin-stored"].priority == 2000001000
    assert info["trainer"].host_ports == {("0.0.0.0", "TCP", 24224)}
    assert info["trainer"].has_required_anti_affinity and info["trainer"].priority == 1000
    assert info["trainer"].requests.milli_cpu == 4250  # pod-level resources plus the overhead
    assert info["preempted"].preempted and info["preempted"].deleting
    assert not info["evicted"].preempted and info["evicted"].deleting
    assert info["nominated"].nominated_node == "kind-worker" and info["nominated"].pending
    assert not info["finished"].bound and info["finished"].node_name == "kind-worker"
    assert info["resizing"].requests == Resource(milli_cpu=1000, memory=512 * 2**20)
    assert info["infeasible-resize"].requests.milli_cpu == 250
    assert info["sidecar-resize"].requests.milli_cpu == 250 + 300
    assert info["gpu-test"].non_zero_requests == info["gpu-test"].requests
    assert info["gpu-test"].start_time == STARTED and info["gpu-test"].version == "48213"


def test_replicas_of_one_template_share_one_shape_and_one_labels_dict() -> None:
    """A Deployment's pods differ in name, uid, node, IPs, container ids and claim names only."""
    shapes = Shapes()
    labels = {"app": "inference", "pod-template-hash": "5d8c7b9f4"}
    infos = []
    for i, node in enumerate(("kind-worker", "kind-worker2", "kind-worker")):
        raw = gpu_test_pod(
            f"inference-5d8c7b9f4-{'qwe'[i]}x{i}", node=node, uid=f"uid-{i}", labels=dict(labels),
            claim_suffix=f"k{i}z",
        )  # fmt: skip
        raw["status"]["podIP"] = f"10.244.{i}.9"
        raw["status"]["containerStatuses"][0]["containerID"] = f"containerd://{i:064x}"
        infos.append(recorded(raw, shapes))
    assert shapes.misses == 1 and len(shapes) == 1
    assert all(info.shape is infos[0].shape for info in infos)
    assert all(info.labels is infos[0].labels for info in infos)
    assert all(info.requests is infos[0].requests for info in infos)
    assert [info.claims for info in infos] == [
        (("gpu", f"{info.name}-gpu-k{i}z"),) for i, info in enumerate(infos)
    ]
    assert [info.node_name for info in infos] == ["kind-worker", "kind-worker2", "kind-worker"]


def test_a_statefulsets_pods_share_the_shape_but_not_the_labels() -> None:
    shapes = Shapes()
    infos = []
    for i in range(3):
        labels = {
            "app": "cache",
            "controller-revision-hash": "cache-7f9b6c",
            "statefulset.kubernetes.io/pod-name": f"cache-{i}",
            "apps.kubernetes.io/pod-index": str(i),
        }
        infos.append(recorded(gpu_test_pod(f"cache-{i}", uid=f"uid-{i}", labels=labels), shapes))
    assert shapes.misses == 1
    assert all(info.shape is infos[0].shape for info in infos)
    assert len({id(info.labels) for info in infos}) == 3
    assert [info.labels["apps.kubernetes.io/pod-index"] for info in infos] == ["0", "1", "2"]
    # A pod of another template (more memory) gets a shape of its own.
    other = gpu_test_pod("cache-big-0", uid="uid-big")
    other["spec"]["containers"][0]["resources"]["requests"]["memory"] = "1Gi"
    assert recorded(other, shapes).shape is not infos[0].shape and shapes.misses == 2
