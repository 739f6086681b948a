"""A burst of reservations through the real API server: what ``test_e2e_quota.py`` asserts on and
``benchmarks/quota_burst.py`` measures (issue 30).

The cluster: a CPU driver in the style of dra-driver-cpu (every device one core, mapped onto the
node's ``cpu`` with KEP-5517's ``nodeAllocatableResourceMappings``, hence the control plane with
the DRANodeAllocatableResources gate), nodes of 64 cores, as many as the burst has workers. Each
namespace has a ResourceQuota with two limits, one for each layer:

* ``cpu.example.com.deviceclass.resource.k8s.io/devices``: upstream's own quota admission charges
  every claim *object* at creation, so of the claims created at once exactly that many exist;
* ``requests.cpu``: upstream charges pods their containers' requests only (``cpu: "0"`` here: the
  pod's CPUs come from its claim, as dra-driver-cpu's examples ask), never the cores a claim's
  devices hand out. draguard charges those to its ledger when a claim is reserved for a pod, so of
  the reservations exactly that many may be admitted, whichever replica answers each.

Each worker, all at once: create claim ``i`` and pod ``i`` as a tenant, then reserve the claim as
``system:kube-scheduler`` (the scheduler's own RBAC) writes it at PreBind: the allocation of core
``i`` (every worker its own core) and ``reservedFor`` in one status update. The pods name a
scheduler nobody runs, so a kube-scheduler started by another test does not race the workers. A
refused request is not retried: every answer is recorded as the client got it, with its latency.
The quota's ``status`` is set once by hand: without the controller-manager's quota controller,
upstream admission ignores a quota with no ``status.hard``.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import statistics
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from controlplane import ControlPlane, call
from deploy import Draguard, apply, installed, remove
from kubernetes import client
from workloads import claims, device_class, pods, resource_slice

DRIVER = "cpu.example.com"
CORES = 64
DEVICES_KEY = f"{DRIVER}.deviceclass.resource.k8s.io/devices"
SCHEDULER = "system:kube-scheduler"
TENANT = "quota-user"
# The calls the quota rule decides (the claim's creation goes to the selectors rule only).
DECIDED_BY_QUOTA = ("pod", "reserve")


@dataclass(frozen=True)
class Burst:
    """``workers`` spread over ``namespaces`` (worker ``i`` in namespace ``i % len``), each of which
    allows ``claims`` claim objects and ``cpu`` cores of reservations."""

    namespaces: tuple[str, ...]
    workers: int
    claims: int
    cpu: int

    def namespace(self, i: int) -> str:
        return self.namespaces[i % len(self.namespaces)]

    @property
    def nodes(self) -> list[str]:
        return [f"burst-node-{n}" for n in range(-(-self.workers // CORES))]


def cpu_driver(nodes: Sequence[str]) -> list[dict[str, Any]]:
    """The DeviceClass and one ResourceSlice per node: cores mapped one to one onto ``cpu``."""
    objects = [device_class(DRIVER)]
    for node in nodes:
        published = resource_slice(DRIVER, node, devices=CORES)
        for core, device in enumerate(published["spec"]["devices"]):
            device["attributes"]["dra.cpu/numaNodeID"] = {"int": core // (CORES // 2)}
            device["nodeAllocatableResourceMappings"] = {"cpu": {"allocationMultiplier": "1"}}
        objects.append(published)
    return objects


def claim(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": f"cores-{i}"},
        "spec": {"devices": {"requests": [{"name": "cpu", "exactly": {"deviceClassName": DRIVER}}]}},
    }


def pod(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"worker-{i}"},
        "spec": {
            "schedulerName": "e2e-quota-planner",
            "containers": [
                {
                    "name": "work",
                    "image": "registry.k8s.io/pause:3.9",
                    # the pod's CPUs come from the claim, not from the container's requests
                    "resources": {"requests": {"cpu": "0"}, "claims": [{"name": "cores"}]},
                }
            ],
            "resourceClaims": [{"name": "cores", "resourceClaimName": f"cores-{i}"}],
        },
    }


def reservation(claimed: Mapping[str, Any], pod_uid: str, i: int) -> dict[str, Any]:
    """The claim with the status the scheduler writes at PreBind: core ``i`` allocated, reserved."""
    node = f"burst-node-{i // CORES}"
    allocation = {
        "devices": {
            "results": [{"request": "cpu", "driver": DRIVER, "pool": node, "device": f"dev-{i % CORES}"}]
        },
        "nodeSelector": {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
            ]
        },
    }
    status = {
        "allocation": allocation,
        "reservedFor": [{"resource": "pods", "name": f"worker-{i}", "uid": pod_uid}],
    }
    return {**claimed, "status": status}


def undecided(message: str) -> bool:
    """Whether a refusal is no rule's decision: the API server could not get draguard's answer in
    time ("failed calling webhook"), or draguard answered per the failure policy (a busy replica, a
    ledger it could not write before the deadline). A controller retries these, with backoff."""
    return "failed calling webhook" in message or "draguard could not check rule" in message


@dataclass(frozen=True)
class Call:
    """One request of a worker as its client saw it."""

    worker: int
    namespace: str
    step: str  # "claim", "pod" or "reserve"
    status: int
    message: str
    seconds: float
    body: Mapping[str, Any] = field(default_factory=dict, repr=False)

    @property
    def undecided(self) -> bool:
        return undecided(self.message)


@dataclass
class Outcome:
    """Every call of a burst, and how long the burst took."""

    calls: list[Call] = field(default_factory=list)
    seconds: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, call: Call) -> None:
        with self.lock:
            self.calls.append(call)

    def of(self, step: str, status: int | None = None, namespace: str | None = None) -> list[Call]:
        return [
            c
            for c in self.calls
            if c.step == step
            and (status is None or c.status == status)
            and (namespace is None or c.namespace == namespace)
        ]

    def undecided(self) -> list[Call]:
        return [c for c in self.calls if c.undecided]

    def reserved(self, namespace: str | None = None) -> dict[int, str]:
        """Worker -> uid of the claim reserved for its pod."""
        return {c.worker: c.body["metadata"]["uid"] for c in self.of("reserve", 200, namespace)}

    def quota_refused(self, namespace: str | None = None) -> dict[int, str]:
        """Worker -> draguard's "exceeded quota" refusal of its reservation."""
        return {
            c.worker: c.message for c in self.of("reserve", 403, namespace) if "exceeded quota" in c.message
        }

    def errors(self) -> list[str]:
        """Reservations answered neither yes nor "exceeded quota"."""
        return [
            f"reserving cores-{c.worker} in {c.namespace}: HTTP {c.status}: {c.message}"
            for c in self.of("reserve")
            if c.status != 200 and not (c.status == 403 and "exceeded quota" in c.message)
        ]

    def latencies(self, steps: Sequence[str] = DECIDED_BY_QUOTA) -> list[float]:
        return sorted(c.seconds for c in self.calls if c.step in steps and not c.undecided)


