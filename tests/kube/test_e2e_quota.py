"""The quota rule through the real API server: two replicas share the ledger ConfigMap under load.

The cluster: a CPU driver in the style of dra-driver-cpu (every device one core, mapped onto the
node's ``cpu`` with KEP-5517's ``nodeAllocatableResourceMappings``, hence the control plane with
the DRANodeAllocatableResources gate), 4 nodes of 64 cores. One namespace has a ResourceQuota with two
limits, one for each layer:

* ``cpu.example.com.deviceclass.resource.k8s.io/devices: 75``: upstream's own quota admission
  charges every claim *object* at creation, so of 100 claims created at once exactly 75 exist;
* ``requests.cpu: 20``: upstream charges pods their containers' requests only (``cpu: "0"`` here:
  the pod's CPUs come from its claim, as dra-driver-cpu's examples ask), never the cores a claim's
  devices hand out. draguard charges those to its ledger when a claim is reserved for a pod, so of
  the 75 reservations exactly 20 may be admitted, whichever of the two replicas answers each.

(100 at once keep both replicas' ledger writes contending, as 200 did, for half the suite's time.)

Who reserves: the test, as ``system:kube-scheduler`` (the scheduler's own RBAC), writes the claim
status the DynamicResources plugin writes at PreBind (allocation and ``reservedFor`` in one update).
The pods name a scheduler nobody runs, so the session's kube-scheduler (if a test started one) does
not race the test's own reservations. The quota's ``status`` is set once by hand: without the
controller-manager's quota controller, upstream admission ignores a quota with no ``status.hard``.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pytest
from controlplane import Answer, ControlPlane, call, wait_for
from deploy import Draguard, apply, installed, remove
from kubernetes import client
from workloads import device_class, resource_slice

DRIVER = "cpu.example.com"
NODES = 4
CORES = 64
WORKERS = 100
CLAIM_LIMIT = 75
CPU_LIMIT = 20
DEVICES_KEY = f"{DRIVER}.deviceclass.resource.k8s.io/devices"
LEDGER = "draguard-quota-ledger"
SCHEDULER = "system:kube-scheduler"
RETRIES = 12
NS = "e2e-quota"


def cpu_driver() -> list[dict[str, Any]]:
    """The DeviceClass and one ResourceSlice per node: cores mapped one to one onto ``cpu``."""
    objects = [device_class(DRIVER)]
    for n in range(NODES):
        published = resource_slice(DRIVER, f"quota-node-{n}", devices=CORES)
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


def reservation(claimed: dict[str, Any], pod_uid: str, i: int) -> dict[str, Any]:
    """The claim with the status the scheduler writes at PreBind: core ``i`` allocated, reserved."""
    node = f"quota-node-{i // CORES}"
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


def claims_path(name: str = "") -> str:
    path = f"/apis/resource.k8s.io/v1/namespaces/{NS}/resourceclaims"
    return f"{path}/{name}" if name else path


@dataclass
class Tally:
    """What happened to each worker, filled in from many threads."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    created: dict[int, dict[str, Any]] = field(default_factory=dict)  # claim objects as created
    reserved: dict[int, str] = field(default_factory=dict)  # worker -> claim uid
    claim_refusals: list[str] = field(default_factory=list)
    pod_refusals: list[str] = field(default_factory=list)
    quota_refusals: dict[int, str] = field(default_factory=dict)
    retries: list[str] = field(default_factory=list)  # undecided refusals, then retried
    errors: list[str] = field(default_factory=list)

    def add(self, what: str, i: int, value: Any) -> None:
        with self.lock:
            target = getattr(self, what)
            if isinstance(target, list):
                target.append(value)
            else:
                target[i] = value


@dataclass
class Cluster:
    draguard: Draguard
    plane: ControlPlane
    user: client.ApiClient
    scheduler: client.ApiClient
    tally: Tally = field(default_factory=Tally)


def pooled(api: client.ApiClient) -> client.ApiClient:
    """The same identity with a connection per worker (urllib3 keeps 4 by default)."""
    api.configuration.connection_pool_maxsize = WORKERS
    return client.ApiClient(api.configuration)


