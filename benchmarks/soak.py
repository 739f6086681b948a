"""Soak: draguard under faults through the real control plane, with invariants checked against the API
server's truth (issue 25).

The cluster: etcd, kube-apiserver, kube-scheduler and kube-controller-manager 1.36 (``tests/kube/
controlplane.py``, with KEP-5517's DRANodeAllocatableResources gate and device taints); draguard
installed from the chart's rendered manifests as 2 replicas (``tests/kube/deploy.py``) behind the
rendered webhook configurations, reached through a local front that follows the replicas' readiness
probes as a Service's endpoints do; the replicas reach the API server through a relay whose
connections the soak cuts. Quota ``Fail``, sharing enforced, prescheduled with its mutating webhook.
4 nodes, each with a GPU driver's slice (8 GPUs, the sharing policies None, SamePod and MultiPod in
turn, as the device attribute ``draguard.io/sharingPolicy``) and a CPU driver's slice (32 cores,
each mapped onto 1 of the node's ``cpu`` and 2Gi of its ``memory``, policies in turn too).

Traffic (about 20 requests a second from the soak, plus what the scheduler and controllers send
because of them; bursts of 200 pod creations): tenant namespaces with a ResourceQuota (6 cores, 12Gi
folded from devices), pods with template claims, pods sharing direct claims of each policy,
pre-scheduled pods (``spec.nodeName``, rewritten by the mutating webhook), deletions, evictions
through ``pods/eviction``, slice republishing (pool generation bumps), device taints on and off, and
a namespace with its quota made and deleted every minute.

Faults, each kind once in ``--quick`` and at least three times an hour otherwise: ``kill -9`` of a
replica while admissions are in flight (then restarted, as its Deployment would); ``SIGSTOP`` of a
replica past the webhook timeout, then ``SIGCONT``; kube-apiserver restart; etcd restart; both
replicas' watches cut (their connections to the API server reset); a 410 forced by compaction
(etcd compacted, kube-apiserver restarted: every watch resumes from a compacted resourceVersion);
certificate rotation (lifetimes cut so that the elected replica renews the serving certificate and
rolls the CA during the run); a replica started while the API server is down (with the kubeconfig
these replicas use it exits 2 and is started again after the kubelet's first back-off, 10 s; the
chart's ``--in-cluster`` would wait instead, a path this run does not take). Replica 1 takes the
kills and restarts; replica 0 lives through the whole run, so its memory, threads and open files
say whether anything leaks.

Invariants, checked while it runs against what the API server holds (never draguard's own view),
every violation printed and the exit status 1:
- quota: in every tenant namespace, the cores and memory that reserved claims' devices hand out
  (for each consumer pod) never exceed the quota's hard limits at any sampled moment (every 2 s),
  nor do the claims' device counts; the ledger ConfigMap equals that truth (no phantom charge, no
  lost one, no wrong amount) within 30 s: a difference still there 30 s after it was first seen,
  and after the last fault ended, is a violation;
- sharing: no claim whose devices' policy is None or SamePod is reserved for more than one pod, on
  every claim status a watch delivers;
- admissions: every request is answered (75 s at most) and every refusal that is no rule's decision
  ("failed calling webhook", draguard's own "could not check rule") comes from a webhook whose
  failurePolicy is Fail; all are counted against the fault window (or steady time) they fell in;
- recovery: 30 s after each fault ended, both replicas are ready (``/readyz`` "ok") and their
  snapshot is younger than 5 s;
- resources: replica 0's RSS, threads and open files grow less than 10% over the second half
  (medians of the first and last sixth of it; see ``flat``); the connections it accepted, which
  its clients keep alive or not, are counted apart and shown, not judged (see ``accepted``);
- logs: no traceback, and at most LOG_BYTES_PER_HOUR of log per replica per hour (judged, as the
  resources are, only in a run long enough for a second half of 10 minutes).

Run: ``python benchmarks/soak.py [--minutes N] [--quick]`` with ``KUBEBUILDER_ASSETS`` set (see
/work/shared/k8s/README.md) and helm on the PATH.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import math
import os
import random
import re
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[0] = str(ROOT)  # benchmarks/webhook.py would shadow the webhook package
sys.path.insert(1, str(ROOT / "tests" / "kube"))

import urllib3  # noqa: E402
from controlplane import (  # noqa: E402
    ASSETS_VAR,
    Answer,
    ControlPlane,
    ControlPlaneError,
    call,
    free_port,
    https_get,
    missing_binaries,
)
from deploy import Balancer, Draguard, Endpoints, apply  # noqa: E402
from helm_render import HELM_MISSING, NAMESPACE  # noqa: E402 (tests/charts, on the path deploy sets)
from kubernetes import client, watch  # noqa: E402
from workloads import (  # noqa: E402
    RESOURCE,
    claim,
    device_class,
    eviction,
    pod,
    pods,
    resource_slice,
    slices,
    template,
)

from policies.api.quantity import Quantity  # noqa: E402
from webhook.ledger import LEDGER_NAME, decode_entry  # noqa: E402

GATES = {"DRANodeAllocatableResources": True, "DRADeviceTaints": True}
NODES = 4
GPUS = 8
CORES = 32
GPU = "gpu.example.com"
CPU = "cpu.example.com"
POLICY_DOMAIN, POLICY_NAME = "draguard.io", "sharingPolicy"
POLICIES = ("None", "SamePod", "MultiPod")
EXCLUSIVE = ("None", "SamePod")
GIB = 1024**3
TAINT = {"key": "soak.example.com/maintenance", "value": "on", "effect": "NoSchedule"}
CORE_MEMORY = 2 * GIB  # what each core's mapping hands out of the node's memory
TENANTS = ("soak-a", "soak-b", "soak-c")
HARD = {
    "requests.cpu": "6",
    "requests.memory": "12Gi",
    f"{CPU}.deviceclass.resource.k8s.io/devices": "60",
    f"{GPU}.deviceclass.resource.k8s.io/devices": "60",
}
POPULATION = 20  # pods per namespace the steady traffic keeps; beyond, it deletes the oldest
RATE = 20.0  # requests a second from the soak's own clients
BURST = 200
ANSWER_TIMEOUT = 75.0  # the API server's own request timeout is 60 s
RECOVERY = 30.0
FRESH = 5.0
LEDGER_SLACK = 30.0
SAMPLE = 2.0
TRACE_POINTS = 12  # replica 0's resources printed at about this many moments of the run
# A resource sample: when, RSS MiB, threads, open files but accepted connections, those.
Sample = tuple[float, float, int, int, int]
ACCEPTED = "accepted connections"  # shown, not judged: the clients keep them (see accepted())
GROWTH = 0.10
JUDGED_HALF = 600.0  # resources are judged over a second half this long at least
# A traceback as Python's logging prints it (in the JSON log, newlines escaped), up to its error line.
TRACEBACK = re.compile(
    r"Traceback \(most recent call last\):(?:\\n|\n).*?(?:\\n|\n)"
    r"(\w[\w.]*(?:Error|Exception|Exit)[^\\\n\"]*)"
)
LOG_BYTES_PER_HOUR = 64 * 1024 * 1024
STOP_SECONDS = 12.0  # SIGSTOP: past the webhooks' timeouts (the chart's 5 s, the quota webhook's 10 s)
DOWN_SECONDS = 3.0  # the API server stays down this long around a replica's start
KUBELET_BACKOFF = 10.0  # the kubelet's first restart delay of a crashed container (CrashLoopBackOff)
RESTART_LIMIT = 300.0
GAP = 3.0  # seconds between one fault's recovery and the next fault
# Quick: traffic for at least this long; on a quiet machine the eight faults end about 100 s in.
QUICK_MINUTES = 1.5
# How long the rotation's turn waits for one: the serving certificate is renewed every 10 minutes
# (quick: once, 70 s after the install, so that its turn comes after it and waits for nothing).
ROTATION_WAIT = {False: 11 * 60.0, True: 180.0}
WEBHOOK_FAILURE_POLICY = {  # the chart's defaults (charts/draguard/values.yaml), which the soak keeps
    "selectors.draguard.io": "Fail",
    "prescheduled.draguard.io": "Ignore",
    "personas.draguard.io": "Fail",
    "namespaces.personas.draguard.io": "Fail",
    "drain.draguard.io": "Ignore",
    "sharing.draguard.io": "Fail",
    "quota.draguard.io": "Fail",
}
FAULTS = (
    "kill -9",
    "SIGSTOP",
    "apiserver restart",
    "etcd restart",
    "watches cut",
    "410 compaction",
    "cert rotation",
    "replica start, API down",
)


def values(quick: bool) -> dict[str, Any]:
    """The chart's values: its defaults but for what the soak exercises. Certificate lifetimes are
    cut so that rotations happen during the run: the serving certificate is renewed at two thirds
    of its life (10 minutes) and the CA rolled likewise (20 minutes, with an overlap in the
    caBundle); quick: the serving certificate once, 70 s in."""
    lifetimes = (
        # renewed 70 s after issue, with 9 minutes to spare for an API server that is slow to come back
        {"caValidity": "900s", "servingValidity": "600s", "renewBefore": "530s"}
        if quick
        else {"caValidity": "30m", "servingValidity": "15m"}
    )
    return {
        "snapshot": {"maxAgeSeconds": 15},
        "tls": {"selfManaged": {**lifetimes, "overlap": "5s"}},
        "webhooks": {"prescheduled": {"mutating": {"enabled": True}}},
        "rules": {"quota": {"reconcileSeconds": 5}, "sharing": {"mode": "enforce"}},
    }


# --- the cluster's objects -----------------------------------------------------------------------


def node_name(n: int) -> str:
    return f"soak-node-{n}"


def policy_of(index: int) -> str:
    return POLICIES[index % len(POLICIES)]


def published(driver: str, n: int, devices: list[dict[str, Any]], generation: int = 1) -> dict[str, Any]:
    """The driver's ResourceSlice for node ``n`` (as the e2e tests' drivers publish it) with these
    devices, at this pool generation."""
    body = resource_slice(driver, node_name(n))
    body["spec"]["devices"] = devices
    body["spec"]["pool"]["generation"] = generation
    return body


def gpu_slice(n: int, generation: int = 1, tainted: bool = False) -> dict[str, Any]:
    devices = []
    for i in range(GPUS):
        device: dict[str, Any] = {
            "name": f"gpu-{i}",
            "attributes": {
                "index": {"int": i},
                "model": {"string": "h100" if i % 2 else "a100"},
                f"{POLICY_DOMAIN}/{POLICY_NAME}": {"string": policy_of(i)},
            },
            "capacity": {"memory": {"value": "80Gi"}},
        }
        if tainted and i == GPUS - 1:
            device["taints"] = [TAINT]
        devices.append(device)
    return published(GPU, n, devices, generation)


def cpu_slice(n: int) -> dict[str, Any]:
    """Cores in the style of dra-driver-cpu, each mapped onto 1 of the node's cpu and 2Gi of its memory."""
    mappings = {"cpu": {"allocationMultiplier": "1"}, "memory": {"allocationMultiplier": "2Gi"}}
    devices = [
        {
            "name": f"cpu-{i}",
            "attributes": {
                "dra.cpu/numaNodeID": {"int": i // (CORES // 2)},
                f"{POLICY_DOMAIN}/{POLICY_NAME}": {"string": policy_of(i)},
            },
            "nodeAllocatableResourceMappings": mappings,
        }
        for i in range(CORES)
    ]
    return published(CPU, n, devices)


def policy_class(policy: str) -> dict[str, Any]:
    """The GPUs of one sharing policy, as a class of their own (shared claims are made through it)."""
    expression = (
        f"device.driver == '{GPU}' && device.attributes['{POLICY_DOMAIN}'].{POLICY_NAME} == '{policy}'"
    )
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": f"gpu-{policy.lower()}.example.com"},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }


def device_table() -> dict[tuple[str, str, str], tuple[str, int, int]]:
    """(driver, pool, device) -> (sharing policy, cores, memory bytes) it hands out: the truth the
    invariants compare with, from the objects the soak publishes."""
    table = {}
    for n in range(NODES):
        for i in range(GPUS):
            table[(GPU, node_name(n), f"gpu-{i}")] = (policy_of(i), 0, 0)
        for i in range(CORES):
            table[(CPU, node_name(n), f"cpu-{i}")] = (policy_of(i), 1, CORE_MEMORY)
    return table


def workload(
    name: str, *, claims: Sequence[str] = (), templates: Sequence[str] = (), node: str | None = None
) -> dict[str, Any]:
    """A pod as in the e2e tests, with requests of 0 (its CPUs and memory come from its claims, and
    a namespace whose quota limits requests.cpu refuses a pod that does not state them)."""
    body = pod(name, claims=claims, templates=templates, node_name=node, labels={"app": "soak"})
    for container in body["spec"]["containers"]:
        container.setdefault("resources", {})["requests"] = {"cpu": "0", "memory": "0"}
    return body


def tenant_objects(namespace: str) -> list[dict[str, Any]]:
    """A tenant namespace's quota, templates and the direct claims its pods share."""
    meta = {"namespace": namespace}
    objects: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "team", **meta},
            "spec": {"hard": HARD},
        },
    ]
    for name, cls in (("one-core", CPU), ("one-gpu", GPU)):
        made = template(name, cls)
        made["metadata"].update(meta)
        objects.append(made)
    for policy in POLICIES:
        made = claim(f"shared-{policy.lower()}", f"gpu-{policy.lower()}.example.com")
        made["metadata"].update(meta)
        objects.append(made)
    return objects


