"""The dry run against the real kube-scheduler 1.36: the same cluster, the same pod, the same answer.

Each scenario builds a cluster on the session's control plane (Nodes from ``add_node``, DRA objects,
pods already bound), then asks one pod at a time: the cluster is read back from the API server
(everything the scheduler sees), the pod is created and the scheduler's decision awaited, and
``draguard allocate`` is run on the read-back objects and the pod. Where the scheduler bound the
pod, draguard must say it fits there, among its best-scored nodes, with the same devices; where
the scheduler left it pending, draguard must say it fits nowhere with the PodScheduled condition's
reason and message, word for word (generated claim names aside).

Cluster-scoped names carry the test's namespace, so scenarios never see each other's devices;
nodes left by other tests are deleted first, since every Node is a candidate for every pod.
"""

from __future__ import annotations

import io
import json
import re
import time
from collections.abc import Iterator
from contextlib import redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from controlplane import ControlPlane, call, wait_for

from webhook import cli

V1 = "resource.k8s.io/v1"
SETTLE = 0.7  # seconds for the scheduler's informers to see what a scenario just created
STATE = [
    ("/api/v1/nodes", "v1", "Node"),
    ("/api/v1/namespaces", "v1", "Namespace"),
    ("/api/v1/pods", "v1", "Pod"),
    ("/apis/resource.k8s.io/v1/deviceclasses", V1, "DeviceClass"),
    ("/apis/resource.k8s.io/v1/resourceslices", V1, "ResourceSlice"),
    ("/apis/resource.k8s.io/v1/resourceclaims", V1, "ResourceClaim"),
    ("/apis/resource.k8s.io/v1/resourceclaimtemplates", V1, "ResourceClaimTemplate"),
]


@pytest.fixture(scope="module")
def plane(control_plane: ControlPlane) -> ControlPlane:
    control_plane.start_scheduler()
    control_plane.start_controller_manager()  # claims from templates
    return control_plane


@dataclass
class Decision:
    """What the scheduler did with a pod: bound it (``node``, the devices of each claim), or left it
    pending with its PodScheduled condition."""

    node: str | None
    reason: str | None = None
    message: str | None = None
    devices: tuple[frozenset[str], ...] = ()


