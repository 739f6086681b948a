"""The real kube-scheduler 1.36 and ``draguard allocate`` on the same cluster: the harness.

A :class:`Scene` builds one scenario's cluster on the session's control plane (Nodes from
``add_node``, DRA objects, pods already bound), then asks one pod at a time: the cluster is read
back from the API server (everything the scheduler sees), the pod is created and the scheduler's
decision awaited, and ``draguard allocate`` is run on the read-back objects and the pod as the API
server stored it (admission's defaults included: tolerations, overhead), less its priority and
preemption policy, which draguard resolves from its PriorityClass as the API server's Priority
plugin did (the classes are part of the cluster read back); or as it was written (``as_written``).
Where the scheduler bound the pod, draguard must say it fits there, among its best-scored nodes,
with the same devices; where the scheduler left it pending, draguard must say it fits nowhere
with the PodScheduled condition's reason and message, word for word (generated claim names
aside), and nominate a node for preemption where the scheduler does, with the same victims when
it is the same node. Which node, where candidates tie, is the scheduler's random pick; which of
equally important pods (same priority, no start time to tell them apart: these pods never run)
it reprieves follows the order of its cache, which no listing shows: the victims are then not
compared. The hand-written tests build a single best candidate without such pods and compare
node and victims (:func:`agree_on_preemption`).

Cluster-scoped names carry the test's namespace, so scenarios never see each other's devices;
nodes left by other tests are deleted first, since every Node is a candidate for every pod, and
the scene deletes the cluster-scoped objects it made when it closes.
"""

from __future__ import annotations

import io
import json
import re
import time
from collections import Counter
from collections.abc import Callable
from contextlib import redirect_stdout
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml
from controlplane import ControlPlane, call, wait_for

from webhook import cli

V1 = "resource.k8s.io/v1"
SCHEDULING = "scheduling.k8s.io/v1"
# What kube-scheduler 1.36 logs of each victim (pkg/scheduler/framework/preemption/executor.go).
VICTIM_LINES = ('"Preemptor Pod preempted victim Pod"', '"Victim Pod is already being deleted')
VICTIM = re.compile(r'victim="([^"]+)"')
FINISHED = ("Succeeded", "Failed")
# The event kube-scheduler's informers count for each DRA object created (ResourceSlices and
# ResourceClaims are logged by no one: ControlPlane.scheduler_events), and for a claim's status.
COUNTED = {
    "resourceslices": "resource.k8s.io/ResourceSliceAdd",
    "resourceclaims": "resource.k8s.io/ResourceClaimAdd",
}
CLAIM_STATUS = "resource.k8s.io/ResourceClaimUpdate"
# Its Namespace informer (InterPodAffinity's namespaceSelector) neither logs nor counts: a question
# comes at least this long after a namespace was written, which building the rest of a scenario
# takes anyway.
NAMESPACE_SETTLE = 0.7
# How long a bound pod's status write may go unseen before the pod is nudged (Scene.nudge).
NUDGE_AFTER = 5.0
STATE = [
    ("/api/v1/nodes", "v1", "Node"),
    ("/api/v1/namespaces", "v1", "Namespace"),
    ("/api/v1/pods", "v1", "Pod"),
    ("/apis/resource.k8s.io/v1/deviceclasses", V1, "DeviceClass"),
    ("/apis/resource.k8s.io/v1/resourceslices", V1, "ResourceSlice"),
    ("/apis/resource.k8s.io/v1/resourceclaims", V1, "ResourceClaim"),
    ("/apis/resource.k8s.io/v1/resourceclaimtemplates", V1, "ResourceClaimTemplate"),
    (f"/apis/{SCHEDULING}/priorityclasses", SCHEDULING, "PriorityClass"),
]


@dataclass
class Decision:
    """What the scheduler did with a pod: bound it (``node``, the devices of each claim), or left it
    pending with its PodScheduled condition."""

    node: str | None
    reason: str | None = None
    message: str | None = None
    devices: tuple[frozenset[str], ...] = ()
    nominated: str | None = None
    # namespace/name of the pods the preemption evicted, sorted; None where the scheduler's cache
    # order picks among equally important pods
    victims: tuple[str, ...] | None = ()
    scores: dict[str, dict[str, int]] | None = None  # node -> plugin -> weighted score, as logged


