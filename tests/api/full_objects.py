"""One object per kind with every field upstream defines set (resource.k8s.io/v1 1.36 plus the
1.37 node-allocatable shape, core/v1 for the parts draguard models, scheduling.k8s.io/v1
PriorityClass), as JSON would carry it."""

from __future__ import annotations

from typing import Any

API = "resource.k8s.io/v1"
TIME = "2026-01-02T03:04:05Z"
SHARE = "0b5f4c1e-3a4d-4e8f-9c2b-1d2e3f405162"

METADATA: dict[str, Any] = {
    "name": "obj",
    "generateName": "obj-",
    "namespace": "team-a",
    "selfLink": "/apis/x",
    "uid": "6f1c1f38-5d47-4c1e-9a0e-2d6f7c1d9b01",
    "resourceVersion": "42",
    "generation": 3,
    "creationTimestamp": TIME,
    "deletionTimestamp": TIME,
    "deletionGracePeriodSeconds": 30,
    "labels": {"app": "train"},
    "annotations": {"note": "x"},
    "ownerReferences": [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": "p",
            "uid": "u",
            "controller": True,
            "blockOwnerDeletion": False,
        }
    ],
    "finalizers": ["resource.kubernetes.io/delete-protection"],
    "managedFields": [
        {
            "manager": "kube-scheduler",
            "operation": "Update",
            "apiVersion": API,
            "time": TIME,
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:status": {}},
            "subresource": "status",
        }
    ],
}

NODE_SELECTOR = {
    "nodeSelectorTerms": [
        {
            "matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}],
            "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}],
        }
    ]
}
TOLERATION = {
    "key": "example.com/t",
    "operator": "Equal",
    "value": "v",
    "effect": "NoExecute",
    "tolerationSeconds": 60,
}
SELECTORS = [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]
OPAQUE = {
    "opaque": {
        "driver": "gpu.example.com",
        "parameters": {"kind": "GpuConfig", "sharing": {"strategy": "TimeSlicing"}},
    }
}
CONDITION = {
    "type": "Ready",
    "status": "True",
    "observedGeneration": 1,
    "lastTransitionTime": TIME,
    "reason": "Done",
    "message": "ok",
}

DEVICE_CLASS: dict[str, Any] = {
    "apiVersion": API,
    "kind": "DeviceClass",
    "metadata": {"name": "gpu.example.com"},
    "spec": {"selectors": SELECTORS, "config": [OPAQUE], "extendedResourceName": "example.com/gpu"},
}

CLAIM_SPEC: dict[str, Any] = {
    "devices": {
        "requests": [
            {
                "name": "gpu",
                "exactly": {
                    "deviceClassName": "gpu.example.com",
                    "selectors": SELECTORS,
                    "allocationMode": "ExactCount",
                    "count": 2,
                    "adminAccess": False,
                    "tolerations": [TOLERATION],
                    "capacity": {"requests": {"memory": "10Gi", "gpu.example.com/cores": 4}},
                },
            },
            {
                "name": "nic",
                "firstAvailable": [
                    {
                        "name": "fast",
                        "deviceClassName": "nic.example.com",
                        "selectors": SELECTORS,
                        "allocationMode": "All",
                        "tolerations": [TOLERATION],
                        "capacity": {"requests": {"bandwidth": "10G"}},
                    },
                    {"name": "slow", "deviceClassName": "nic.example.com", "count": 1},
                ],
            },
        ],
        "constraints": [
            {"requests": ["gpu", "nic/fast"], "matchAttribute": "resource.kubernetes.io/pcieRoot"},
            {"requests": ["nic"], "distinctAttribute": "nic.example.com/port"},
        ],
        "config": [{"requests": ["gpu"], **OPAQUE}],
    }
}