class Scene:
    """One scenario's cluster on the shared control plane."""

    def __init__(self, plane: ControlPlane, namespace: str, tmp: Path) -> None:
        self.plane = plane
        self.ns = namespace
        self.api = plane.client()
        self.tmp = tmp
        self.driver = f"{namespace}.example.com"
        self.node_names: list[str] = []
        for node in self.get("/api/v1/nodes")["items"]:
            call(self.api, "DELETE", f"/api/v1/nodes/{node['metadata']['name']}")

    def get(self, path: str) -> dict[str, Any]:
        answer = call(self.api, "GET", path)
        assert answer.status == 200, answer.body
        return answer.body

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        answer = call(self.api, "POST", path, body)
        assert answer.status == 201, answer.body
        return answer.body

    def n(self, short: str) -> str:
        """A cluster-scoped name of this scenario."""
        return f"{self.ns}-{short}"

    # --- building the cluster ------------------------------------------------------------------

    def node(self, short: str, **options: Any) -> str:
        name = self.n(short)
        self.plane.add_node(name, **options)
        self.node_names.append(name)
        return name

    def device_class(self, short: str, expression: str = "", **spec: Any) -> str:
        selector = f'device.driver == "{self.driver}"' + (f" && {expression}" if expression else "")
        body = {"selectors": [{"cel": {"expression": selector}}], **spec}
        self.post(
            "/apis/resource.k8s.io/v1/deviceclasses",
            {"apiVersion": V1, "kind": "DeviceClass", "metadata": {"name": self.n(short)}, "spec": body},
        )
        return self.n(short)

    def gpus(self, node: str, count: int, **attributes: Any) -> None:
        """A one-slice pool of ``count`` GPUs on ``node`` (its full name)."""
        devices = [
            {
                "name": f"gpu-{i}",
                "attributes": {"index": {"int": i}, **{k: {"string": v} for k, v in attributes.items()}},
            }
            for i in range(count)
        ]
        spec = {
            "driver": self.driver,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        }
        self.post(
            "/apis/resource.k8s.io/v1/resourceslices",
            {"apiVersion": V1, "kind": "ResourceSlice", "metadata": {"name": f"{node}-gpus"}, "spec": spec},
        )

    def claim(self, name: str, *requests: dict[str, Any], allocation: dict[str, Any] | None = None) -> None:
        path = f"/apis/resource.k8s.io/v1/namespaces/{self.ns}/resourceclaims"
        body = {
            "apiVersion": V1,
            "kind": "ResourceClaim",
            "metadata": {"name": name},
            "spec": {"devices": {"requests": list(requests)}},
        }
        created = self.post(path, body)
        if allocation is not None:
            created["status"] = {"allocation": allocation}
            answer = call(self.api, "PUT", f"{path}/{name}/status", created)
            assert answer.status == 200, answer.body

    def template(self, name: str, *requests: dict[str, Any]) -> None:
        body = {
            "apiVersion": V1,
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": name},
            "spec": {"spec": {"devices": {"requests": list(requests)}}},
        }
        self.post(f"/apis/resource.k8s.io/v1/namespaces/{self.ns}/resourceclaimtemplates", body)

    def bound(self, name: str, node: str, **spec: Any) -> None:
        """A pod already on ``node`` (load: its requests, host ports and labels)."""
        labels = spec.pop("labels", {})
        body = pod_manifest(name, labels=labels, nodeName=node, **spec)
        self.post(f"/api/v1/namespaces/{self.ns}/pods", body)

    # --- asking --------------------------------------------------------------------------------

    def state(self) -> list[dict[str, Any]]:
        objects = []
        for path, api_version, kind in STATE:
            for item in self.get(path)["items"]:
                objects.append({"apiVersion": api_version, "kind": kind, **item})
        return objects

    def ask(
        self, pod: dict[str, Any], *, keep: bool = False, sequence: bool = False, retried: bool = False
    ) -> tuple[Decision, dict[str, Any]]:
        """The scheduler's decision on ``pod`` and draguard's answer on the cluster as it was. The
        objects created just before reach the scheduler's informers a moment later: give them that
        moment, or the scheduler answers for a cluster draguard never saw. ``retried``: the first
        attempt is expected to fail and a later one to bind, so wait for the binding."""
        time.sleep(SETTLE)
        before = self.state()
        created = self.post(f"/api/v1/namespaces/{self.ns}/pods", pod)
        decision = self.decision(pod["metadata"]["name"], bound=retried)
        asked = {
            **pod,
            "metadata": {**pod["metadata"], "namespace": self.ns, "uid": created["metadata"]["uid"]},
        }
        answer = self.draguard([*before, asked], pod["metadata"]["name"])
        if decision.node is None and not keep:
            call(self.api, "DELETE", f"/api/v1/namespaces/{self.ns}/pods/{pod['metadata']['name']}")
        return decision, answer

    def decision(self, name: str, bound: bool = False) -> Decision:
        """What kube-scheduler decided on pod ``name``: its node, or the first unschedulable reason
        (``bound``: only a binding counts, for pods whose first attempt is meant to fail)."""
        path = f"/api/v1/namespaces/{self.ns}/pods/{name}"

        def decided() -> dict[str, Any] | None:
            pod = self.get(path)
            conditions = {c["type"]: c for c in pod.get("status", {}).get("conditions", [])}
            scheduled = conditions.get("PodScheduled")
            refused = not bound and scheduled is not None and scheduled["status"] == "False"
            return pod if pod["spec"].get("nodeName") or refused else None

        pod = wait_for(f"kube-scheduler to decide on {name}", decided)
        if not pod["spec"].get("nodeName"):
            condition = next(c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")
            return Decision(None, condition["reason"], condition["message"])
        return Decision(pod["spec"]["nodeName"], devices=self.devices(pod))

    def devices(self, pod: dict[str, Any]) -> tuple[frozenset[str], ...]:
        """``driver/pool/device`` of each claim of the bound pod, in draguard's claim order."""
        status = pod.get("status", {})
        generated = {s["name"]: s.get("resourceClaimName") for s in status.get("resourceClaimStatuses", [])}
        names = [
            r.get("resourceClaimName") or generated.get(r["name"])
            for r in pod["spec"].get("resourceClaims", [])
        ]
        extended = status.get("extendedResourceClaimStatus")
        if extended:
            names.append(extended["resourceClaimName"])
        found = []
        for name in names:
            claim = wait_for(f"claim {name} allocated", lambda name=name: self._allocated(name))
            found.append(
                frozenset(f"{r['driver']}/{r['pool']}/{r['device']}" for r in claim["devices"]["results"])
            )
        return tuple(found)

    def _allocated(self, name: str) -> dict[str, Any] | None:
        claim = self.get(f"/apis/resource.k8s.io/v1/namespaces/{self.ns}/resourceclaims/{name}")
        allocation: dict[str, Any] | None = claim.get("status", {}).get("allocation")
        return allocation

    def draguard(self, objects: list[dict[str, Any]], pod: str, *args: str) -> dict[str, Any]:
        path = self.tmp / f"{pod}.yaml"
        path.write_text(yaml.safe_dump_all(objects))
        out = io.StringIO()
        with redirect_stdout(out):
            code = cli.main(["allocate", "-f", str(path), "--pod", f"{self.ns}/{pod}", "-o", "json", *args])
        assert code in (0, 1), out.getvalue()
        (answer,) = json.loads(out.getvalue())["pods"]
        assert isinstance(answer, dict)
        return answer

    def close(self) -> None:
        for name in self.node_names:
            call(self.api, "DELETE", f"/api/v1/nodes/{name}")


@pytest.fixture
def scene(plane: ControlPlane, kube_namespace: str, tmp_path: Path) -> Iterator[Scene]:
    built = Scene(plane, kube_namespace, tmp_path)
    yield built
    built.close()


def pod_manifest(
    name: str, *, cpu: str | None = None, labels: dict[str, str] | None = None, **spec: Any
) -> dict[str, Any]:
    resources = {"requests": {"cpu": cpu}} if cpu else {}
    ports = spec.pop("ports", None)
    limits = spec.pop("limits", None)
    container: dict[str, Any] = {
        "name": "main",
        "image": "registry.example.com/app:1",
        "resources": resources,
    }
    if limits:
        container["resources"] = {**resources, "limits": limits}
    if ports:
        container["ports"] = ports
    if "claims" in spec:
        claims = spec.pop("claims")
        spec["resourceClaims"] = claims
        container["resources"] = {**container["resources"], "claims": [{"name": c["name"]} for c in claims]}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"containers": [container], **spec},
    }