def make_namespace(api: client.ApiClient, namespace: str) -> None:
    call(api, "POST", "/api/v1/namespaces", {"metadata": {"name": namespace, "labels": {"soak": "tenant"}}})
    # pods need their ServiceAccount; the controller-manager may make it first (409)
    call(api, "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts", {"metadata": {"name": "default"}})
    apply(api, tenant_objects(namespace))


# --- what happened: windows, answers, violations -------------------------------------------------


@dataclass
class Window:
    """One fault, from its injection until both replicas were ready and fresh again."""

    kind: str
    start: float
    end: float = math.inf  # the injection over (the API server back, the replica restarted, ...)
    recovered: float = math.inf
    note: str = ""

    def holds(self, moment: float) -> bool:
        return self.start <= moment <= self.recovered


@dataclass
class Record:
    """What every window (and steady time) saw, and every violated invariant."""

    started: float = field(default_factory=time.monotonic)
    lock: threading.Lock = field(default_factory=threading.Lock)
    windows: list[Window] = field(default_factory=list)
    answers: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    violations: list[str] = field(default_factory=list)
    examples: dict[str, str] = field(default_factory=dict)

    def at(self) -> float:
        return time.monotonic() - self.started

    def open(self, kind: str) -> Window:
        window = Window(kind, time.monotonic())
        with self.lock:
            self.windows.append(window)
        return window

    def window_of(self, moment: float) -> str:
        with self.lock:
            for window in reversed(self.windows):
                if window.holds(moment):
                    return window.kind
        return "steady"

    def last_fault_end(self) -> float:
        with self.lock:
            ends = [w.recovered if w.recovered < math.inf else time.monotonic() for w in self.windows]
        return max(ends, default=self.started)

    def answer(self, moment: float, outcome: str, detail: str = "") -> None:
        kind = self.window_of(moment)
        with self.lock:
            self.answers[kind][outcome] += 1
            if detail and outcome not in self.examples:
                self.examples[outcome] = detail[:300]

    def violate(self, what: str) -> None:
        line = f"[{self.at():7.1f} s] VIOLATION {what}"
        with self.lock:
            self.violations.append(line)
        print(line, flush=True)