def percentile(sorted_values: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile of values already sorted (0 for none)."""
    if not sorted_values:
        return 0.0
    rank = max(0, min(len(sorted_values) - 1, round(fraction * len(sorted_values)) - 1))
    return sorted_values[rank]


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else 0.0


@dataclass(frozen=True)
class Access:
    """How the workers reach the API server: as the tenant and as the scheduler (certificate and
    key files), plain strings, so that a process of their own can be handed them."""

    url: str
    ca_file: str
    tenant: tuple[str, str]
    scheduler: tuple[str, str]

    @classmethod
    def of(cls, plane: ControlPlane) -> Access:
        tenant = plane.client_certificate(TENANT, ["team"])
        scheduler = plane.client_certificate(SCHEDULER)
        return cls(plane.url, str(plane.ca_file), (str(tenant[0]), str(tenant[1])),
                   (str(scheduler[0]), str(scheduler[1])))  # fmt: skip

    def clients(self, workers: int) -> Clients:
        return Clients(self._client(self.tenant, workers), self._client(self.scheduler, workers))

    def _client(self, pair: tuple[str, str], workers: int) -> client.ApiClient:
        """A client with a connection per worker (urllib3 keeps 4 by default)."""
        configuration = client.Configuration()
        configuration.host = self.url
        configuration.ssl_ca_cert = self.ca_file
        configuration.cert_file, configuration.key_file = pair
        configuration.connection_pool_maxsize = workers
        return client.ApiClient(configuration)


@dataclass
class Clients:
    """The tenant and the scheduler."""

    user: client.ApiClient
    scheduler: client.ApiClient


@dataclass(frozen=True)
class Worker:
    """Worker ``i`` of a burst, recording its calls in ``outcome``."""

    i: int
    namespace: str
    outcome: Outcome

    def send(self, api: client.ApiClient, step: str, method: str, path: str, body: Mapping[str, Any]) -> Call:
        """One request, recorded as it was answered."""
        started = time.perf_counter()
        answer = call(api, method, path, body)
        seconds = time.perf_counter() - started
        made = Call(self.i, self.namespace, step, answer.status, answer.message, seconds, answer.body)
        self.outcome.add(made)
        return made

    def reserve(self, scheduler: client.ApiClient, claimed: Mapping[str, Any], pod_uid: str) -> Call:
        """Reserve the worker's claim for its pod, as the scheduler does at PreBind."""
        path = f"{claims(self.namespace)}/{claimed['metadata']['name']}/status"
        return self.send(scheduler, "reserve", "PUT", path, reservation(claimed, pod_uid, self.i))

    def work(self, clients: Clients, start: threading.Barrier) -> None:
        """Create the claim and the pod as the tenant, then reserve the claim as the scheduler."""
        start.wait()
        made = self.send(clients.user, "claim", "POST", claims(self.namespace), claim(self.i))
        if made.status != 201:
            return
        started = self.send(clients.user, "pod", "POST", pods(self.namespace), pod(self.i))
        if started.status == 201:
            self.reserve(clients.scheduler, made.body, started.body["metadata"]["uid"])


def run(burst: Burst, access: Access) -> Outcome:
    """Every worker at once, in a process of their own; the outcome once all are done.

    Not in this process: the Service's stand-in (``deploy.Balancer``) relays every webhook call
    here, and beside 200 client threads each relayed call waited for the GIL (the burst without
    draguard's quota rule took 5.5 s with the workers here, 4.1 s with them apart)."""
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(1, mp_context=spawn) as apart:
        calls, seconds = apart.submit(_run_here, burst, access).result()
    return Outcome(calls, seconds)


def _run_here(burst: Burst, access: Access) -> tuple[list[Call], float]:
    outcome = Outcome()
    clients = access.clients(burst.workers)
    start = threading.Barrier(burst.workers + 1)
    with ThreadPoolExecutor(burst.workers) as pool:
        workers = [Worker(i, burst.namespace(i), outcome) for i in range(burst.workers)]
        futures = [pool.submit(worker.work, clients, start) for worker in workers]
        start.wait()
        began = time.perf_counter()
        for future in futures:
            future.result()
        outcome.seconds = time.perf_counter() - began
    return outcome.calls, outcome.seconds


CLAIM_RIGHTS = {
    "apiGroups": ["resource.k8s.io"],
    "resources": ["resourceclaims"],
    "verbs": ["create", "get", "delete"],
}
POD_RIGHTS = {"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "get"]}


@contextlib.contextmanager
def quota_namespace(plane: ControlPlane, burst: Burst, namespace: str) -> Iterator[str]:
    """A fresh namespace with the burst's quota, synced as the quota controller would, and the
    tenant's rights in it."""
    core = client.CoreV1Api(plane.client())
    hard = {DEVICES_KEY: str(burst.claims), "requests.cpu": str(burst.cpu)}
    # the quota controller's first sync, which upstream admission waits for
    synced = {"status": {"hard": hard, "used": {key: "0" for key in hard}}}
    with plane.namespace(namespace):
        core.create_namespaced_resource_quota(
            namespace, {"metadata": {"name": "team"}, "spec": {"hard": hard}}
        )
        core.patch_namespaced_resource_quota_status("team", namespace, synced)
        plane.grant(namespace, TENANT, [CLAIM_RIGHTS, POD_RIGHTS])
        yield namespace


@contextlib.contextmanager
def prepared(
    plane: ControlPlane, burst: Burst, values: Mapping[str, Any] | None
) -> Iterator[Draguard | None]:
    """The burst's nodes, driver and namespaces, and draguard installed from the chart with
    ``values`` and two replicas (None: without draguard); removed afterwards, the claims first,
    while draguard is there to release them (deleted later by the namespace controller, they would
    call the next module's quota webhook)."""
    admin = plane.client()
    nodes = [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}} for name in burst.nodes]
    driver = cpu_driver(burst.nodes)
    for name in burst.nodes:
        plane.add_node(name, allocatable={"cpu": str(CORES)})
    apply(admin, driver)
    try:
        with contextlib.ExitStack() as stack:
            for namespace in burst.namespaces:
                stack.enter_context(quota_namespace(plane, burst, namespace))
            draguard = None if values is None else stack.enter_context(installed(plane, values, replicas=2))
            try:
                yield draguard
            finally:
                for namespace in burst.namespaces:
                    call(admin, "DELETE", claims(namespace))
                    call(admin, "DELETE", pods(namespace))
    finally:
        remove(admin, [*driver, *nodes])