RESOURCE_CLAIM: dict[str, Any] = {
    "apiVersion": API,
    "kind": "ResourceClaim",
    "metadata": METADATA,
    "spec": CLAIM_SPEC,
    "status": {
        "allocation": {
            "devices": {
                "results": [
                    {
                        "request": "gpu",
                        "driver": "gpu.example.com",
                        "pool": "node-1",
                        "device": "gpu-0",
                        "adminAccess": True,
                        "tolerations": [TOLERATION],
                        "bindingConditions": ["Attached"],
                        "bindingFailureConditions": ["Failed"],
                        "shareID": SHARE,
                        "consumedCapacity": {"memory": "10Gi", "gpu.example.com/cores": "0"},
                    }
                ],
                "config": [{"source": "FromClass", "requests": ["gpu"], **OPAQUE}],
            },
            "nodeSelector": NODE_SELECTOR,
            "allocationTimestamp": TIME,
        },
        "reservedFor": [{"apiGroup": "", "resource": "pods", "name": "trainer", "uid": "u-1"}],
        "devices": [
            {
                "driver": "gpu.example.com",
                "pool": "node-1",
                "device": "gpu-0",
                "shareID": SHARE,
                "conditions": [CONDITION],
                "data": {"health": "ok"},
                "networkData": {"interfaceName": "eth1", "ips": ["10.0.0.2/24"], "hardwareAddress": "aa:bb"},
            }
        ],
    },
}

RESOURCE_CLAIM_TEMPLATE: dict[str, Any] = {
    "apiVersion": API,
    "kind": "ResourceClaimTemplate",
    "metadata": {"name": "one-gpu", "namespace": "team-a"},
    "spec": {"metadata": {"labels": {"app": "x"}, "annotations": {"a": "b"}}, "spec": CLAIM_SPEC},
}

RESOURCE_SLICE: dict[str, Any] = {
    "apiVersion": API,
    "kind": "ResourceSlice",
    "metadata": {"name": "node-1-gpu"},
    "spec": {
        "driver": "gpu.example.com",
        "pool": {"name": "node-1", "generation": 2, "resourceSliceCount": 1},
        "perDeviceNodeSelection": True,
        "devices": [
            {
                "name": "gpu-0",
                "attributes": {
                    "index": {"int": 0},
                    "virtual": {"bool": False},
                    "model": {"string": "a100"},
                    "driverVersion": {"version": "1.2.3"},
                    "numa": {"ints": [0, 1]},
                    "flags": {"bools": [True]},
                    "features": {"strings": ["fp8"]},
                    "compat": {"versions": ["1.0.0"]},
                },
                "capacity": {
                    "memory": {
                        "value": "40Gi",
                        "requestPolicy": {
                            "default": "1Gi",
                            "validRange": {"min": "1Gi", "max": "40Gi", "step": "1Gi"},
                        },
                    },
                    "cores": {"value": 8, "requestPolicy": {"default": 1, "validValues": [1, 2, 4, 8]}},
                },
                "consumesCounters": [{"counterSet": "gpu-0-mem", "counters": {"memory": {"value": "40Gi"}}}],
                "nodeName": "node-1",
                "taints": [{"key": "example.com/t", "value": "v", "effect": "NoSchedule", "timeAdded": TIME}],
                "bindsToNode": True,
                "bindingConditions": ["Attached"],
                "bindingFailureConditions": ["Failed"],
                "allowMultipleAllocations": True,
                "nodeAllocatableResourceMappings": {
                    "memory": {"capacityKey": "memory", "allocationMultiplier": "1"}
                },
                "nodeAllocatableResources": {
                    "cpu": {
                        "mapping": {
                            "capacityKey": "cores",
                            "capacityMultiplier": "2",
                            "deviceMultiplier": "1",
                        },
                        "overhead": {"perPod": "100m", "perContainer": "10m"},
                    }
                },
            },
            {"name": "gpu-1", "nodeSelector": NODE_SELECTOR},
            {"name": "gpu-2", "allNodes": True},
        ],
    },
}

COUNTER_SLICE: dict[str, Any] = {
    "apiVersion": API,
    "kind": "ResourceSlice",
    "metadata": {"name": "node-1-counters"},
    "spec": {
        "driver": "gpu.example.com",
        "pool": {"name": "node-1", "generation": 2, "resourceSliceCount": 2},
        "nodeSelector": NODE_SELECTOR,
        "sharedCounters": [{"name": "gpu-0-mem", "counters": {"memory": {"value": "40Gi"}}}],
    },
}

NODE_LOCAL_SLICE: dict[str, Any] = {
    "apiVersion": API,
    "kind": "ResourceSlice",
    "metadata": {"name": "node-2-gpu"},
    "spec": {
        "driver": "gpu.example.com",
        "pool": {"name": "node-2", "generation": 1, "resourceSliceCount": 1},
        "nodeName": "node-2",
        "devices": [{"name": "gpu-0"}],
    },
}