def request(name: str, device_class: str, count: int = 1, **exactly: Any) -> dict[str, Any]:
    return {"name": name, "exactly": {"deviceClassName": device_class, "count": count, **exactly}}


def generated_names_removed(message: str) -> str:
    """A message with the resourceclaim controller's random name suffixes dropped (draguard names a
    template's claim ``<pod>-<claim>``, the controller ``<pod>-<claim>-<5 random characters>``)."""
    return re.sub(r"(\w+-\w+)-[a-z0-9]{5}\b", r"\1", message)


def agree(decision: Decision, answer: dict[str, Any]) -> None:
    """draguard's answer says what the scheduler did."""
    fitting = [n["node"] for n in answer["nodes"] if n["fits"]]
    if decision.node is None:
        assert not answer["fits"] and fitting == [], answer["message"]
        assert answer["reason"] == decision.reason
        assert answer["message"] == generated_names_removed(decision.message or ""), answer["nodes"]
        return
    assert answer["fits"] and decision.node in fitting, (decision, answer["message"])
    if len(fitting) > 1:
        assert decision.node in answer["preferred"], (decision.node, answer["message"])
    entry = next(n for n in answer["nodes"] if n["node"] == decision.node)
    devices = tuple(
        frozenset(f"{r['driver']}/{r['pool']}/{r['device']}" for r in result["devices"].get("results", []))
        for result in entry["results"]
        if result is not None
    )
    assert devices == decision.devices


