"""Random scenarios for the comparison with the real kube-scheduler, from a seed.

A :class:`Scenario` is a small cluster (a few nodes with labels, taints, allocatable, cordons;
pods already bound as load, in the test's namespace and in a second one; DeviceClasses, one
ResourceSlice per node, a RuntimeClass with an overhead, PriorityClasses) and a batch of pending
pods mixing every filter of the default profile with DRA: nodeSelector, required node affinity with
every operator and ``matchFields``, tolerations of every shape, requests with init containers,
sidecars, overhead and pod-level resources, host ports, pod (anti-)affinity, topology spread,
device-plugin and DRA-backed extended resources, claims with selectors, counts, ``All``,
``firstAvailable``, ``matchAttribute``, admin access, device tolerations and consumable capacity.

The values are drawn from small pools so that the pods collide: a request near a node's size, a
label some nodes have, a port another pod holds. Everything is plain manifests; the test builds
them on the control plane (:mod:`test_fidelity`). The same seed and namespace give the same
scenario.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

V1 = "resource.k8s.io/v1"
OTHER_NAMESPACE_LABELS = {"team": "x"}
APPS = ("web", "db", "cache")
ZONES = ("a", "b", "c")
MODELS = ("a100", "h100")


@dataclass
class Scenario:
    """What one seed builds: cluster objects (created in order, then settled) and pods to ask."""

    seed: int
    nodes: list[dict[str, Any]] = field(default_factory=list)  # add_node keyword arguments
    objects: list[dict[str, Any]] = field(default_factory=list)  # classes, slices, templates...
    load: list[dict[str, Any]] = field(default_factory=list)  # pods with spec.nodeName
    pods: list[dict[str, Any]] = field(default_factory=list)  # pending pods, asked in order
    resized: list[str] = field(default_factory=list)  # load pods given a status as if resized


class Generator:
    """Draws one scenario. ``ns``: the test's namespace (cluster-scoped names carry it);
    ``other``: a second namespace, labelled :data:`OTHER_NAMESPACE_LABELS`."""

    def __init__(self, seed: int, ns: str, other: str) -> None:
        self.rng = random.Random(seed)
        self.seed = seed
        self.ns = ns
        self.other = other
        self.driver = f"{ns}.example.com"
        self.gpu_class = f"{ns}-gpu"
        self.shared_class = f"{ns}-shared"
        self.extended = f"{ns}.example.com/gpu"  # backed by a DeviceClass
        self.plugin_resource = "example.com/foo"  # a device plugin's, in allocatable
        self.runtime_class = f"{ns}-rc"
        self.low = f"{ns}-low"
        self.high = f"{ns}-high"
        self.high_never = f"{ns}-high-never"
        self.node_names: list[str] = []
        self.evicting: set[str] = set()
        self.dra = False
        self.extended_backed = False

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def pick(self, options: Any) -> Any:
        return self.rng.choice(list(options))

    # --- the cluster -----------------------------------------------------------------------------

    def scenario(self) -> Scenario:
        out = Scenario(self.seed)
        count = self.rng.randint(2, 6)
        self.node_names = [f"{self.ns}-n{i}" for i in range(count)]
        out.nodes = [self.node(name) for name in self.node_names]
        self.evicting = {n["name"] for n in out.nodes if any(t["effect"] == "NoExecute" for t in n["taints"])}
        self.dra = self.chance(0.7)
        if self.dra:
            self.extended_backed = self.chance(0.5)
            out.objects += self.device_classes()
            out.objects += [s for name in self.node_names if (s := self.slice(name)) is not None]
        out.objects.append(self.runtime_class_object())
        out.objects += self.priority_classes()
        for name in self.node_names:
            out.load += [self.load_pod(name, i) for i in range(self.rng.randint(0, 3))]
        out.resized = [p["metadata"]["name"] for p in out.load if self.chance(0.2)]
        out.objects += self.templates_and_pods(out)
        return out

    def node(self, name: str) -> dict[str, Any]:
        labels: dict[str, str] = {}
        for key, values in (
            ("zone", (*ZONES, None)),
            ("tier", ("gold", "silver", None)),
            ("cores", ("4", "8", "16", "x", None)),
            ("gpu", ("true", None, None)),
        ):
            value = self.pick(values)
            if value is not None:
                labels[key] = value
        allocatable = {
            "cpu": self.pick(("4", "8", "16")),
            "memory": self.pick(("8Gi", "32Gi", "64Gi")),
            "pods": self.pick(("3", "110", "110")),
            "ephemeral-storage": self.pick(("10Gi", "100Gi")),
        }
        if self.chance(0.3):
            allocatable["hugepages-2Mi"] = self.pick(("0", "512Mi"))
        if self.chance(0.3):
            allocatable[self.plugin_resource] = self.pick(("1", "2"))
        taints = []
        if self.chance(0.3):
            pool = [
                {"key": "dedicated", "value": self.pick(("ml", "web")), "effect": "NoSchedule"},
                {"key": "dedicated", "value": "ml", "effect": "NoExecute"},
                {"key": "spot", "effect": self.pick(("NoSchedule", "PreferNoSchedule", "NoExecute"))},
                {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"},
                {"key": "slow", "value": "yes", "effect": "PreferNoSchedule"},
            ]
            chosen = self.rng.sample(pool, self.rng.randint(1, 2))
            taints = list({(t["key"], t["effect"]): t for t in chosen}.values())
        return {
            "name": name,
            "labels": labels,
            "allocatable": allocatable,
            "taints": taints,
            "unschedulable": self.chance(0.08),
            "images": [
                {"names": [f"registry.example.com/{image}"], "sizeBytes": size}
                for image, size in (("app:1", 600 * 2**20), ("tool:latest", 300 * 2**20))
                if self.chance(0.3)
            ],
        }

    def device_classes(self) -> list[dict[str, Any]]:
        model = f'device.driver == "{self.driver}" && device.attributes["{self.driver}"].model'
        gpu: dict[str, Any] = {"selectors": [{"cel": {"expression": f'{model} != "shared"'}}]}
        if self.extended_backed:
            gpu["extendedResourceName"] = self.extended
        shared = {"selectors": [{"cel": {"expression": f'{model} == "shared"'}}]}
        classes = [
            {"apiVersion": V1, "kind": "DeviceClass", "metadata": {"name": self.gpu_class}, "spec": gpu},
            {
                "apiVersion": V1,
                "kind": "DeviceClass",
                "metadata": {"name": self.shared_class},
                "spec": shared,
            },
        ]
        if self.extended_backed and self.chance(0.4):
            # A second class naming the same extended resource, written after the first: it wins.
            h100 = {
                "selectors": [{"cel": {"expression": f'{model} == "h100"'}}],
                "extendedResourceName": self.extended,
            }
            classes.append(
                {
                    "apiVersion": V1,
                    "kind": "DeviceClass",
                    "metadata": {"name": f"{self.ns}-a-h100"},
                    "spec": h100,
                }
            )
        return classes

    def slice(self, node: str) -> dict[str, Any] | None:
        if self.chance(0.15):
            return None
        devices = []
        for i in range(self.rng.randint(1, 4)):
            device: dict[str, Any] = {
                "name": f"gpu-{i}",
                "attributes": {
                    "index": {"int": i},
                    "model": {"string": self.pick(MODELS)},
                    "numa": {"int": self.rng.randint(0, 1)},
                },
                "capacity": {"memory": {"value": self.pick(("40Gi", "80Gi"))}},
            }
            if self.chance(0.15):
                device["taints"] = [
                    {"key": "maintenance", "value": "soon", "effect": self.pick(("NoSchedule", "NoExecute"))}
                ]
            devices.append(device)
        if self.chance(0.4):
            devices.append(
                {
                    "name": "shared-0",
                    "allowMultipleAllocations": True,
                    "attributes": {"model": {"string": "shared"}},
                    "capacity": {
                        "slots": {"value": "4"},
                        "memory": {
                            "value": "80Gi",
                            "requestPolicy": {
                                "default": "10Gi",
                                "validRange": {"min": "10Gi", "step": "10Gi"},
                            },
                        },
                    },
                }
            )
        spec = {
            "driver": self.driver,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        }
        return {
            "apiVersion": V1,
            "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-devices"},
            "spec": spec,
        }

    def priority_classes(self) -> list[dict[str, Any]]:
        classes = [(self.low, -100, None), (self.high, 1000, None), (self.high_never, 1000, "Never")]
        return [
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": name},
                "value": value,
                **({"preemptionPolicy": policy} if policy else {}),
            }
            for name, value, policy in classes
        ]

    def runtime_class_object(self) -> dict[str, Any]:
        return {
            "apiVersion": "node.k8s.io/v1",
            "kind": "RuntimeClass",
            "metadata": {"name": self.runtime_class},
            "handler": "runc",
            "overhead": {"podFixed": {"cpu": self.pick(("250m", "1")), "memory": "64Mi"}},
        }

    # --- pods ------------------------------------------------------------------------------------

    def labels(self) -> dict[str, str]:
        out = {}
        if self.chance(0.8):
            out["app"] = self.pick(APPS)
        if self.chance(0.5):
            out["ver"] = self.pick(("1", "2"))
        return out

    def container(self, name: str, cpu: tuple[Any, ...], memory: tuple[Any, ...]) -> dict[str, Any]:
        requests = {}
        if (c := self.pick(cpu)) is not None:
            requests["cpu"] = c
        if (m := self.pick(memory)) is not None:
            requests["memory"] = m
        if self.chance(0.1):
            requests["ephemeral-storage"] = self.pick(("1Gi", "20Gi"))
        image = self.pick(("registry.example.com/app:1", "registry.example.com/tool"))
        return {"name": name, "image": image, "resources": {"requests": requests}}

    def load_pod(self, node: str, index: int) -> dict[str, Any]:
        container = self.container("main", (None, "500m", "1", "2"), (None, "1Gi", "4Gi"))
        if self.chance(0.25):
            container["ports"] = [self.host_port()]
        spec: dict[str, Any] = {"nodeName": node, "containers": [container]}
        if node in self.evicting:  # or the taint eviction controller deletes it while pods are asked
            spec["tolerations"] = [{"operator": "Exists"}]
        if self.chance(0.2):
            spec["affinity"] = {
                "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [self.affinity_term()]}
            }
        if self.chance(0.35):
            spec["priorityClassName"] = self.low
        namespace = self.other if self.chance(0.3) else self.ns
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"load-{node.rsplit('-', 1)[1]}-{index}",
                "namespace": namespace,
                "labels": self.labels(),
            },
            "spec": spec,
        }

    def host_port(self) -> dict[str, Any]:
        port: dict[str, Any] = {"containerPort": 80, "hostPort": self.pick((8080, 8081))}
        if self.chance(0.3):
            port["protocol"] = self.pick(("TCP", "UDP"))
        if self.chance(0.3):
            port["hostIP"] = self.pick(("127.0.0.1", "10.0.0.1", "0.0.0.0"))
        return port

    def affinity_term(self) -> dict[str, Any]:
        term: dict[str, Any] = {
            "labelSelector": {"matchLabels": {"app": self.pick(APPS)}},
            "topologyKey": self.pick(("zone", "kubernetes.io/hostname", "tier")),
        }
        if self.chance(0.2):
            term["labelSelector"] = {
                "matchExpressions": [
                    {"key": "app", "operator": self.pick(("In", "NotIn")), "values": [self.pick(APPS)]}
                ]
            }
        roll = self.rng.random()
        if roll < 0.15:
            term["namespaces"] = [self.other]
        elif roll < 0.3:
            term["namespaceSelector"] = self.pick(({}, {"matchLabels": OTHER_NAMESPACE_LABELS}))
        return term

    def node_selector_term(self) -> dict[str, Any]:
        expressions = []
        for _ in range(self.rng.randint(1, 2)):
            operator = self.pick(("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"))
            if operator in ("Gt", "Lt"):
                expressions.append(
                    {"key": "cores", "operator": operator, "values": [self.pick(("4", "8", "12"))]}
                )
            elif operator in ("In", "NotIn"):
                key = self.pick(("zone", "tier"))
                values = ZONES if key == "zone" else ("gold", "silver")
                expressions.append(
                    {
                        "key": key,
                        "operator": operator,
                        "values": self.rng.sample(values, self.rng.randint(1, 2)),
                    }
                )
            else:
                expressions.append({"key": self.pick(("zone", "gpu", "tier")), "operator": operator})
        term: dict[str, Any] = {"matchExpressions": expressions}
        if self.chance(0.2):
            name = self.pick([*self.node_names, "elsewhere"])  # the API allows one value
            term["matchFields"] = [
                {"key": "metadata.name", "operator": self.pick(("In", "NotIn")), "values": [name]}
            ]
            if self.chance(0.5):
                del term["matchExpressions"]
        return term

    def tolerations(self) -> list[dict[str, Any]]:
        pool = [
            {"operator": "Exists"},
            {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"},
            {"key": "dedicated", "operator": "Exists"},
            {"key": "dedicated", "value": "web"},
            {
                "key": "dedicated",
                "operator": "Equal",
                "value": "ml",
                "effect": "NoExecute",
                "tolerationSeconds": 3600,
            },
            {"key": "spot", "operator": "Exists", "effect": "NoExecute"},
            {"key": "spot", "operator": "Exists", "effect": "NoSchedule"},
            {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
            {"key": "slow", "operator": "Exists", "effect": "PreferNoSchedule"},
        ]
        return self.rng.sample(pool, self.rng.randint(1, 2))

    def spread(self, labels: dict[str, str]) -> dict[str, Any]:
        constraint: dict[str, Any] = {
            "maxSkew": self.rng.randint(1, 2),
            "topologyKey": self.pick(("zone", "kubernetes.io/hostname")),
            "whenUnsatisfiable": self.pick(("DoNotSchedule", "DoNotSchedule", "ScheduleAnyway")),
            "labelSelector": {"matchLabels": {"app": labels.get("app") or self.pick(APPS)}},
        }
        if constraint["whenUnsatisfiable"] == "DoNotSchedule" and self.chance(0.3):
            constraint["minDomains"] = self.rng.randint(2, 4)
        if self.chance(0.3):
            constraint["nodeAffinityPolicy"] = self.pick(("Honor", "Ignore"))
        if self.chance(0.3):
            constraint["nodeTaintsPolicy"] = self.pick(("Honor", "Ignore"))
        if self.chance(0.2) and "ver" in labels:
            constraint["matchLabelKeys"] = ["ver"]
        return constraint

    def device_request(self, name: str) -> dict[str, Any]:
        model = f'device.attributes["{self.driver}"].model'
        roll = self.rng.random()
        if roll < 0.15:
            return {
                "name": name,
                "firstAvailable": [
                    {
                        "name": "h100",
                        "deviceClassName": self.gpu_class,
                        "selectors": [{"cel": {"expression": f'{model} == "h100"'}}],
                    },
                    {"name": "any", "deviceClassName": self.gpu_class, "count": self.rng.randint(1, 2)},
                ],
            }
        if roll < 0.3:
            capacity = {"requests": {"memory": self.pick(("10Gi", "30Gi", "50Gi"))}}
            return {"name": name, "exactly": {"deviceClassName": self.shared_class, "capacity": capacity}}
        exactly: dict[str, Any] = {"deviceClassName": self.gpu_class}
        if self.chance(0.15):
            exactly["allocationMode"] = "All"
        else:
            exactly["count"] = self.rng.randint(1, 3)
        if self.chance(0.35):
            exactly["selectors"] = [{"cel": {"expression": f'{model} == "{self.pick(MODELS)}"'}}]
        if self.chance(0.2):
            exactly["tolerations"] = [{"key": "maintenance", "operator": "Exists"}]
        if self.chance(0.08):
            exactly["adminAccess"] = True
        return {"name": name, "exactly": exactly}

    def template(self, name: str) -> dict[str, Any]:
        requests = [self.device_request(f"r{i}") for i in range(self.rng.randint(1, 2))]
        devices: dict[str, Any] = {"requests": requests}
        if (
            len(requests) == 2
            and self.chance(0.4)
            and all("exactly" in r and r["exactly"]["deviceClassName"] == self.gpu_class for r in requests)
        ):
            devices["constraints"] = [{"matchAttribute": f"{self.driver}/numa"}]
        return {
            "apiVersion": V1,
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": self.ns},
            "spec": {"spec": {"devices": devices}},
        }

    def templates_and_pods(self, out: Scenario) -> list[dict[str, Any]]:
        """The pending pods, the claim templates they use and a claim some of them share (the
        first to bind allocates it; the others must follow it to its node)."""
        made: list[dict[str, Any]] = []
        if self.dra:
            shared = self.template("shared")
            made.append({**shared, "kind": "ResourceClaim", "spec": shared["spec"]["spec"]})
        for i in range(self.rng.randint(6, 10)):
            focused = self.dra and self.chance(0.35)
            pod = self.pending_pod(f"p{i}", 0.3 if focused else self.pick((0.5, 1.0)))
            claims = []
            if focused or (self.dra and self.chance(0.3)):
                made.append(self.template(f"t{i}"))
                claims.append({"name": "devices", "resourceClaimTemplateName": f"t{i}"})
            if self.dra and self.chance(0.15):
                claims.append({"name": "shared", "resourceClaimName": "shared"})
            if claims:
                pod["spec"]["resourceClaims"] = claims
                main = pod["spec"]["containers"][0]
                main["resources"]["claims"] = [{"name": c["name"]} for c in claims]
            out.pods.append(pod)
        return made

    def pending_pod(self, name: str, strictness: float) -> dict[str, Any]:
        """A pending pod; ``strictness`` scales the odds of each constraint (the pods that mostly
        ask for devices get few others, so that they reach the DRA filter)."""

        def chance(p: float) -> bool:
            return self.chance(p * strictness)

        labels = self.labels()
        spec: dict[str, Any] = {}
        level = chance(0.1)
        if level:
            main = self.container("main", (None,), (None,))
            spec["resources"] = {
                "requests": {"cpu": self.pick(("1", "3")), "memory": self.pick(("1Gi", "8Gi"))}
            }
        else:
            main = self.container(
                "main", (None, "100m", "500m", "1", "2", "3", "6"), (None, "128Mi", "1Gi", "4Gi", "16Gi")
            )
        spec["containers"] = [main]
        limits: dict[str, str] = {}
        if chance(0.12):
            limits[self.plugin_resource] = self.pick(("1", "2"))
        if self.dra and chance(0.2):
            resource = (
                self.extended
                if self.extended_backed and chance(0.7)
                else f"deviceclass.resource.kubernetes.io/{self.gpu_class}"
            )
            limits[resource] = self.pick(("1", "2"))
        if not level and chance(0.08):
            limits["hugepages-2Mi"] = "256Mi"
            limits["memory"] = main["resources"]["requests"].get("memory", "1Gi")
            main["resources"]["requests"]["memory"] = limits["memory"]
        if limits:
            main["resources"]["limits"] = limits
        if chance(0.2):
            main["ports"] = [self.host_port()]
        init = []
        if chance(0.2):
            init.append(self.container("init", ("2", "5"), (None, "2Gi")))
            if limits and chance(0.5):  # the init container asks for the same extended resources
                init[-1]["resources"]["limits"] = {n: self.pick(("1", "3")) for n in limits if "/" in n}
        if chance(0.15):
            sidecar = self.container("proxy", ("500m", "1"), (None, "512Mi"))
            sidecar["restartPolicy"] = "Always"
            if chance(0.3):
                sidecar["ports"] = [self.host_port()]
            init.append(sidecar)
        if init and not level:
            self.rng.shuffle(init)
            spec["initContainers"] = init
        if chance(0.1):
            spec["runtimeClassName"] = self.runtime_class
        if chance(0.2):
            spec["nodeSelector"] = self.pick(
                (
                    {"zone": self.pick(ZONES)},
                    {"kubernetes.io/hostname": self.pick(self.node_names)},
                    {"gpu": "true"},
                )
            )
        affinity: dict[str, Any] = {}
        if chance(0.3):
            terms = [self.node_selector_term() for _ in range(self.rng.randint(1, 2))]
            affinity["nodeAffinity"] = {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}
            }
        if chance(0.2):
            affinity["podAffinity"] = {
                "requiredDuringSchedulingIgnoredDuringExecution": [self.affinity_term()]
            }
        if chance(0.2):
            term = self.affinity_term()
            if chance(0.3) and "ver" in labels:
                term[self.pick(("matchLabelKeys", "mismatchLabelKeys"))] = ["ver"]
            affinity["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
        if affinity:
            spec["affinity"] = affinity
        if chance(0.4):
            spec["tolerations"] = self.tolerations()
        if chance(0.25):
            spec["topologySpreadConstraints"] = [self.spread(labels)]
        roll = self.rng.random()
        if roll < 0.2:
            spec["priorityClassName"] = self.high_never if chance(0.2) else self.high
        elif roll < 0.3:
            spec["priorityClassName"] = self.low
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": self.ns, "labels": labels},
            "spec": spec,
        }


def resized_status(pod: dict[str, Any], now: str) -> dict[str, Any]:
    """A status as a kubelet reports it while it resizes the pod's main container in place: the
    requests it runs with and those it allocated, here 2 CPUs whatever the spec asks (the
    scheduler counts the larger)."""
    main = pod["spec"]["containers"][0]
    asked = main.get("resources", {}).get("requests", {})
    running = {"cpu": "2", **({"memory": asked["memory"]} if "memory" in asked else {})}
    return {
        "phase": "Running",
        "startTime": now,
        "containerStatuses": [
            {
                "name": main["name"],
                "image": main["image"],
                "imageID": "",
                "ready": True,
                "restartCount": 0,
                "state": {"running": {"startedAt": now}},
                "resources": {"requests": running},
                "allocatedResources": running,
            }
        ],
    }


def generate(seed: int, ns: str, other: str) -> Scenario:
    return Generator(seed, ns, other).scenario()