@pytest.fixture(scope="module")
def cluster(node_allocatable_plane: ControlPlane) -> Iterator[Cluster]:
    control_plane = node_allocatable_plane
    admin = control_plane.client()
    nodes = [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"quota-node-{n}"}} for n in range(NODES)
    ]
    driver = cpu_driver()
    for node in nodes:
        control_plane.add_node(node["metadata"]["name"], allocatable={"cpu": str(CORES)})
    apply(admin, driver)
    core = client.CoreV1Api(admin)
    hard = {DEVICES_KEY: str(CLAIM_LIMIT), "requests.cpu": str(CPU_LIMIT)}
    claim_rights = {
        "apiGroups": ["resource.k8s.io"],
        "resources": ["resourceclaims"],
        "verbs": ["create", "get", "delete"],
    }
    pod_rights = {"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "get"]}
    values = {"rules": {"quota": {"reconcileSeconds": 1}}}
    try:
        with control_plane.namespace(NS):
            core.create_namespaced_resource_quota(NS, {"metadata": {"name": "team"}, "spec": {"hard": hard}})
            # the quota controller's first sync, which upstream admission waits for
            used = {key: "0" for key in hard}
            core.patch_namespaced_resource_quota_status("team", NS, {"status": {"hard": hard, "used": used}})
            control_plane.grant(NS, "quota-user", [claim_rights, pod_rights])
            with installed(control_plane, values, replicas=2) as deployment:
                try:
                    yield Cluster(
                        deployment,
                        control_plane,
                        pooled(control_plane.client("quota-user", ["team"])),
                        pooled(control_plane.client(SCHEDULER)),
                    )
                finally:
                    # while draguard is here to release them: deleted later by the namespace
                    # controller, they would call the next module's quota webhook
                    call(admin, "DELETE", claims_path())
    finally:
        remove(admin, [*driver, *nodes])


def stored(plane: ControlPlane) -> dict[str, dict[str, str]]:
    """The ledger ConfigMap's entries: claim uid -> charge (empty: a release, kept a while)."""
    answer = call(plane.client(), "GET", f"/api/v1/namespaces/{NS}/configmaps/{LEDGER}")
    assert answer.status == 200, answer.body
    return {uid: json.loads(text)["charge"] for uid, text in (answer.body.get("data") or {}).items()}


def ledger(plane: ControlPlane) -> dict[str, dict[str, str]]:
    """The charges the ledger holds: claim uid -> charge."""
    return {uid: charge for uid, charge in stored(plane).items() if charge}


def undecided(answer: Answer) -> bool:
    """A refusal that is no rule's decision: the API server could not get draguard's answer in time
    ("failed calling webhook"), or draguard answered per the failure policy (the ledger could not be
    written before the deadline, a busy replica). Clients and controllers retry these."""
    return "failed calling webhook" in answer.message or "draguard could not check rule" in answer.message


def attempt(cluster: Cluster, api: client.ApiClient, method: str, path: str, body: dict[str, Any]) -> Answer:
    """One request, repeated with backoff while it is refused undecided (the scheduler requeues a pod
    whose PreBind failed; a controller retries a create), the last answer returned."""
    for retry in range(RETRIES):
        answer = call(api, method, path, body)
        if not undecided(answer):
            return answer
        cluster.tally.add("retries", 0, answer.message)
        time.sleep(min(0.2 * 2**retry, 2.0))
    return answer


def work(cluster: Cluster, i: int, start: threading.Barrier) -> None:
    """One tenant and the scheduler: create claim ``i`` and its pod, then reserve the claim."""
    tally = cluster.tally
    start.wait()
    made = attempt(cluster, cluster.user, "POST", claims_path(), claim(i))
    if made.status != 201:
        tally.add("claim_refusals", i, made.message)
        return
    tally.add("created", i, made.body)
    started = attempt(cluster, cluster.user, "POST", f"/api/v1/namespaces/{NS}/pods", pod(i))
    if started.status != 201:
        tally.add("pod_refusals", i, started.message)
        return
    reserve(cluster, i, made.body, started.body["metadata"]["uid"])


def reserve(cluster: Cluster, i: int, claimed: dict[str, Any], pod_uid: str) -> None:
    """Reserve claim ``i`` for its pod, as the scheduler does at PreBind."""
    tally = cluster.tally
    name = claimed["metadata"]["name"]
    path = claims_path(f"{name}/status")
    answer = attempt(cluster, cluster.scheduler, "PUT", path, reservation(claimed, pod_uid, i))
    if answer.status == 200:
        tally.add("reserved", i, answer.body["metadata"]["uid"])
    elif answer.status == 403 and "exceeded quota" in answer.message:
        tally.add("quota_refusals", i, answer.message)
    else:
        tally.add("errors", i, f"reserving {name}: HTTP {answer.status}: {answer.message}")


def test_concurrent_reservations_never_overcommit_the_quota(cluster: Cluster) -> None:
    start = threading.Barrier(WORKERS)
    with ThreadPoolExecutor(WORKERS) as pool:
        for future in [pool.submit(work, cluster, i, start) for i in range(WORKERS)]:
            future.result()
    tally = cluster.tally
    admitted = len(tally.reserved)
    overcommit = max(0, admitted - CPU_LIMIT)
    print(
        f"\nquota e2e: {WORKERS} concurrent claim+pod creations through 2 replicas: "
        f"{len(tally.created)} claims created (upstream quota {CLAIM_LIMIT}), "
        f"{admitted} reservations admitted (draguard quota {CPU_LIMIT} cpu), "
        f"{len(tally.quota_refusals)} refused, {len(tally.pod_refusals)} pods refused at create, "
        f"{len(tally.retries)} requests retried after an undecided refusal, "
        f"{len(tally.errors)} errors; overcommit: {overcommit}"
    )
    assert overcommit == 0
    assert tally.errors == []
    # upstream's own quota admission counted the claim objects
    assert len(tally.created) == CLAIM_LIMIT
    assert [m for m in tally.claim_refusals if DEVICES_KEY not in m] == []
    # draguard admitted exactly what fits, and refused the rest with upstream's wording
    assert admitted == CPU_LIMIT
    some = next(iter(tally.quota_refusals.values()))
    assert some.endswith(
        f"exceeded quota: team, requested: requests.cpu=1, used: requests.cpu={CPU_LIMIT}, "
        f"limited: requests.cpu={CPU_LIMIT}"
    ), some
    # the ledger is what was admitted: one core per reserved claim, nothing else
    assert ledger(cluster.plane) == {
        uid: {"cpu": "1", "requests.cpu": "1"} for uid in tally.reserved.values()
    }


def test_deleting_reserved_claims_releases_their_charge(cluster: Cluster) -> None:
    tally = cluster.tally
    released = sorted(tally.reserved)[:5]
    uids = set()
    for i in released:
        answer = call(cluster.user, "DELETE", claims_path(f"cores-{i}"))
        assert answer.status == 200, answer.body
        uids.add(tally.reserved.pop(i))
    charges = ledger(cluster.plane)
    assert not uids & set(charges)
    assert len(charges) == CPU_LIMIT - len(released)
    assert all(stored(cluster.plane)[uid] == {} for uid in uids)  # remembered as released
    # the cores freed are admitted again, for claims refused before, and no more than that
    waiting = sorted(tally.quota_refusals)[: len(released) + 2]
    refused_before = len(tally.quota_refusals)
    for i in waiting:
        current = call(cluster.user, "GET", claims_path(f"cores-{i}")).body
        pod_uid = call(cluster.user, "GET", f"/api/v1/namespaces/{NS}/pods/worker-{i}").body["metadata"][
            "uid"
        ]
        del tally.quota_refusals[i]
        reserve(cluster, i, current, pod_uid)
    assert tally.errors == []
    assert len(tally.quota_refusals) == refused_before - len(released)
    assert len(tally.reserved) == CPU_LIMIT
    assert ledger(cluster.plane) == {
        uid: {"cpu": "1", "requests.cpu": "1"} for uid in tally.reserved.values()
    }


def backdate(plane: ControlPlane, uid: str, charge: dict[str, str]) -> None:
    """Write one ledger entry as if made two minutes ago: reconcile leaves entries younger than its
    grace period (60 s, for reservations the snapshot does not show yet) alone, and the test must
    not wait that long."""
    api = plane.client()
    path = f"/api/v1/namespaces/{NS}/configmaps/{LEDGER}"
    at = (dt.datetime.now(dt.UTC) - dt.timedelta(minutes=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    entry = json.dumps({"charge": charge, "at": at}, sort_keys=True)
    answer = call(api, "PATCH", path, {"data": {uid: entry}})
    assert answer.status == 200, answer.body


def fail_open(plane: ControlPlane, webhook: str) -> None:
    """``kubectl patch`` the webhook to failurePolicy Ignore, as the chart README's emergency section
    says (retried: the elected replica may be writing the caBundle at the same moment)."""
    path = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/draguard"
    api = plane.client()

    def patched() -> bool:
        config = call(api, "GET", path).body
        for hook in config["webhooks"]:
            if hook["name"] == webhook:
                hook["failurePolicy"] = "Ignore"
        return call(api, "PUT", path, config).status == 200

    wait_for(f"{webhook} to fail open", patched, timeout=10)


def test_reconcile_heals_a_lost_release_and_a_ledger_edited_by_hand(cluster: Cluster) -> None:
    """A claim deleted while no replica answered (the quota webhook failed open, as the chart README
    tells an admin to do in an outage) keeps its charge until the reconcile drops it; so does an
    entry someone wrote by hand; a charge edited to a wrong amount is put back."""
    plane, draguard, tally = cluster.plane, cluster.draguard, cluster.tally
    lost, edited = sorted(tally.reserved)[-2:]
    fail_open(plane, "quota.draguard.io")
    for i in range(len(draguard.replica)):
        draguard.stop_replica(i)
    gone = call(cluster.user, "DELETE", claims_path(f"cores-{lost}"))
    assert gone.status == 200, gone.body
    lost_uid = tally.reserved.pop(lost)
    assert lost_uid in ledger(plane)  # nobody saw the release
    backdate(plane, lost_uid, {"cpu": "1", "requests.cpu": "1"})
    backdate(plane, "made-up-uid", {"requests.cpu": "7"})
    backdate(plane, tally.reserved[edited], {"cpu": "3", "requests.cpu": "3"})
    for i in range(len(draguard.replica)):
        draguard.start_replica(i)
    expected = {uid: {"cpu": "1", "requests.cpu": "1"} for uid in tally.reserved.values()}
    wait_for("the reconcile to heal the ledger", lambda: ledger(plane) == expected, timeout=60)