# --- the non-DRA filters ---------------------------------------------------------------------------


def test_cordoned_tainted_and_full_nodes(scene: Scene) -> None:
    scene.node("cordoned", unschedulable=True)
    tainted = scene.node("tainted", taints=[{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}])
    small = scene.node("small", allocatable={"cpu": "2", "pods": "2"})
    scene.bound("load", small, cpu="1")
    scene.bound("load-2", small)
    decision, answer = scene.ask(pod_manifest("big", cpu="4"))
    assert decision.node is None  # cordoned, tainted, small: too many pods and cpu
    agree(decision, answer)
    assert "2 Insufficient cpu" not in answer["message"] and "1 Too many pods" in answer["message"]
    tolerant = pod_manifest("tolerant", cpu="1", tolerations=[{"key": "dedicated", "operator": "Exists"}])
    decision, answer = scene.ask(tolerant)
    assert decision.node == tainted
    agree(decision, answer)


def test_node_selector_required_affinity_and_match_fields(scene: Scene) -> None:
    a = scene.node("a", labels={"zone": "a"})
    scene.node("b", labels={"zone": "b"})
    decision, answer = scene.ask(pod_manifest("nowhere", nodeSelector={"zone": "c"}))
    agree(decision, answer)
    pinned = {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [a]}]}]
    }
    decision, answer = scene.ask(
        pod_manifest(
            "pinned-full",
            cpu="64",
            affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": pinned}},
        )
    )
    agree(decision, answer)
    assert "node(s) didn't satisfy plugin(s) [NodeAffinity]" in answer["message"]
    decision, answer = scene.ask(
        pod_manifest(
            "zone-a",
            affinity={
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
                        ]
                    }
                }
            },
        )
    )
    assert decision.node == a
    agree(decision, answer)


def test_host_ports_and_init_containers_and_sidecars(scene: Scene) -> None:
    node = scene.node("n", allocatable={"cpu": "4"})
    scene.bound("web", node, ports=[{"containerPort": 80, "hostPort": 8080}])
    decision, answer = scene.ask(pod_manifest("port", ports=[{"containerPort": 80, "hostPort": 8080}]))
    agree(decision, answer)
    # The init container's 5 CPUs peak above the regular container's 1 plus the sidecar's 1.
    init = {"name": "init", "image": "x", "resources": {"requests": {"cpu": "5"}}}
    sidecar = {
        "name": "proxy",
        "image": "x",
        "restartPolicy": "Always",
        "resources": {"requests": {"cpu": "1"}},
    }
    decision, answer = scene.ask(pod_manifest("init", cpu="1", initContainers=[init]))
    agree(decision, answer)
    decision, answer = scene.ask(pod_manifest("sidecar", cpu="1", initContainers=[sidecar]))
    assert decision.node == node
    agree(decision, answer)