UNDECIDED_WEBHOOK = re.compile(r'failed calling webhook "([^"]+)"')
DENIED = re.compile(r'admission webhook "([^"]+)" denied the request')


# Why the API server could not get an answer, from its message (the first that matches).
UNREACHABLE = (
    ("x509", "certificate not trusted"),
    ("deadline exceeded", "timed out"),
    ("Timeout", "timed out"),
    ("connection refused", "connection refused"),
    ("EOF", "connection closed"),
    ("connection reset", "connection closed"),
)
COULD_NOT = re.compile(r"draguard could not check rule (\w+): ([^:]+)")


def classify(answer: Answer) -> tuple[str, str]:
    """An answer's outcome for the tallies, and a violation (or "") when no failurePolicy explains it."""
    message = answer.message
    undecided = UNDECIDED_WEBHOOK.search(message)
    if undecided:
        hook = undecided[1]
        why = next((reason for needle, reason in UNREACHABLE if needle in message), "other")
        if WEBHOOK_FAILURE_POLICY.get(hook) != "Fail":
            return (
                f"failed: {hook} unreachable ({why})",
                f"webhook {hook} (failurePolicy Ignore) failed a request: {message}",
            )
        return f"failed closed: unreachable ({why})", ""
    could_not = COULD_NOT.search(message)
    if could_not:
        return f"failed closed: {could_not[1]} could not decide ({could_not[2].strip()[:40]})", ""
    if 200 <= answer.status < 300:
        return "allowed", ""
    denied = DENIED.search(message)
    if denied:
        return f"denied by {denied[1].split('.')[0]}", ""
    if "exceeded quota" in message:
        return "refused: upstream quota", ""
    if answer.status >= 500:
        return f"API server error {answer.status}", ""
    return f"refused {answer.status}", ""


# --- the cluster ----------------------------------------------------------------------------------


@dataclass
class Cluster:
    plane: ControlPlane
    draguard: Draguard
    relay: Balancer
    endpoints: Endpoints
    devices: dict[tuple[str, str, str], tuple[str, int, int]]

    @property
    def api(self) -> client.ApiClient:
        return self.plane.client()


@contextlib.contextmanager
def cluster(quick: bool) -> Iterator[Cluster]:
    plane = ControlPlane(Path(os.environ[ASSETS_VAR]), feature_gates=GATES)
    plane.start()
    draguard: Draguard | None = None
    relay: Balancer | None = None
    endpoints: Endpoints | None = None
    try:
        plane.start_scheduler()
        plane.start_controller_manager()
        api = plane.client()
        for n in range(NODES):
            plane.add_node(node_name(n), allocatable={"cpu": "64", "memory": "256Gi"})
        infra = [device_class(GPU), device_class(CPU), *(policy_class(p) for p in POLICIES)]
        infra += [s for n in range(NODES) for s in (gpu_slice(n), cpu_slice(n))]
        apply(api, infra)
        for namespace in TENANTS:
            make_namespace(api, namespace)
        relay = Balancer(free_port())
        relay.backends = [plane.port]
        relay.start()
        draguard = Draguard(plane, values(quick), replicas=2, api_url=f"https://127.0.0.1:{relay.port}")
        draguard.install()
        # the chart's probe, run every second: the soak's faults come faster than a cluster's
        endpoints = Endpoints(draguard, period=1.0)
        endpoints.start()
        yield Cluster(plane, draguard, relay, endpoints, device_table())
    finally:
        if endpoints is not None:
            endpoints.stop()
        if draguard is not None:
            for replica in draguard.replica:
                if replica.component is not None:
                    replica.component.stop(grace=0)
            with contextlib.suppress(AttributeError):
                draguard.balancer.close()
        if relay is not None:
            relay.close()
        plane.stop()


# --- traffic ----------------------------------------------------------------------------------------