class Scene:
    """One scenario's cluster on the shared control plane."""

    def __init__(self, plane: ControlPlane, namespace: str, tmp: Path) -> None:
        self.plane = plane
        self.ns = namespace
        self.api = plane.client()
        self.tmp = tmp
        self.driver = f"{namespace}.example.com"
        self.node_names: list[str] = []
        self.made: list[str] = []  # paths of the cluster-scoped objects made, deleted at close
        # What the scheduler has yet to show of the writes since the last question (see seen()):
        # log lines of Node, Pod and DeviceClass events, each with how often it must then be in the
        # log, and counts of its informers' events, from ``counted_from``.
        self.unseen: list[tuple[str, int]] = []
        self.uncounted: Counter[str] = Counter()
        self.nudge_paths: dict[str, str] = {}  # a bound pod's Update line -> the pod's path
        self.counted_from: dict[str, int] = {}
        self.namespace_written = 0.0
        self.delete_nodes([node["metadata"]["name"] for node in self.get("/api/v1/nodes")["items"]])

    def get(self, path: str) -> dict[str, Any]:
        answer = call(self.api, "GET", path)
        assert answer.status == 200, answer.body
        return answer.body

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        resource = path.rsplit("/", 1)[-1]
        if resource in COUNTED:
            self.count(COUNTED[resource])
        answer = call(self.api, "POST", path, body)
        assert answer.status == 201, answer.body
        meta = answer.body["metadata"]
        if "namespaces/" not in path and path != "/api/v1/namespaces":
            self.made.append(f"{path}/{meta['name']}")
        if resource == "pods" and answer.body["spec"].get("nodeName"):
            self.unseen.append((f'"Add event for scheduled pod" pod="{meta["namespace"]}/{meta["name"]}"', 1))
        if resource == "deviceclasses":
            self.unseen.append((f'"DeviceClass added" deviceClass="{meta["name"]}"', 1))
        if resource == "namespaces":
            self.namespace_written = time.monotonic()
        return answer.body

    def patch(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """A JSON merge patch (of a Node: awaited in the scheduler's log before the next question)."""
        node = re.fullmatch(r"/api/v1/nodes/([^/]+)(/status)?", path)
        line = f'"Update event for node" node="{node.group(1)}"' if node else None
        logged = self.plane.scheduler_log().count(line) if line else 0
        answer = call(self.api, "PATCH", path, body)
        assert answer.status == 200, answer.body
        if line:
            self.unseen.append((line, logged + 1))
        if path.startswith("/api/v1/namespaces/"):
            self.namespace_written = time.monotonic()
        return answer.body

    def count(self, event: str) -> None:
        """Expect one more ``event`` from the scheduler's informers: called before the write, so
        that the count it starts from cannot include it."""
        if not self.uncounted:
            self.counted_from = self.plane.scheduler_events()
        self.uncounted[event] += 1

    def n(self, short: str) -> str:
        """A cluster-scoped name of this scenario."""
        return f"{self.ns}-{short}"

    # --- building the cluster ------------------------------------------------------------------

    def node(self, short: str, **options: Any) -> str:
        return self.add_node(self.n(short), **options)

    def add_node(self, name: str, **options: Any) -> str:
        """A Node of this scenario by its full name: deleted at close, and awaited in the scheduler's
        log before the next question (created whole, it comes in one Add event, from its watch or a
        re-list alike)."""
        self.plane.add_node(name, **options)
        self.node_names.append(name)
        self.unseen.append((f'"Add event for node" node="{name}"', 1))
        return name

    def delete_nodes(self, names: list[str]) -> None:
        """Delete Nodes and wait until the scheduler has dropped them from its cache: a Node it still
        holds is a candidate for the next scene's pods."""
        lines = [f'"Delete event for node" node="{name}"' for name in names]
        log = self.plane.scheduler_log()
        self.unseen += [(line, log.count(line) + 1) for line in lines]
        for name in names:
            call(self.api, "DELETE", f"/api/v1/nodes/{name}")
        self.seen()

    def device_class(self, short: str, expression: str = "", **spec: Any) -> str:
        selector = f'device.driver == "{self.driver}"' + (f" && {expression}" if expression else "")
        body = {"selectors": [{"cel": {"expression": selector}}], **spec}
        self.post(
            "/apis/resource.k8s.io/v1/deviceclasses",
            {"apiVersion": V1, "kind": "DeviceClass", "metadata": {"name": self.n(short)}, "spec": body},
        )
        return self.n(short)

    def stored_device_class(self, short: str, expression: str) -> str:
        """A DeviceClass the cluster holds without the API server having validated it as new (it
        was admitted under other feature gates): written straight into etcd
        (:meth:`ControlPlane.write_stored`), deleted at close."""
        name = self.n(short)
        selector = f'device.driver == "{self.driver}" && {expression}'
        body = {"selectors": [{"cel": {"expression": selector}}]}
        self.plane.write_stored(
            "deviceclasses",
            {"apiVersion": V1, "kind": "DeviceClass", "metadata": {"name": name}, "spec": body},
        )
        self.made.append(f"/apis/resource.k8s.io/v1/deviceclasses/{name}")
        self.unseen.append((f'"DeviceClass added" deviceClass="{name}"', 1))
        return name

    def gpus(self, node: str, count: int, **attributes: Any) -> None:
        """A one-slice pool of ``count`` GPUs on ``node`` (its full name)."""
        devices = [
            {
                "name": f"gpu-{i}",
                "attributes": {"index": {"int": i}, **{k: {"string": v} for k, v in attributes.items()}},
            }
            for i in range(count)
        ]
        self.pool_slice(node, "gpus", 1, devices=devices)

    def partitioned_gpu(self, node: str) -> None:
        """One GPU on ``node`` published as partitions sharing its counters (8 memory units, 4
        engines): the whole GPU, two halves and four quarters, attribute ``units`` the memory each
        takes. A pool of two slices, the counters in their own, as a partitionable driver does."""
        sizes = [(8, "whole-0"), (4, "half-0"), (4, "half-1"), *((2, f"quarter-{i}") for i in range(4))]
        devices = [
            {
                "name": f"gpu-0-{name}",
                "attributes": {"units": {"int": units}},
                "consumesCounters": [
                    {
                        "counterSet": "gpu-0",
                        "counters": {"memory": {"value": str(units)}, "engines": {"value": str(units // 2)}},
                    }
                ],
            }
            for units, name in sizes
        ]
        counters = [{"name": "gpu-0", "counters": {"memory": {"value": "8"}, "engines": {"value": "4"}}}]
        self.pool_slice(node, "counters", 2, sharedCounters=counters)
        self.pool_slice(node, "partitions", 2, devices=devices)

    def pool_slice(self, node: str, suffix: str, slices: int, **spec: Any) -> None:
        """A ResourceSlice ``<node>-<suffix>`` of the node's pool (``slices`` in all) with ``spec``."""
        pool = {"name": node, "generation": 1, "resourceSliceCount": slices}
        body = {"driver": self.driver, "nodeName": node, "pool": pool, **spec}
        name = f"{node}-{suffix}"
        self.post(
            "/apis/resource.k8s.io/v1/resourceslices",
            {"apiVersion": V1, "kind": "ResourceSlice", "metadata": {"name": name}, "spec": body},
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
            self.count(CLAIM_STATUS)
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

    def priority_class(self, short: str, value: int, **fields: Any) -> str:
        """A PriorityClass of this scenario, awaited until the API server's Priority admission
        plugin knows it (its informer hears of the class a moment after the create)."""
        name = self.n(short)
        body = {"apiVersion": SCHEDULING, "kind": "PriorityClass", "metadata": {"name": name}, "value": value}
        self.post(f"/apis/{SCHEDULING}/priorityclasses", {**body, **fields})
        probe = pod_manifest(f"probe-{short}", priorityClassName=name)
        path = f"/api/v1/namespaces/{self.ns}/pods"
        wait_for(
            f"{name} known to admission",
            lambda: call(self.api, "POST", path, probe, {"dryRun": "All"}).status == 201,
        )
        return name

    def namespace(self, name: str, labels: dict[str, str]) -> str:
        """Another namespace, with the ``default`` ServiceAccount pods need; deleted at close."""
        self.post("/api/v1/namespaces", {"metadata": {"name": name, "labels": labels}})
        self.made.append(f"/api/v1/namespaces/{name}")
        account = {"metadata": {"name": "default"}}
        answer = call(self.api, "POST", f"/api/v1/namespaces/{name}/serviceaccounts", account)
        assert answer.status in (201, 409), answer.body  # 409: the controller-manager made it first
        return name

    def label_namespace(self, labels: dict[str, str]) -> None:
        self.patch(f"/api/v1/namespaces/{self.ns}", {"metadata": {"labels": labels}})

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Any object from its manifest (the API path from its apiVersion, kind and namespace)."""
        group_version = obj["apiVersion"]
        root = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
        namespace = obj["metadata"].get("namespace")
        scope = f"/namespaces/{namespace}" if namespace else ""
        plural = obj["kind"].lower() + ("es" if obj["kind"].endswith("s") else "s")
        return self.post(f"{root}{scope}/{plural}", obj)

    def set_status(self, pod: dict[str, Any], status: dict[str, Any]) -> None:
        """Write a pod's status (as its kubelet would); the scheduler's Update event of the bound pod
        is awaited before the next question."""
        path = f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods/{pod['metadata']['name']}"
        line = (
            f'"Update event for scheduled pod" pod="{pod["metadata"]["namespace"]}/{pod["metadata"]["name"]}"'
        )
        self.unseen.append((line, self.plane.scheduler_log().count(line) + 1))
        self.nudge_paths[line] = path

        def written() -> bool:
            current = self.get(path)
            body = {**current, "status": {**current.get("status", {}), **status}}
            answer = call(self.api, "PUT", f"{path}/status", body)
            assert answer.status in (200, 409), answer.body  # 409: written meanwhile, try again
            return answer.status == 200

        wait_for(f"the status of {path}", written)

    # --- asking --------------------------------------------------------------------------------

    def state(self) -> list[dict[str, Any]]:
        objects = []
        for path, api_version, kind in STATE:
            for item in self.get(path)["items"]:
                objects.append({"apiVersion": api_version, "kind": kind, **item})
        return objects

    def ask(
        self,
        pod: dict[str, Any],
        *,
        keep: bool = False,
        retried: bool = False,
        as_written: bool = False,
    ) -> tuple[Decision, dict[str, Any]]:
        """The scheduler's decision on ``pod`` and draguard's answer on the cluster as it was, with
        the pod as the API server stored it but for the priority and preemption policy the Priority
        admission plugin gave it (``as_written``: as the manifest has it, every admission plugin's
        additions left out, and the cluster without its system PriorityClasses). The objects
        written just before reach the scheduler's informers a moment later: they are awaited
        (:meth:`seen`), or the scheduler answers for a cluster draguard never saw. ``retried``: the
        first attempt is expected to fail and a later one to bind, so wait for the binding."""
        self.seen()
        before = self.state()
        created = self.post(f"/api/v1/namespaces/{self.ns}/pods", pod)
        decision = self.decision(pod["metadata"]["name"], bound=retried)
        # What the Priority admission plugin gave the pod is draguard's to work out from its class.
        resolved = ("priority", "preemptionPolicy")
        spec = {k: v for k, v in created["spec"].items() if k not in resolved}
        asked = {"apiVersion": "v1", "kind": "Pod", **created, "spec": spec}
        if as_written:
            # As a person writes the cluster down: without the classes every cluster has.
            before = [o for o in before if not (o["kind"] == "PriorityClass" and is_system(o))]
            asked = {"apiVersion": "v1", "kind": "Pod", **pod}
            asked["metadata"] = {**pod["metadata"], "namespace": self.ns}
        answer = self.draguard([*before, asked], pod["metadata"]["name"])
        if answer.get("nominated") and generated_names_removed(decision.message or "") != answer["message"]:
            decision = replace(decision, message=self.event(pod["metadata"]["name"], answer["message"]))
        if decision.nominated:
            # Victims on another node than draguard's (a tie the scheduler broke at random) are not
            # compared: no need to wait for draguard's.
            same = decision.nominated == answer.get("nominated")
            expected = answer.get("victims", []) if same else []
            preemptor = f"{self.ns}/{pod['metadata']['name']}"
            victims = self.evicted(preemptor, expected)
            priority = created["spec"].get("priority", 0)
            tied = equally_important(before, decision.nominated, priority)
            decision = replace(decision, victims=None if tied else victims)
        if decision.node is None and not keep:
            call(self.api, "DELETE", f"/api/v1/namespaces/{self.ns}/pods/{pod['metadata']['name']}")
        return decision, answer

    def seen(self) -> None:
        """Wait until the scheduler's informers have handled what was written since the last
        question: the Nodes, bound Pods and DeviceClasses by their lines in its log, the
        ResourceSlices and ResourceClaims by its count of their events (a fixed pause was too short
        on a busy machine: the scheduler once answered for a node without the pod bound to it a
        moment before). Its count is of everyone's events: one another test's write made meanwhile
        stands in for one of ours (tests run one at a time; only the controller-manager writes
        claims of its own, from templates, for the pods asked about)."""
        pause = self.namespace_written + NAMESPACE_SETTLE - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        missing = self.unseen
        behind: dict[str, int] = {}

        def handled() -> bool:
            nonlocal missing, behind
            log = self.plane.scheduler_log()
            missing = [(line, times) for line, times in missing if log.count(line) < times]
            counts = self.plane.scheduler_events() if self.uncounted else {}
            behind = {
                event: self.counted_from.get(event, 0) + n - counts.get(event, 0)
                for event, n in self.uncounted.items()
                if counts.get(event, 0) < self.counted_from.get(event, 0) + n
            }
            return not missing and not behind

        what = "kube-scheduler to see the scenario's objects"
        try:
            if not self.waited(what, handled, timeout=NUDGE_AFTER):
                self.nudge([line for line, _ in missing if line in self.nudge_paths])
                missing = self.unseen
                wait_for(what, handled, interval=0.05)
        except AssertionError as err:  # name what never came, and the log's end, to tell why
            tail = "\n".join(self.plane.scheduler_log().splitlines()[-40:])
            raise AssertionError(
                f"{err}: {missing} not in its log, {behind} events short; its log ends:\n{tail}"
            ) from None
        self.unseen = []
        self.uncounted.clear()
        self.nudge_paths.clear()

    @staticmethod
    def waited(what: str, check: Callable[[], bool], timeout: float) -> bool:
        try:
            wait_for(what, check, timeout=timeout, interval=0.05)
        except AssertionError:
            return False
        return True

    def nudge(self, lines: list[str]) -> None:
        """Write an annotation on the bound pods whose status write the scheduler never showed,
        and wait for that Update instead: an informer that relisted meanwhile (its watch expired
        on a busy API server) had the pod whole in the list, as an Add without the Update that
        ``set_status`` awaits (seen once in CI). The new Update carries the whole pod, status
        included, so it shows the scheduler has what the question needs; a scheduler that is
        stuck shows neither."""
        log = self.plane.scheduler_log()
        for line in lines:
            self.unseen = [(ln, times) for ln, times in self.unseen if ln != line]
            self.unseen.append((line, log.count(line) + 1))
            nudged = {"metadata": {"annotations": {"draguard.io/test-nudge": str(time.monotonic())}}}
            answer = call(self.api, "PATCH", self.nudge_paths[line], nudged)
            assert answer.status == 200, answer.body

    def event(self, pod: str, wanted: str, timeout: float = 5.0) -> str | None:
        """``wanted`` if one of the pod's FailedScheduling events says it, else the latest one. After
        a preemption the scheduler tries the pod again at once (its victims' updates requeue it),
        so the PodScheduled condition may already hold the second attempt's words; the first
        attempt's are in its events (written asynchronously)."""
        deadline = time.monotonic() + timeout
        messages: list[str] = []
        while time.monotonic() < deadline:
            messages = self.events(pod)
            if wanted in map(generated_names_removed, messages):
                return wanted
            time.sleep(0.2)
        return messages[-1] if messages else None

    def evicted(self, preemptor: str, expected: list[str], timeout: float = 10.0) -> tuple[str, ...]:
        """The victims of the preemption for the pod ``preemptor`` (``namespace/name``), as the
        scheduler logs them (``executor.go`` at -v=2): those it evicts, and those it counts while
        they are being deleted already (which get no API call, and no event). It evicts them after
        it nominates the node, asynchronously (SchedulerAsyncPreemption is on in 1.36): wait until
        ``expected`` (draguard's victims) are all among them, or it logs the preemption finished,
        or ``timeout``, and say what the log has by then."""
        mark = f'preemptor="{preemptor}"'
        finished = f'"Async Preemption finished completely" {mark}'

        def found() -> tuple[set[str], bool]:
            log = self.plane.scheduler_log()
            lines = [line for line in log.splitlines() if mark in line]
            named = [VICTIM.search(line) for line in lines if any(m in line for m in VICTIM_LINES)]
            return {m.group(1) for m in named if m is not None}, finished in log

        deadline = time.monotonic() + timeout
        victims, done = found()
        while not (done or set(expected) <= victims) and time.monotonic() < deadline:
            time.sleep(0.1)
            victims, done = found()
        return tuple(sorted(victims))

    def events(self, pod: str) -> list[str]:
        """The messages of the pod's FailedScheduling events, oldest first."""
        path = f"/api/v1/namespaces/{self.ns}/events"
        query = {"fieldSelector": f"involvedObject.name={pod},reason=FailedScheduling"}
        items = call(self.api, "GET", path, query=query).body.get("items", [])
        return [e["message"] for e in sorted(items, key=lambda e: e.get("firstTimestamp") or "")]

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

        pod = wait_for(f"kube-scheduler to decide on {name}", decided, interval=0.05)
        if not pod["spec"].get("nodeName"):
            condition = next(c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")
            nominated = pod["status"].get("nominatedNodeName")
            return Decision(None, condition["reason"], condition["message"], nominated=nominated)
        return Decision(pod["spec"]["nodeName"], devices=self.devices(pod), scores=self.scores(name))

    def scores(self, pod: str) -> dict[str, dict[str, int]] | None:
        """Each plugin's weighted score of each node for ``pod``, from the scheduler's log (None
        when it logged none: one node fitted, so nothing was scored). The binding's line comes
        after the scores' (schedule_one.go logs "Successfully bound pod to node" once bound): wait
        for it, so that a log not yet flushed is not taken for a pod that was not scored."""
        key = f'pod="{self.ns}/{pod}"'
        bound = "Successfully bound pod to node"
        wait_for(
            f"kube-scheduler to log the binding of {pod}",
            lambda: any(bound in line and key in line for line in self._log_lines()),
            interval=0.05,
        )
        found: dict[str, dict[str, int]] = {}
        for line in self._log_lines():
            if "Plugin scored node for pod" in line and key in line:
                fields = dict(re.findall(r'(\w+)="?([^" ]+)"?', line.split("]", 1)[1]))
                found.setdefault(fields["node"], {})[fields["plugin"]] = int(fields["score"])
        return found or None

    def _log_lines(self) -> list[str]:
        return self.plane.scheduler_log().splitlines()

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
        self.delete_nodes(self.node_names)
        for path in reversed(self.made):
            call(self.api, "DELETE", path)


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


def equally_important(objects: list[dict[str, Any]], node: str, priority: int) -> bool:
    """Whether two of the pods on ``node`` that a pod of ``priority`` may preempt are equally
    important to DefaultPreemption (util.MoreImportantPod: same priority, same start time or none)."""
    seen = set()
    for obj in objects:
        status = obj.get("status", {})
        if obj["kind"] != "Pod" or obj["spec"].get("nodeName") != node or status.get("phase") in FINISHED:
            continue
        if obj["spec"].get("priority", 0) >= priority:
            continue
        importance = (obj["spec"].get("priority", 0), status.get("startTime"))
        if importance in seen:
            return True
        seen.add(importance)
    return False


def is_system(priority_class: dict[str, Any]) -> bool:
    return str(priority_class["metadata"]["name"]).startswith("system-")


def generated_names_removed(message: str) -> str:
    """A message with the resourceclaim controller's random name suffixes dropped (draguard names a
    template's claim ``<pod>-<claim>``, the controller ``<pod>-<claim>-<5 random characters>``)."""
    return re.sub(r"(\w+-\w+)-[a-z0-9]{5}\b", r"\1", message)


def disagreement(decision: Decision, answer: dict[str, Any]) -> str | None:
    """How draguard's answer differs from what the scheduler did, or None when it says the same."""
    fitting = [n["node"] for n in answer["nodes"] if n["fits"]]
    if decision.node is None:
        if answer["fits"] or fitting:
            return f"the scheduler left it pending ({decision.message}); draguard: {answer['message']}"
        if answer["reason"] != decision.reason:
            return f"reason {decision.reason}; draguard: {answer['reason']} ({answer['message']})"
        if answer["message"] != generated_names_removed(decision.message or ""):
            return f"message\n  scheduler: {decision.message}\n  draguard:  {answer['message']}"
        nominated = answer.get("nominated")
        if bool(decision.nominated) != bool(nominated):
            return f"preemption: the scheduler nominated {decision.nominated}; draguard {nominated}"
        victims = tuple(sorted(answer.get("victims", [])))
        if decision.nominated == nominated and decision.victims not in (None, victims):
            return f"preemption on {nominated}: the scheduler evicted {decision.victims}; draguard {victims}"
        return None
    if not answer["fits"] or decision.node not in fitting:
        refused = next((n for n in answer["nodes"] if n["node"] == decision.node), {})
        return (
            f"the scheduler bound it to {decision.node}; draguard: {answer['message']} "
            f"({decision.node}: {refused.get('reasons')} {refused.get('detail')})"
        )
    if decision.scores is not None:
        ours = {n["node"]: n.get("scores") or {} for n in answer["nodes"] if n["fits"]}
        differ = {
            (node, plugin): (decision.scores[node].get(plugin), ours.get(node, {}).get(plugin))
            for node in decision.scores
            for plugin in {*decision.scores[node], *ours.get(node, {})}
            if decision.scores[node].get(plugin, 0) != ours.get(node, {}).get(plugin, 0)
        }
        if differ:
            return f"scores (node, plugin): (scheduler, draguard): {differ}"
    if len(fitting) > 1 and decision.node not in answer["preferred"]:
        return f"scoring: the scheduler chose {decision.node}; draguard prefers {answer['preferred']}"
    entry = next(n for n in answer["nodes"] if n["node"] == decision.node)
    devices = tuple(
        frozenset(f"{r['driver']}/{r['pool']}/{r['device']}" for r in result["devices"].get("results", []))
        for result in entry["results"]
        if result is not None
    )
    if devices != decision.devices:
        return f"devices on {decision.node}: scheduler {decision.devices}; draguard {devices}"
    return None


def agree(decision: Decision, answer: dict[str, Any]) -> None:
    """draguard's answer says what the scheduler did."""
    found = disagreement(decision, answer)
    assert found is None, found


def agree_on_preemption(decision: Decision, answer: dict[str, Any]) -> None:
    """draguard's answer says what the scheduler did, the node preemption nominated and the pods it
    evicted included (for scenarios built so that one candidate is the best)."""
    agree(decision, answer)
    ours = (answer.get("nominated"), tuple(sorted(answer.get("victims", []))))
    assert decision.victims is not None, "the scenario has equally important victims to choose from"
    assert (decision.nominated, decision.victims) == ours, f"scheduler: {decision}; draguard: {ours}"