def test_pod_affinity_anti_affinity_and_the_bound_pods_anti_affinity(scene: Scene) -> None:
    a = scene.node("a", labels={"zone": "a"})
    b = scene.node("b", labels={"zone": "b"})
    scene.node("c")  # no zone label
    anti = [{"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "zone"}]
    scene.bound(
        "web",
        a,
        labels={"app": "web"},
        affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": anti}},
    )
    scene.bound("cache", b, labels={"app": "cache"})
    near_web = [{"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "zone"}]
    decision, answer = scene.ask(
        pod_manifest(
            "db",
            labels={"app": "db"},
            affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": near_web}},
        )
    )
    agree(decision, answer)  # only zone a has a web pod, and the web pod refuses db pods there
    away = [{"labelSelector": {"matchLabels": {"app": "cache"}}, "topologyKey": "zone"}]
    decision, answer = scene.ask(
        pod_manifest(
            "lonely", affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": away}}
        )
    )
    agree(decision, answer)


def test_topology_spread_skew_and_missing_label(scene: Scene) -> None:
    a = scene.node("a", labels={"zone": "a"})
    scene.node("b", labels={"zone": "b"})
    scene.node("c")  # no zone label
    for i in range(2):
        scene.bound(f"w{i}", a, labels={"app": "w"})
    spread = [
        {
            "maxSkew": 1,
            "topologyKey": "zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "w"}},
        }
    ]
    decision, answer = scene.ask(
        pod_manifest(
            "w-new", labels={"app": "w"}, topologySpreadConstraints=spread, nodeSelector={"zone": "a"}
        )
    )
    agree(decision, answer)
    decision, answer = scene.ask(
        pod_manifest("w-next", labels={"app": "w"}, topologySpreadConstraints=spread)
    )
    assert decision.node is not None and decision.node.endswith("-b")
    agree(decision, answer)


# --- DRA, and DRA with the other filters -------------------------------------------------------------


def test_template_claims_with_selectors_resources_and_taints(scene: Scene) -> None:
    a = scene.node("a", allocatable={"cpu": "2"})
    b = scene.node("b", taints=[{"key": "gpu", "effect": "NoSchedule"}])
    c = scene.node("c")
    for node, model in ((a, "a100"), (b, "a100"), (c, "h100")):
        scene.gpus(node, 2, model=model)
    gpu = scene.device_class("gpu")
    scene.template(
        "two-a100",
        request(
            "g",
            gpu,
            2,
            selectors=[{"cel": {"expression": f'device.attributes["{scene.driver}"].model == "a100"'}}],
        ),
    )
    claims = [{"name": "g", "resourceClaimTemplateName": "two-a100"}]
    decision, answer = scene.ask(pod_manifest("train", cpu="4", claims=claims))
    agree(decision, answer)  # a: cpu; b: taint; c: only h100s
    assert "1 cannot allocate all claims" in answer["message"]
    decision, answer = scene.ask(pod_manifest("train-small", cpu="1", claims=claims))
    assert decision.node == a
    agree(decision, answer)


def test_a_missing_device_class_refuses_the_pod_before_any_node(scene: Scene) -> None:
    scene.node("a")
    scene.template("nocls", request("g", scene.n("missing")))
    decision, answer = scene.ask(
        pod_manifest("p", claims=[{"name": "g", "resourceClaimTemplateName": "nocls"}])
    )
    agree(decision, answer)


def test_a_selector_error_aborts_the_whole_attempt(scene: Scene) -> None:
    a = scene.node("a")
    b = scene.node("b")
    scene.gpus(a, 1, model="a100")
    scene.gpus(b, 1)  # no model attribute: the selector fails here
    gpu = scene.device_class("gpu")
    scene.template(
        "bad",
        request(
            "g",
            gpu,
            selectors=[{"cel": {"expression": f'device.attributes["{scene.driver}"].model == "a100"'}}],
        ),
    )
    decision, answer = scene.ask(
        pod_manifest("p", claims=[{"name": "g", "resourceClaimTemplateName": "bad"}])
    )
    assert decision.reason == "SchedulerError"
    agree(decision, answer)


def test_extended_resources_backed_by_a_device_class(scene: Scene) -> None:
    plugin = scene.node("plugin", allocatable={"example.com/gpu": "1"})
    dra = scene.node("dra")
    scene.gpus(dra, 2)
    scene.device_class("gpu", extendedResourceName="example.com/gpu")
    decision, answer = scene.ask(pod_manifest("three", limits={"example.com/gpu": "3"}))
    agree(decision, answer)  # plugin: 1 < 3; dra: 2 devices < 3
    decision, answer = scene.ask(
        pod_manifest("two", limits={"example.com/gpu": "2"}, nodeSelector={"kubernetes.io/hostname": dra})
    )
    assert decision.node == dra
    agree(decision, answer)
    decision, answer = scene.ask(
        pod_manifest("one", limits={"example.com/gpu": "1"}, nodeSelector={"kubernetes.io/hostname": plugin})
    )
    assert decision.node == plugin
    agree(decision, answer)


def test_a_claim_allocated_elsewhere_and_reserved_by_nobody_is_deallocated(scene: Scene) -> None:
    a = scene.node("a")
    b = scene.node("b")
    scene.gpus(a, 1)
    scene.gpus(b, 1)
    gpu = scene.device_class("gpu")
    pinned = {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [a]}]}]
    }
    scene.claim(
        "shared",
        request("g", gpu),
        allocation={
            "devices": {"results": [{"request": "g", "driver": scene.driver, "pool": a, "device": "gpu-0"}]},
            "nodeSelector": pinned,
        },
    )
    pod = pod_manifest(
        "p", nodeSelector={"kubernetes.io/hostname": b}, claims=[{"name": "g", "resourceClaimName": "shared"}]
    )
    decision, answer = scene.ask(pod, retried=True)
    # The first attempt fails on b (the claim is allocated for a), PostFilter deallocates it, and the
    # next attempt allocates it on b.
    assert decision.node == b
    agree(decision, answer)

    def failed() -> list[str]:
        events = scene.get(f"/api/v1/namespaces/{scene.ns}/events")["items"]
        return [e["message"] for e in events if e.get("reason") == "FailedScheduling"]

    # The first attempt's message reaches the pod's events (written asynchronously).
    assert answer["earlierAttempts"] == wait_for("the FailedScheduling event", failed)[:1]