class Traffic:
    """The soak's own clients: steady requests at RATE a second and bursts, every answer recorded."""

    def __init__(self, cluster: Cluster, record: Record, seed: int) -> None:
        self.cluster, self.record = cluster, record
        self.rng = random.Random(seed)
        configuration = cluster.plane.client().configuration
        configuration.connection_pool_maxsize = 64
        self.api = client.ApiClient(configuration)
        self.pool = ThreadPoolExecutor(24, thread_name_prefix="traffic")
        self.lock = threading.Lock()
        self.population: dict[str, deque[str]] = {ns: deque() for ns in TENANTS}
        self.generations = dict.fromkeys(range(NODES), 1)
        self.tainted: set[int] = set()
        self.sent = 0
        self.admissions = 0  # requests that reach at least one draguard webhook
        self.pending = 0
        self.skipped = 0
        self.serial = 0
        self.stop = threading.Event()
        self.rotating: str | None = None
        self.thread = threading.Thread(target=self._run, name="traffic", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)
        self.pool.shutdown(wait=True, cancel_futures=True)

    # -- sending -----------------------------------------------------------------------------------

    def send(
        self, method: str, path: str, body: Mapping[str, Any] | None = None, *, admission: bool,
        query: Mapping[str, str] | None = None,
    ) -> Answer | None:  # fmt: skip
        """One request; its outcome counted in the window it was sent in. None: no answer."""
        moment = time.monotonic()
        with self.lock:
            self.sent += 1
            self.admissions += admission
        try:
            answer = call(self.api, method, path, body, query=query, timeout=ANSWER_TIMEOUT)
        except urllib3.exceptions.ReadTimeoutError as err:
            self.record.answer(moment, "unanswered")
            self.record.violate(f"{method} {path} not answered within {ANSWER_TIMEOUT:.0f} s: {err}")
            return None
        except (urllib3.exceptions.HTTPError, OSError) as err:
            self.record.answer(moment, "API server unreachable", str(err))
            return None
        outcome, violation = classify(answer)
        self.record.answer(moment, outcome if admission else f"(no webhook) {outcome}", answer.message)
        if violation:
            self.record.violate(violation)
        return answer

    def _name(self, prefix: str) -> str:
        with self.lock:
            self.serial += 1
            return f"{prefix}-{self.serial}"

    # -- operations --------------------------------------------------------------------------------

    def namespaces(self) -> list[str]:
        return [*TENANTS, *([self.rotating] if self.rotating else [])]

    def create_pod(self, body: dict[str, Any], namespace: str) -> None:
        answer = self.send("POST", pods(namespace), body, admission=True)
        if answer is not None and answer.status == 201:
            with self.lock:
                self.population.setdefault(namespace, deque()).append(body["metadata"]["name"])

    def template_pod(self, namespace: str | None = None) -> None:
        namespace = namespace or self.rng.choice(self.namespaces())
        which = self.rng.choice(("one-core", "one-gpu"))
        self.create_pod(workload(self._name("t"), templates=[which]), namespace)

    def shared_pod(self) -> None:
        namespace = self.rng.choice(TENANTS)
        shared = f"shared-{self.rng.choice(POLICIES).lower()}"
        self.create_pod(workload(self._name("s"), claims=[shared]), namespace)

    def pinned_pod(self) -> None:
        namespace = self.rng.choice(TENANTS)
        node = node_name(self.rng.randrange(NODES))
        self.create_pod(workload(self._name("p"), templates=["one-gpu"], node=node), namespace)

    def oldest(self, namespace: str) -> str | None:
        with self.lock:
            queue = self.population.get(namespace)
            return queue.popleft() if queue else None

    def delete_pod(self, namespace: str) -> None:
        name = self.oldest(namespace)
        if name:
            query = {"gracePeriodSeconds": "0"}
            self.send("DELETE", f"{pods(namespace)}/{name}", None, admission=False, query=query)

    def evict_pod(self) -> None:
        namespace = self.rng.choice(TENANTS)
        name = self.oldest(namespace)
        if name:
            self.send("POST", f"{pods(namespace)}/{name}/eviction", eviction(namespace, name), admission=True)

    def republish(self, taint: bool) -> None:
        """The GPU driver publishes its node's slice again: a new pool generation, and with
        ``taint`` its last GPU tainted (or the taint lifted)."""
        n = self.rng.randrange(NODES)
        with self.lock:
            self.generations[n] += 1
            if taint:
                self.tainted ^= {n}
            body = gpu_slice(n, self.generations[n], n in self.tainted)
        path = f"{slices()}/{body['metadata']['name']}"
        current = self.send("GET", path, admission=False)
        if current is None or current.status != 200:
            return
        body["metadata"]["resourceVersion"] = current.body["metadata"]["resourceVersion"]
        self.send("PUT", path, body, admission=True)

    def rotate_namespace(self) -> None:
        """A fresh tenant with its quota; the one before is deleted with everything in it."""
        name = self._name("soak-x")
        with contextlib.suppress(Exception):
            make_namespace(self.api, name)
            old, self.rotating = self.rotating, name
            if old:
                with self.lock:
                    self.population.pop(old, None)
                self.send("DELETE", f"/api/v1/namespaces/{old}", admission=False)

    def step(self) -> None:
        """One steady request: deletions first while a namespace holds more than POPULATION pods."""
        for namespace in self.namespaces():
            with self.lock:
                crowded = len(self.population.get(namespace, ())) > POPULATION
            if crowded:
                self.delete_pod(namespace)
                return
        choice = self.rng.random()
        if choice < 0.35:
            self.template_pod()
        elif choice < 0.50:
            self.shared_pod()
        elif choice < 0.60:
            self.pinned_pod()
        elif choice < 0.78:
            self.delete_pod(self.rng.choice(self.namespaces()))
        elif choice < 0.88:
            self.evict_pod()
        else:
            self.republish(taint=choice >= 0.94)

    def _guarded(self, operation: Callable[[], None]) -> None:
        try:
            operation()
        except Exception as err:  # a bug in the soak itself: said, not hidden
            self.record.violate(f"soak traffic error {type(err).__name__}: {err}")
        finally:
            with self.lock:
                self.pending -= 1

    def submit(self, operation: Callable[[], None]) -> None:
        with self.lock:
            if self.pending >= 48:
                self.skipped += 1
                return
            self.pending += 1
        self.pool.submit(self._guarded, operation)

    def _run(self) -> None:
        interval = 1.0 / RATE
        next_at = time.monotonic()
        rotate_at = next_at + 60
        while not self.stop.is_set():
            next_at += interval
            self.submit(self.step)
            if time.monotonic() >= rotate_at:
                rotate_at += 60
                self.submit(self.rotate_namespace)
            self.stop.wait(max(0.0, next_at - time.monotonic()))

    def burst(self) -> threading.Thread:
        """BURST pod creations with template claims at once, across the tenants (on 24 threads of
        their own, beside the steady traffic); returns the thread that sends them."""

        def fire() -> None:
            with ThreadPoolExecutor(24, thread_name_prefix="burst") as pool:
                for i in range(BURST):
                    pool.submit(self.template_pod, TENANTS[i % len(TENANTS)])

        thread = threading.Thread(target=fire, name="burst", daemon=True)
        thread.start()
        return thread


# --- invariants -------------------------------------------------------------------------------------


def q(amount: int | str) -> Quantity:
    return Quantity.parse(str(amount))


@dataclass
class Truth:
    """What the API server says one namespace's claims hold: the charge of each reserved claim
    (claim uid -> quota name -> amount, as draguard's ledger keys it) and the devices that reserved
    claims hold, by the class they were requested through (upstream charges claim objects at
    creation; what is admitted and holds devices must stay within that too)."""

    charges: dict[str, dict[str, Quantity]] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)  # every claim's uid: its name and state
    devices: Counter[str] = field(default_factory=Counter)


def consumers(status: Mapping[str, Any]) -> list[str]:
    return [r.get("name", "") for r in status.get("reservedFor") or () if r.get("resource") == "pods"]