NETWORK_SLICE: dict[str, Any] = {
    "apiVersion": API,
    "kind": "ResourceSlice",
    "metadata": {"name": "fabric"},
    "spec": {
        "driver": "nic.example.com",
        "pool": {"name": "fabric", "generation": 1, "resourceSliceCount": 1},
        "allNodes": True,
        "devices": [{"name": "port-0"}],
    },
}

DEVICE_TAINT_RULE: dict[str, Any] = {
    "apiVersion": API,
    "kind": "DeviceTaintRule",
    "metadata": {"name": "broken"},
    "spec": {
        "deviceSelector": {"driver": "gpu.example.com", "pool": "node-1", "device": "gpu-0"},
        "taint": {"key": "example.com/broken", "value": "yes", "effect": "NoExecute", "timeAdded": TIME},
    },
    "status": {"conditions": [CONDITION]},
}

LABEL_SELECTOR: dict[str, Any] = {
    "matchLabels": {"app": "train"},
    "matchExpressions": [{"key": "tier", "operator": "In", "values": ["gpu"]}],
}

POD_AFFINITY_TERM: dict[str, Any] = {
    "labelSelector": LABEL_SELECTOR,
    "namespaces": ["team-a"],
    "topologyKey": "zone",
    "namespaceSelector": {"matchLabels": {"team": "a"}},
    "matchLabelKeys": ["pod-template-hash"],
    "mismatchLabelKeys": ["tenant"],
}

POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "trainer", "namespace": "team-a"},
    "spec": {
        "nodeName": "node-1",
        "nodeSelector": {"zone": "a"},
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": NODE_SELECTOR,
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 10, "preference": NODE_SELECTOR["nodeSelectorTerms"][0]}
                ],
            },
            "podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [POD_AFFINITY_TERM],
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 5, "podAffinityTerm": POD_AFFINITY_TERM}
                ],
            },
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [POD_AFFINITY_TERM]},
        },
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": LABEL_SELECTOR,
                "minDomains": 2,
                "nodeAffinityPolicy": "Honor",
                "nodeTaintsPolicy": "Ignore",
                "matchLabelKeys": ["pod-template-hash"],
            }
        ],
        "hostNetwork": False,
        "priorityClassName": "batch",
        "priority": 0,
        "preemptionPolicy": "PreemptLowerPriority",
        "schedulingGates": [{"name": "example.com/wait"}],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
        "tolerations": [
            {"key": "k", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 5},
            {"key": "gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"},
        ],
        "initContainers": [{"name": "init", "image": "i", "restartPolicy": "Always"}],
        "containers": [
            {
                "name": "main",
                "image": "registry.example.com/train:1",
                "ports": [
                    {
                        "name": "http",
                        "containerPort": 80,
                        "hostPort": 8080,
                        "protocol": "TCP",
                        "hostIP": "10.0.0.1",
                    }
                ],
                "securityContext": {"privileged": False},
                "resources": {
                    "limits": {"memory": "8Gi"},
                    "requests": {"cpu": "500m", "memory": "8Gi"},
                    "claims": [{"name": "gpu", "request": "gpu"}],
                },
            }
        ],
        "resourceClaims": [
            {"name": "gpu", "resourceClaimName": "shared-gpu"},
            {"name": "scratch", "resourceClaimTemplateName": "one-gpu"},
        ],
        "resources": {"requests": {"cpu": "1"}},
        "overhead": {"memory": "10Mi"},
        "schedulerName": "default-scheduler",
        "serviceAccountName": "trainer",
        "restartPolicy": "Always",
    },
    "status": {
        "phase": "Running",
        "conditions": [{"type": "PodResizePending", "status": "True", "reason": "Deferred"}],
        "nominatedNodeName": "node-a",
        "startTime": "2026-01-01T00:00:00Z",
        "containerStatuses": [
            {
                "name": "main",
                "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "2"}},
                "allocatedResources": {"cpu": "2"},
            }
        ],
        "initContainerStatuses": [{"name": "proxy", "allocatedResources": {"cpu": "100m"}}],
        "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "shared-gpu"}, {"name": "scratch"}],
        "extendedResourceClaimStatus": {
            "requestMappings": [
                {
                    "containerName": "main",
                    "resourceName": "example.com/gpu",
                    "requestName": "container-0-request-0",
                }
            ],
            "resourceClaimName": "trainer-extended-resources-x7k2p",
        },
        "nodeAllocatableResourceClaimStatuses": [
            {"resourceClaimName": "shared-gpu", "containers": ["main"], "resources": {"cpu": "2"}},
            {
                "resourceClaimName": "cpu-claim",
                "containers": ["main"],
                "mapping": [{"name": "cpu", "quantity": "4"}],
                "overhead": [{"name": "memory", "perPod": "1Gi", "perContainer": "500Mi"}],
            },
        ],
    },
}