def test_prioritized_alternatives_are_scored(scene: Scene) -> None:
    a = scene.node("a")
    b = scene.node("b")
    scene.gpus(a, 1, model="h100")
    scene.gpus(b, 1, model="a100")
    gpu = scene.device_class("gpu")
    model = f'device.attributes["{scene.driver}"].model'
    alternatives = {
        "name": "g",
        "firstAvailable": [
            {
                "name": "h100",
                "deviceClassName": gpu,
                "selectors": [{"cel": {"expression": f'{model} == "h100"'}}],
            },
            {"name": "any", "deviceClassName": gpu},
        ],
    }
    scene.template("prio", alternatives)
    decision, answer = scene.ask(
        pod_manifest("p", claims=[{"name": "g", "resourceClaimTemplateName": "prio"}])
    )
    assert decision.node == a and answer["preferred"] == [a]
    agree(decision, answer)


def test_least_allocated_node_is_preferred(scene: Scene) -> None:
    busy = scene.node("busy")
    scene.node("idle")
    scene.bound("load", busy, cpu="6")
    decision, answer = scene.ask(pod_manifest("p", cpu="1"))
    assert decision.node is not None and decision.node != busy
    agree(decision, answer)


def test_pods_one_after_another_share_what_is_left(scene: Scene) -> None:
    a = scene.node("a")
    scene.gpus(a, 1)
    gpu = scene.device_class("gpu")
    scene.template("one", request("g", gpu))
    first = pod_manifest("first", claims=[{"name": "g", "resourceClaimTemplateName": "one"}])
    second = pod_manifest("second", claims=[{"name": "g", "resourceClaimTemplateName": "one"}])
    before = scene.state()
    decision, answer = scene.ask(first, keep=True)
    agree(decision, answer)
    decision, _ = scene.ask(second)
    assert decision.node is None
    uids = {
        p["metadata"]["name"]: p["metadata"]["uid"]
        for p in scene.get(f"/api/v1/namespaces/{scene.ns}/pods")["items"]
    }
    asked = [
        {
            **p,
            "metadata": {**p["metadata"], "namespace": scene.ns, "uid": uids.get(p["metadata"]["name"], "x")},
        }
        for p in (first, second)
    ]
    path = scene.tmp / "sequence.yaml"
    path.write_text(yaml.safe_dump_all([*before, *asked]))
    out = io.StringIO()
    with redirect_stdout(out):
        cli.main(["allocate", "-f", str(path), "--sequence", "-o", "json"])
    placed, left = (p for p in json.loads(out.getvalue())["pods"] if p["pod"].startswith(scene.ns))
    assert placed["placedOn"] == a
    assert not left["fits"] and left["message"] == generated_names_removed(decision.message or "")