def allocated(status: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or ()
    return [(r["driver"], r["pool"], r["device"]) for r in results]


class Invariants:
    """The checks against the API server's truth, on threads of their own."""

    def __init__(self, cluster: Cluster, record: Record) -> None:
        self.cluster, self.record = cluster, record
        self.api = cluster.plane.client()
        self.stop = threading.Event()
        self.differences: dict[tuple[str, str], tuple[float, str]] = {}
        self.reported: set[tuple[str, str]] = set()
        self.quota_samples = 0
        self.claim_statuses = 0
        self.peak: dict[str, Quantity] = {}
        self.samples: dict[int, list[Sample]] = defaultdict(list)
        self.draguard_admissions: dict[int, float] = {}
        self.threads = [
            threading.Thread(target=self._quota_loop, name="quota-check", daemon=True),
            threading.Thread(target=self._claims_watch, name="sharing-check", daemon=True),
            threading.Thread(target=self._resources_loop, name="resources", daemon=True),
        ]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def close(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(15)

    # -- quota and ledger ----------------------------------------------------------------------------

    def truth(self) -> dict[str, Truth]:
        listed = call(self.api, "GET", f"{RESOURCE}/resourceclaims", timeout=20)
        if listed.status != 200:
            raise OSError(f"listing claims: {listed.status}")
        found: dict[str, Truth] = defaultdict(Truth)
        for item in listed.body.get("items") or ():
            metadata, spec, status = item["metadata"], item.get("spec") or {}, item.get("status") or {}
            truth = found[metadata["namespace"]]
            pods_using = len(consumers(status))
            state = (
                "reserved"
                if pods_using
                else "allocated, not reserved"
                if allocated(status)
                else "unallocated"
            )
            deleting = ", being deleted" if metadata.get("deletionTimestamp") else ""
            truth.names[metadata["uid"]] = f"{metadata['name']} ({state}{deleting})"
            if pods_using and allocated(status):
                classes = {
                    r.get("name"): (r.get("exactly") or {}).get("deviceClassName", "")
                    for r in (spec.get("devices") or {}).get("requests") or ()
                }
                for result in status["allocation"]["devices"]["results"]:
                    truth.devices[classes.get(result["request"], "")] += 1
            cores = sum(self.cluster.devices.get(d, ("", 0, 0))[1] for d in allocated(status))
            if cores and pods_using:
                uid = metadata["uid"]
                memory = sum(self.cluster.devices.get(d, ("", 0, 0))[2] for d in allocated(status))
                cpu, mem = q(cores * pods_using), q(memory * pods_using)
                truth.charges[uid] = {"cpu": cpu, "requests.cpu": cpu, "memory": mem, "requests.memory": mem}
                users = ", ".join(consumers(status))
                truth.names[uid] = f"{metadata['name']} (reserved for {users}{deleting})"
        return found

    def ledgers(self) -> dict[str, dict[str, dict[str, Quantity]]]:
        """Every namespace's ledger ConfigMap, in one list: namespace -> claim uid -> charge (empty
        entries, releases kept until the snapshots can show them, left out)."""
        path = f"/api/v1/configmaps?fieldSelector=metadata.name%3D{LEDGER_NAME}"
        listed = call(self.api, "GET", path, timeout=20)
        if listed.status != 200:
            raise OSError(f"listing the ledgers: {listed.status}")
        found: dict[str, dict[str, dict[str, Quantity]]] = {}
        for item in listed.body.get("items") or ():
            charges = {
                uid: dict(decode_entry(uid, text)[0]) for uid, text in (item.get("data") or {}).items()
            }
            found[item["metadata"]["namespace"]] = {uid: charge for uid, charge in charges.items() if charge}
        return found

    def terminating(self) -> set[str]:
        """Namespaces being deleted: their quota and ledger go with them, and a charge released
        there meanwhile has nothing left to be enforced against (the ledger is not compared)."""
        listed = call(self.api, "GET", "/api/v1/namespaces", timeout=20)
        if listed.status != 200:
            raise OSError(f"listing namespaces: {listed.status}")
        items = listed.body.get("items") or ()
        return {i["metadata"]["name"] for i in items if i["metadata"].get("deletionTimestamp")}

    def check_quota(self) -> None:
        going = self.terminating()
        found = self.truth()
        ledgers = self.ledgers()
        now = time.monotonic()
        seen: set[tuple[str, str]] = set()
        for namespace in sorted(n for n in set(found) | set(ledgers) if n.startswith("soak-")):
            truth = found[namespace]
            held: dict[str, Quantity] = {}
            for charge in truth.charges.values():
                for key, amount in charge.items():
                    held[key] = held.get(key, q(0)) + amount
            for key, amount in held.items():
                if key in HARD and amount > q(HARD[key]):
                    holders = ", ".join(sorted(truth.names[u] for u, c in truth.charges.items() if key in c))
                    self.record.violate(
                        f"quota exceeded in {namespace}: {key} held {amount} > hard {HARD[key]} by {holders}"
                    )
                if key.startswith("requests.") and (key not in self.peak or amount > self.peak[key]):
                    self.peak[key] = amount
            for cls, count in truth.devices.items():
                key = f"{cls}.deviceclass.resource.k8s.io/devices"
                if key in HARD and count > int(HARD[key]):
                    self.record.violate(f"quota exceeded in {namespace}: {key} {count} > hard {HARD[key]}")
            ledger = ledgers.get(namespace, {})
            for uid in (set(ledger) | set(truth.charges)) if namespace not in going else ():
                if ledger.get(uid) == truth.charges.get(uid):
                    continue
                entry = (namespace, uid)
                seen.add(entry)
                what = self.difference(ledger.get(uid), truth, uid)
                since, _ = self.differences.get(entry, (now, what))
                self.differences[entry] = (since, what)
                late = now - max(since, self.record.last_fault_end()) > LEDGER_SLACK
                if late and entry not in self.reported:
                    self.reported.add(entry)
                    self.record.violate(
                        f"ledger of {namespace} differs from the claims for {now - since:.0f} s: {what}"
                    )
        for entry in set(self.differences) - seen:
            since, what = self.differences.pop(entry)
            if entry in self.reported:
                print(f"[{self.record.at():7.1f} s] cleared after {now - since:.0f} s: {what}", flush=True)
        self.quota_samples += 1

    @staticmethod
    def difference(charged: Mapping[str, Quantity] | None, truth: Truth, uid: str) -> str:
        def shown(charge: Mapping[str, Quantity] | None) -> str:
            return ", ".join(f"{k}={v}" for k, v in sorted((charge or {}).items())) or "nothing"

        wanted = truth.charges.get(uid)
        if wanted is None:
            kind = "phantom charge"
            claim_text = f"claim {truth.names.get(uid, '(none: deleted)')} uid {uid}"
        elif charged is None:
            kind, claim_text = "lost charge", f"claim {truth.names[uid]} uid {uid}"
        else:
            kind, claim_text = "wrong charge", f"claim {truth.names[uid]} uid {uid}"
        return f"{kind}: {claim_text}: ledger {shown(charged)}, truth {shown(wanted)}"

    def ledger_settled(self) -> bool:
        return not self.differences

    def _quota_loop(self) -> None:
        while not self.stop.wait(SAMPLE):
            try:
                self.check_quota()
            except (urllib3.exceptions.HTTPError, OSError):
                pass  # the API server is away (a fault): sampled again next time
            except Exception as err:  # a damaged ledger entry, or a bug in the check: said
                self.record.violate(f"quota check failed: {type(err).__name__}: {err}")

    # -- sharing -------------------------------------------------------------------------------------

    def check_sharing(self, item: Mapping[str, Any]) -> None:
        status = item.get("status") or {}
        users = consumers(status)
        self.claim_statuses += 1
        if len(users) < 2:
            return
        policies = {self.cluster.devices.get(d, ("MultiPod", 0, 0))[0] for d in allocated(status)}
        strict = [p for p in EXCLUSIVE if p in policies]
        if strict:
            metadata = item["metadata"]
            self.record.violate(
                f"sharing: claim {metadata['namespace']}/{metadata['name']} (policy {strict[0]}) is "
                f"reserved for {len(users)} pods: {', '.join(users)}"
            )

    def _claims_watch(self) -> None:
        """Every claim status the API server sends, through a list and a watch, again after any
        break (a restart, a 410): a gap there is a re-list, whose states are checked too."""
        custom = client.CustomObjectsApi(self.api)
        args = ("resource.k8s.io", "v1", "resourceclaims")
        while not self.stop.is_set():
            try:
                listed: Any = custom.list_cluster_custom_object(*args, _request_timeout=20)
                for item in listed.get("items") or ():
                    self.check_sharing(item)
                version = listed["metadata"]["resourceVersion"]
                stream = watch.Watch().stream(  # type: ignore[no-untyped-call]
                    custom.list_cluster_custom_object, *args, resource_version=version,
                    timeout_seconds=30, _request_timeout=45,
                )  # fmt: skip
                for event in stream:
                    if self.stop.is_set() or event["type"] == "ERROR":
                        break
                    self.check_sharing(event["object"])
            except Exception:  # the API server restarts under this watch: list again
                self.stop.wait(1.0)

    # -- replicas: readiness, freshness, resources ---------------------------------------------------

    def replica_state(self, i: int) -> tuple[bool, float, str]:
        """Ready ("ok" from /readyz), the snapshot's age, and what was wrong if not."""
        replica = self.cluster.draguard.replica[i]
        if not replica.running:
            return False, math.inf, "not running"
        try:
            status, text = replica.get("/readyz", timeout=3)
            _, metrics = replica.get("/metrics", metrics=True, timeout=3)
        except OSError as err:
            return False, math.inf, f"probe: {err}"
        found = re.search(r"^draguard_snapshot_age_seconds (\S+)$", metrics, re.MULTILINE)
        age = float(found[1]) if found else math.inf
        return (
            status == 200 and text == "ok",
            age,
            f"/readyz {status} {text[:120]!r}, snapshot age {age:.1f} s",
        )

    def _resources_loop(self) -> None:
        while not self.stop.wait(SAMPLE):
            for replica in self.cluster.draguard.replica:
                component = replica.component
                if component is None or component.process.poll() is not None:
                    continue
                pid = component.process.pid
                with contextlib.suppress(OSError, ValueError):
                    status = Path(f"/proc/{pid}/status").read_text()
                    rss = re.search(r"VmRSS:\s+(\d+)", status)
                    threads = re.search(r"Threads:\s+(\d+)", status)
                    if rss is None or threads is None:
                        continue  # killed since poll(): a zombie has no memory to show, and is not sampled
                    fds = os.listdir(f"/proc/{pid}/fd")
                    taken = accepted(pid, fds, {replica.port, replica.metrics_port, replica.health_port})
                    sample = (time.monotonic(), int(rss[1]) / 1024, int(threads[1]), len(fds) - taken, taken)
                    self.samples[pid].append(sample)
                with contextlib.suppress(OSError):
                    _, metrics = replica.get("/metrics", metrics=True, timeout=3)
                    total = sum(
                        float(m[1])
                        for m in re.finditer(
                            r"^draguard_admission_requests_total\{[^}]*\} (\S+)$", metrics, re.M
                        )
                    )
                    self.draguard_admissions[pid] = total


# --- faults -----------------------------------------------------------------------------------------


class Faults:
    """Inject each fault on the main thread (the control plane's processes die with the thread that
    started them), then wait for recovery; one line each."""

    def __init__(
        self, cluster: Cluster, record: Record, traffic: Traffic, invariants: Invariants, quick: bool
    ) -> None:
        self.cluster, self.record, self.traffic, self.invariants = cluster, record, traffic, invariants
        self.rotation_wait = ROTATION_WAIT[quick]
        self.draguard = cluster.draguard
        self.counts: Counter[str] = Counter()
        self.recoveries: dict[str, list[float]] = defaultdict(list)
        self.lock = threading.Lock()
        self.rotations_claimed = 0
        self.bursts: list[threading.Thread] = []
        self.serving = self._serving()
        self.stop = threading.Event()
        self.observer = threading.Thread(target=self._observe_certificates, name="certificates", daemon=True)
        self.observer.start()

    def close(self) -> None:
        self.stop.set()
        for burst in self.bursts:
            burst.join(120)
        self.observer.join(RECOVERY + 10)

    def _serving(self) -> str:
        with contextlib.suppress(urllib3.exceptions.HTTPError, OSError):
            answer = call(
                self.cluster.api, "GET", f"/api/v1/namespaces/{NAMESPACE}/secrets/draguard-tls", timeout=5
            )
            return str((answer.body.get("data") or {}).get("tls.crt", ""))
        return ""

    def _log_count(self, i: int, needle: str) -> int:
        component = self.draguard.replica[i].component
        return component.log.read_text(errors="replace").count(needle) if component else 0

    def run(self, kind: str) -> bool:
        """Inject the fault and wait for recovery; False when the cluster did not come back (the
        API server not ready RESTART_LIMIT seconds after a restart), which ends the soak."""
        if kind == "cert rotation":
            self._await_rotation()
            return True
        window = self.record.open(kind)
        injected = getattr(self, "_" + re.sub(r"\W+", "_", kind).strip("_").lower())
        back = True
        try:
            window.note = injected()
        except ControlPlaneError as err:
            back = self._apiserver_late()
            window.note = f"kube-apiserver not ready within 120 s of its start ({str(err).splitlines()[-1]})"
        finally:
            window.end = time.monotonic()
        self.recover(window)
        return back

    def _apiserver_late(self) -> bool:
        """kube-apiserver did not get ready within the control plane's 120 s (on this shared machine
        its post-start hooks starve while every client comes back at once), or exited (a hook that
        times out ends the process): not draguard's doing, said in the fault's line. It is started
        again whenever it has exited, as the kubelet restarts its static pod, and the soak goes on if
        it gets ready within RESTART_LIMIT more."""
        plane = self.cluster.plane
        context = plane.ssl_context()
        deadline = time.monotonic() + RESTART_LIMIT
        while time.monotonic() < deadline:
            if not plane.apiserver_running():
                with contextlib.suppress(ControlPlaneError):
                    plane.start_apiserver()
            with contextlib.suppress(OSError):
                if https_get(plane.port, "/readyz", context) == (200, "ok"):
                    return True
            time.sleep(1)
        return False

    def recover(self, window: Window) -> None:
        """Wait until both replicas are ready and fresh, at most RECOVERY seconds after the fault ended."""
        deadline = window.end + RECOVERY
        states: list[tuple[bool, float, str]] = []
        while True:
            states = [self.invariants.replica_state(i) for i in range(len(self.draguard.replica))]
            if all(ready and age < FRESH for ready, age, _ in states):
                window.recovered = time.monotonic()
                break
            if time.monotonic() > deadline:
                window.recovered = time.monotonic()
                problems = "; ".join(f"{self.draguard.replica[i].name}: {s[2]}" for i, s in enumerate(states))
                self.record.violate(
                    f"{window.kind}: not ready and fresh {RECOVERY:.0f} s after the fault: {problems}"
                )
                break
            time.sleep(0.5)
        took = window.recovered - window.end
        with self.lock:
            self.counts[window.kind] += 1
            self.recoveries[window.kind].append(took)
        tally = self.record.answers.get(window.kind, Counter())
        shown = ", ".join(f"{n} {o}" for o, n in tally.most_common()) or "none"
        print(
            f"[{window.start - self.record.started:7.1f} s] {window.kind}: {window.note}; lasted "
            f"{window.end - window.start:.1f} s, ready and fresh {took:.1f} s later; answers so far in "
            f"its windows: {shown}; load {os.getloadavg()[0]:.1f}",
            flush=True,
        )

    # -- the faults ----------------------------------------------------------------------------------

    def _kill_9(self) -> str:
        victim = self.draguard.replica[1]
        burst = self.traffic.burst()
        in_flight = 0
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and in_flight == 0:
            with contextlib.suppress(OSError):
                _, metrics = victim.get("/metrics", metrics=True, timeout=2)
                found = re.search(r"^draguard_admission_in_flight (\S+)$", metrics, re.MULTILINE)
                in_flight = int(float(found[1])) if found else 0
            time.sleep(0.05)
        assert victim.component is not None
        os.kill(victim.component.process.pid, signal.SIGKILL)
        victim.component.process.wait()
        self.draguard.start_replica(1)  # its Deployment's ReplicaSet would
        self.bursts.append(burst)
        return f"{victim.name} killed with {in_flight} admissions in flight during a burst of {BURST}"

    def _sigstop(self) -> str:
        victim = self.draguard.replica[0]
        assert victim.component is not None
        pid = victim.component.process.pid
        os.kill(pid, signal.SIGSTOP)
        time.sleep(STOP_SECONDS)  # the fault is a stop of this length
        os.kill(pid, signal.SIGCONT)
        return f"{victim.name} stopped for {STOP_SECONDS:.0f} s (webhook timeouts 5 and 10 s), then continued"

    @contextlib.contextmanager
    def _readiness_watched(self) -> Iterator[list[str]]:
        """While the block runs (an API server restart), which of its readiness checks fail and for
        how long: a restart that takes long says why in its line."""
        plane = self.cluster.plane
        context = plane.ssl_context()
        failing: Counter[str] = Counter()
        done = threading.Event()
        said: list[str] = []

        def poll() -> None:
            while not done.wait(1.0):
                with contextlib.suppress(OSError, ValueError, http.client.HTTPException):
                    lines = https_get(plane.port, "/readyz?verbose", context, timeout=2)[1].splitlines()
                    for line in lines:
                        if line.startswith("[-]"):
                            failing[line[3:].split(" ")[0]] += 1

        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
        try:
            yield said
        finally:
            done.set()
            poller.join(5)
            said.extend(f"{name} failing {n} s" for name, n in failing.most_common(3))

    def _apiserver_restart(self) -> str:
        with self._readiness_watched() as failing:
            self.cluster.plane.restart_apiserver()
        return f"kube-apiserver killed after 2 s and started again (readiness: {', '.join(failing) or 'ok'})"

    def _etcd_restart(self) -> str:
        self.cluster.plane.restart_etcd()
        return "etcd stopped and started again on its data"

    def _watches_cut(self) -> str:
        cut = self.cluster.relay.cut()
        return f"{cut} connections of both replicas to the API server reset"

    def _410_compaction(self) -> str:
        before = sum(self._log_count(i, "listing again") for i in range(2))
        revision = self.cluster.plane.compact_etcd()
        with self._readiness_watched() as failing:
            self.cluster.plane.restart_apiserver()
        relisted = 0
        deadline = time.monotonic() + RECOVERY
        while time.monotonic() < deadline and relisted == 0:
            relisted = sum(self._log_count(i, "listing again") for i in range(2)) - before
            time.sleep(0.5)
        if not relisted:
            self.record.violate(
                "410 compaction: no replica listed again after its watches were compacted away"
            )
        return (
            f"etcd compacted to revision {revision}, kube-apiserver restarted (readiness: "
            f"{', '.join(failing) or 'ok'}); {relisted} re-lists logged"
        )

    def _observe_certificates(self) -> None:
        """Certificates rotate on their own schedule (``values``): each serving certificate the
        elected replica writes opens a fault window of its own, whenever it comes."""
        while not self.stop.wait(1.0):
            current = self._serving()
            if not current or current == self.serving:
                continue
            self.serving = current
            window = self.record.open("cert rotation")
            window.end = window.start
            renewed = sum(
                self._log_count(i, "serving certificate Secret draguard-tls updated") for i in range(2)
            )
            rolled = sum(self._log_count(i, "CA Secret draguard-ca updated") for i in range(2))
            window.note = (
                f"a new serving certificate in the Secret ({renewed} serving and {rolled} CA writes logged)"
            )
            self.recover(window)

    def _await_rotation(self) -> None:
        """The rotation's turn in the schedule: one since the last turn, or the next one (at most
        two thirds of a serving certificate's life away)."""
        deadline = time.monotonic() + self.rotation_wait
        while self.counts["cert rotation"] <= self.rotations_claimed and time.monotonic() < deadline:
            time.sleep(0.5)
        if self.counts["cert rotation"] <= self.rotations_claimed:
            self.record.violate(f"no certificate rotation within {self.rotation_wait:.0f} s")
        self.rotations_claimed = self.counts["cert rotation"]

    def _replica_start_api_down(self) -> str:
        plane = self.cluster.plane
        self.draguard.stop_replica(1)
        plane.stop_apiserver()
        self.draguard.start_replica(1)
        time.sleep(DOWN_SECONDS)  # the fault: a replica starting into an API server that is down
        with self._readiness_watched() as failing:
            plane.start_apiserver()
        name = self.draguard.replica[1].name
        restarts = self._restart_as_the_kubelet_would(1)
        return (
            f"{name} restarted while kube-apiserver was down for {DOWN_SECONDS:.0f} s "
            f"(readiness: {', '.join(failing) or 'ok'})"
            + (f"; it exited and was started again {restarts} time(s), after back-offs" if restarts else "")
        )

    def _restart_as_the_kubelet_would(self, i: int) -> int:
        """Until replica ``i`` is ready (at most RECOVERY seconds), start it again whenever it has
        exited, after the kubelet's crash back-off (10 s, doubling); how many times it took.

        The replicas run with a kubeconfig (there is no pod here for ``--in-cluster``), and
        ``serve --kubeconfig`` exits 2 when the API server does not answer at start, by design (a
        wrong address is one line, not a server that never gets ready). The chart's ``--in-cluster``
        retries instead. Either way the Deployment's pod comes back, and the fault's recovery (ready
        and fresh within 30 s) judges the outcome."""
        replica, delay, restarts = self.draguard.replica[i], KUBELET_BACKOFF, 0
        deadline = time.monotonic() + RECOVERY
        while time.monotonic() < deadline and not (replica.running and self.invariants.replica_state(i)[0]):
            if replica.running:
                time.sleep(0.5)
                continue
            time.sleep(delay)
            self.draguard.start_replica(i)
            delay, restarts = 2 * delay, restarts + 1
        return restarts


# --- the run ----------------------------------------------------------------------------------------


def schedule(minutes: float, quick: bool) -> list[tuple[float, str]]:
    """(earliest start in seconds from the start of traffic, fault); each starts GAP seconds after
    the one before recovered at the soonest. Quick: each kind once, 10 s of traffic first; else
    rounds of every kind, one round per 20 minutes or less (three an hour), evenly spread."""
    if quick:
        return [(10.0, kind) for kind in FAULTS]
    rounds = max(1, math.ceil(minutes / 20))
    slot = (minutes * 60 - 60) / (rounds * len(FAULTS))
    kinds = [kind for _ in range(rounds) for kind in FAULTS]
    return [(30 + i * slot, kind) for i, kind in enumerate(kinds)]


def accepted(pid: int, fds: Sequence[str], ports: set[int]) -> int:
    """How many of the process's descriptors ``fds`` are connections it accepted on ``ports``: its
    clients' to keep or close (the front keeps 0-25 alive at a time, aiohttp closes idle ones), so
    they are shown apart from the descriptors the replica opens itself, which must stay flat."""
    inodes = set()
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
                fields = line.split()
                if fields[3] == "01" and int(fields[1].rsplit(":", 1)[1], 16) in ports:  # established
                    inodes.add(f"socket:[{fields[9]}]")
    count = 0
    for fd in fds:
        with contextlib.suppress(OSError):
            count += os.readlink(f"/proc/{pid}/fd/{fd}") in inodes
    return count


def by_minute(
    series: Sequence[Sample], start: float, end: float, points: int
) -> list[tuple[int, float, int, int, int]]:
    """About ``points`` samples of [start, end], evenly spaced, each with its minute into the run:
    whether the resources grow steadily or in steps, and after which faults."""
    step = max((end - start) / points, SAMPLE)
    picked, due = [], start
    for sample in series:
        if start <= sample[0] <= end and sample[0] >= due:
            picked.append((round((sample[0] - start) / 60), *sample[1:]))
            due = sample[0] + step
    return picked


def flat(series: Sequence[Sample], start: float, end: float) -> dict[str, tuple[float, float]]:
    """Each measure's median over the first and over the last sixth of [start, end]."""
    span = (end - start) / 6
    head = [s for s in series if start <= s[0] <= start + span]
    tail = [s for s in series if end - span <= s[0] <= end]
    if not head or not tail:
        return {}
    return {
        name: (statistics.median(s[i] for s in head), statistics.median(s[i] for s in tail))
        for i, name in ((1, "RSS MiB"), (2, "threads"), (3, "open files"), (4, ACCEPTED))
    }


def report(
    record: Record, traffic: Traffic, invariants: Invariants, faults: Faults, cluster: Cluster,
    traffic_started: float, ended: float, wanted: int,
) -> None:  # fmt: skip
    hours = (ended - traffic_started) / 3600
    print("\n== summary ==")
    print(f"traffic: {ended - traffic_started:.0f} s; {traffic.sent} requests sent by the soak, "
          f"{traffic.admissions} of them through draguard's webhooks; {traffic.skipped} skipped "
          "(more than 48 waiting)")  # fmt: skip
    print(f"admissions answered by draguard (its metrics, every replica process): "
          f"{sum(invariants.draguard_admissions.values()):.0f}")  # fmt: skip
    kinds = ["steady", *FAULTS]
    outcomes = sorted({o for tally in record.answers.values() for o in tally})
    print(f"\n{'window':<26}{'faults':>7}{'recover max s':>14}  answers")
    for kind in kinds:
        tally = record.answers.get(kind, Counter())
        recoveries = faults.recoveries.get(kind, [])
        most = f"{max(recoveries):.1f}" if recoveries else "-"
        count = faults.counts.get(kind, 0) if kind != "steady" else 0
        shown = ", ".join(f"{tally[o]} {o}" for o in outcomes if tally[o]) or "none"
        print(f"{kind:<26}{count:>7}{most:>14}  {shown}")
    for outcome, example in sorted(record.examples.items()):
        if "allowed" not in outcome:
            print(f"  e.g. {outcome}: {example}")
    print(f"\nquota: {invariants.quota_samples} samples; peak held in one namespace "
          + ", ".join(f"{k}={v}" for k, v in sorted(invariants.peak.items()))
          + f" (hard {HARD['requests.cpu']} cpu, {HARD['requests.memory']}); "
          f"sharing: {invariants.claim_statuses} claim statuses checked")  # fmt: skip
    first = cluster.draguard.replica[0]
    assert first.component is not None
    series = invariants.samples.get(first.component.process.pid, [])
    half = traffic_started + (ended - traffic_started) / 2
    print(f"{first.name} over the run (minute: RSS MiB / threads / open files / accepted connections): "
          + ", ".join(f"{m}: {rss:.0f}/{threads}/{files}/{taken}" for m, rss, threads, files, taken in
                      by_minute(series, traffic_started, ended, TRACE_POINTS)))  # fmt: skip
    measured = flat(series, half, ended)
    judged = ended - half >= JUDGED_HALF
    for name, (start, end) in measured.items():
        growth = (end - start) / start if start else 0.0
        verdict = (
            "" if judged else f" (not judged: a second half under {JUDGED_HALF / 60:.0f} minutes is warm-up)"
        )
        if name == ACCEPTED:
            verdict = " (the clients', not judged)"
        print(f"{first.name} {name} over the second half: {start:.1f} -> {end:.1f} ({growth:+.1%}){verdict}")
        if judged and name != ACCEPTED and growth > GROWTH:
            record.violate(
                f"{first.name} {name} grew {growth:.1%} over the second half ({start:.1f} -> {end:.1f})"
            )
    if not measured:
        record.violate(f"{first.name} has no resource samples over the second half (restarted?)")
    for replica in cluster.draguard.replica:
        log = cluster.draguard.workdir / f"{replica.name}.log"
        text = log.read_text(errors="replace") if log.exists() else ""
        per_hour = len(text.encode()) / max(hours, 1e-9)
        errors = Counter(m[1] for m in TRACEBACK.finditer(text))
        rate = "" if judged else ", not judged: a short run packs every fault into minutes"
        size = f"{len(text.encode()) / 1024:.0f} KiB ({per_hour / 2**20:.1f} MiB/hour{rate})"
        print(f"{replica.name} log: {size}, {sum(errors.values())} tracebacks")
        for error, count in errors.most_common():
            at = text.index(error)
            start = text.rfind("\n", 0, max(0, text.rfind("Traceback", 0, at) - 400))
            record.violate(
                f"{replica.name} logged {count} tracebacks ending {error!r}:\n{text[start + 1 : at]}"
            )
        if judged and per_hour > LOG_BYTES_PER_HOUR:
            record.violate(
                f"{replica.name} logs {per_hour / 2**20:.0f} MiB an hour (bound {LOG_BYTES_PER_HOUR >> 20})"
            )
    for kind in FAULTS:
        if faults.counts.get(kind, 0) < wanted:
            record.violate(f"{kind}: {faults.counts.get(kind, 0)} faults, {wanted} wanted")
    print(f"load average (1 min): {os.getloadavg()[0]:.1f}")
    print(f"violations: {len(record.violations)}")
    for line in record.violations:
        print(f"  {line}")


def keep_logs(made: Cluster) -> Path:
    """The replicas' and the control plane's logs, copied out of the work directory (which goes with
    the control plane) for whoever reads the violations."""
    kept = Path(tempfile.mkdtemp(prefix="draguard-soak-logs-"))
    for log in [*made.plane.workdir.glob("*.log"), *made.draguard.workdir.glob("*.log")]:
        shutil.copy(log, kept / log.name)
    return kept


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=60.0, help="traffic time (default 60)")
    parser.add_argument("--quick", action="store_true", help="about 2 minutes, one fault of each kind (CI)")
    parser.add_argument("--seed", type=int, default=25)
    args = parser.parse_args(argv)
    minutes = QUICK_MINUTES if args.quick else args.minutes
    missing = missing_binaries(("etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager"))
    if missing or HELM_MISSING:
        print(f"soak skipped: {missing or HELM_MISSING}")
        return 0
    print(f"load average (1 min): {os.getloadavg()[0]:.1f}", flush=True)
    record = Record()
    with cluster(args.quick) as made:
        print(
            f"[{record.at():7.1f} s] cluster up: {NODES} nodes, 2 replicas, tenants {', '.join(TENANTS)}",
            flush=True,
        )
        traffic = Traffic(made, record, args.seed)
        invariants = Invariants(made, record)
        faults = Faults(made, record, traffic, invariants, args.quick)
        invariants.start()
        traffic.start()
        started = time.monotonic()
        try:
            for at, kind in schedule(minutes, args.quick):
                ready = max(started + at, record.last_fault_end() + GAP)
                time.sleep(max(0.0, ready - time.monotonic()))
                if not faults.run(kind):
                    record.violate(f"kube-apiserver not ready {RESTART_LIMIT:.0f} s more: the soak ends here")
                    break
            time.sleep(max(0.0, started + minutes * 60 - time.monotonic()))
        finally:
            traffic.close()
            faults.close()
        # the ledger settles once the traffic stops: differences still there after RECOVERY are findings
        settle = time.monotonic() + LEDGER_SLACK + 2 * SAMPLE
        while time.monotonic() < settle and not invariants.ledger_settled():
            time.sleep(SAMPLE)
        ended = time.monotonic()
        invariants.close()
        wanted = 1 if args.quick else max(1, math.floor(minutes / 20))  # three an hour
        report(record, traffic, invariants, faults, made, started, ended, wanted)
        if record.violations:
            kept = keep_logs(made)
            print(f"logs of the replicas and the control plane kept in {kept}")
    return 1 if record.violations else 0


if __name__ == "__main__":
    sys.exit(main())