NODE: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "node-1", "labels": {"kubernetes.io/hostname": "node-1"}},
    "spec": {
        "unschedulable": True,
        "taints": [
            {"key": "gpu", "value": "true", "effect": "NoSchedule", "timeAdded": "2025-01-01T00:00:00Z"}
        ],
    },
    "status": {
        "allocatable": {"cpu": "16", "memory": "64Gi"},
        "capacity": {"cpu": 16, "memory": "64Gi"},
        "images": [
            {
                "names": ["registry.example.com/trainer@sha256:0f1e", "registry.example.com/trainer:1"],
                "sizeBytes": 512000000,
            }
        ],
    },
}

NAMESPACE: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Namespace",
    "metadata": {"name": "team-a", "labels": {"resource.kubernetes.io/admin-access": "true"}},
}

PRIORITY_CLASS: dict[str, Any] = {
    "apiVersion": "scheduling.k8s.io/v1",
    "kind": "PriorityClass",
    "metadata": {"name": "batch"},
    "value": 0,
    "globalDefault": False,
    "description": "Training jobs that yield to everything else.",
    "preemptionPolicy": "Never",
}

RESOURCE_QUOTA: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "ResourceQuota",
    "metadata": {"name": "gpus", "namespace": "team-a"},
    "spec": {
        "hard": {"gpu.example.com.deviceclass.resource.k8s.io/devices": "4", "requests.cpu": "10"},
        "scopes": ["NotTerminating"],
        "scopeSelector": {
            "matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]
        },
    },
    "status": {"hard": {"requests.cpu": "10"}, "used": {"requests.cpu": "2500m"}},
}

ADMISSION_REVIEW: dict[str, Any] = {
    "apiVersion": "admission.k8s.io/v1",
    "kind": "AdmissionReview",
    "request": {
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
        "kind": {"group": "resource.k8s.io", "version": "v1", "kind": "ResourceClaim"},
        "resource": {"group": "resource.k8s.io", "version": "v1", "resource": "resourceclaims"},
        "subResource": "status",
        "requestKind": {"group": "resource.k8s.io", "version": "v1", "kind": "ResourceClaim"},
        "requestResource": {"group": "resource.k8s.io", "version": "v1", "resource": "resourceclaims"},
        "requestSubResource": "status",
        "name": "obj",
        "namespace": "team-a",
        "operation": "UPDATE",
        "userInfo": {
            "username": "system:kube-scheduler",
            "uid": "u",
            "groups": ["system:authenticated"],
            "extra": {"scopes": ["a"]},
        },
        "object": RESOURCE_CLAIM,
        "oldObject": RESOURCE_CLAIM,
        "dryRun": False,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": "UpdateOptions"},
    },
    "response": {
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
        "allowed": False,
        "status": {"code": 403, "message": "denied", "reason": "Forbidden", "status": "Failure"},
        "patch": "W10=",
        "patchType": "JSONPatch",
        "auditAnnotations": {"draguard": "x"},
        "warnings": ["w"],
    },
}

DECODABLE: dict[str, dict[str, Any]] = {
    "DeviceClass": DEVICE_CLASS,
    "ResourceClaim": RESOURCE_CLAIM,
    "ResourceClaimTemplate": RESOURCE_CLAIM_TEMPLATE,
    "ResourceSlice": RESOURCE_SLICE,
    "ResourceSlice/counters": COUNTER_SLICE,
    "ResourceSlice/node-local": NODE_LOCAL_SLICE,
    "ResourceSlice/all-nodes": NETWORK_SLICE,
    "DeviceTaintRule": DEVICE_TAINT_RULE,
    "DeviceTaintRule/v1beta2": {**DEVICE_TAINT_RULE, "apiVersion": "resource.k8s.io/v1beta2"},
    "Pod": POD,
    "Node": NODE,
    "Namespace": NAMESPACE,
    "ResourceQuota": RESOURCE_QUOTA,
    "PriorityClass": PRIORITY_CLASS,
}
