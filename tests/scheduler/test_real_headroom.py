"""``draguard headroom`` against the real kube-scheduler 1.36: N copies fit, copy N+1 does not.

For each shape, draguard is asked on the cluster read back from the API server how many copies of
a pod fit; then the copies are created one at a time against the real control plane, each awaited
until the scheduler binds it. All N must bind, on the nodes draguard counted (how many on each:
where scores tie the scheduler picks at random, so the order is not compared), and copy N+1 must
stay Pending with the PodScheduled message draguard predicted, word for word, or be refused by
the API server's quota admission in the words draguard predicted. One shape is stopped by a rule of
draguard's own, not upstream's: node-allocatable cpu devices under a quota (KEP-5517, on the
control plane with its alpha gate), where copy N+1 is checked against draguard's quota rule on the
real cluster and against what upstream alone does with it (see its docstring).
"""

from __future__ import annotations

import copy
import io
import json
from collections import Counter
from contextlib import redirect_stdout
from typing import Any

import yaml
from controlplane import call, wait_for
from realscheduler import Scene, generated_names_removed, pod_manifest, request

from webhook import cli


def cluster(scene: Scene) -> list[dict[str, Any]]:
    """The cluster as the API server has it now, with the namespace's ResourceQuotas."""
    quotas = scene.get(f"/api/v1/namespaces/{scene.ns}/resourcequotas")["items"]
    return [*scene.state(), *({"apiVersion": "v1", "kind": "ResourceQuota", **q} for q in quotas)]


def in_namespace(scene: Scene, pod: dict[str, Any]) -> dict[str, Any]:
    return {**pod, "metadata": {**pod["metadata"], "namespace": scene.ns}}


def headroom(scene: Scene, pod: dict[str, Any]) -> dict[str, Any]:
    """draguard's answer for ``pod`` on the cluster as the API server has it now."""
    scene.seen()  # the scheduler's informers have what was just written (see Scene.ask)
    path = scene.tmp / "headroom.yaml"
    path.write_text(yaml.safe_dump_all([*cluster(scene), in_namespace(scene, pod)]))
    out = io.StringIO()
    with redirect_stdout(out):
        code = cli.main(
            ["headroom", "-f", str(path), "--pod", f"{scene.ns}/{pod['metadata']['name']}", "-o", "json"]
        )
    assert code in (0, 1), out.getvalue()
    answer: dict[str, Any] = json.loads(out.getvalue())
    return answer


def copy_of(pod: dict[str, Any], n: int) -> dict[str, Any]:
    made = copy.deepcopy(pod)
    made["metadata"]["name"] = f"{pod['metadata']['name']}-copy-{n}"
    return made


def create(scene: Scene, pod: dict[str, Any]) -> Any:
    return call(scene.api, "POST", f"/api/v1/namespaces/{scene.ns}/pods", pod)


def copies_bind(scene: Scene, pod: dict[str, Any], answer: dict[str, Any]) -> None:
    """Copies 1..N, created one at a time, bind on the nodes draguard counted."""
    nodes = []
    for n in range(1, answer["copies"] + 1):
        made = copy_of(pod, n)
        created = create(scene, made)
        assert created.status == 201, created.body
        decision = scene.decision(made["metadata"]["name"], bound=True)
        nodes.append(decision.node)
    assert Counter(nodes) == Counter(answer["order"])


def copies_agree(scene: Scene, pod: dict[str, Any], answer: dict[str, Any]) -> None:
    """Copies 1..N bind, on the nodes draguard counted; copy N+1 stays Pending (or is refused) in
    draguard's words."""
    copies_bind(scene, pod, answer)
    limit = answer["limit"]
    made = copy_of(pod, answer["copies"] + 1)
    created = create(scene, made)
    if limit["by"] == "Quota":
        assert created.status == 403, created.body
        assert created.body["message"] == limit["message"]
        return
    assert limit["by"] == "Scheduler"
    assert created.status == 201, created.body
    decision = scene.decision(made["metadata"]["name"])
    assert decision.node is None
    assert (decision.reason, generated_names_removed(decision.message or "")) == (
        limit["reason"],
        limit["message"],
    )


def template_pod(scene: Scene, name: str, *requests: dict[str, Any], **spec: Any) -> dict[str, Any]:
    scene.template(name, *requests)
    return pod_manifest(name, claims=[{"name": "d", "resourceClaimTemplateName": name}], **spec)


def test_whole_gpus_until_none_is_left(scene: Scene) -> None:
    a = scene.node("a", labels={"topology.kubernetes.io/zone": "a"})
    b = scene.node("b", labels={"topology.kubernetes.io/zone": "b"})
    scene.gpus(a, 2)
    scene.gpus(b, 3)
    pod = template_pod(scene, "train", request("g", scene.device_class("gpu")), cpu="1")
    answer = headroom(scene, pod)
    assert answer["copies"] == 5
    assert "cannot allocate all claims" in answer["limit"]["message"]
    copies_agree(scene, pod, answer)


def test_cpu_stops_them_before_the_gpus(scene: Scene) -> None:
    a = scene.node("a", allocatable={"cpu": "5"})
    scene.gpus(a, 4)
    pod = template_pod(scene, "train", request("g", scene.device_class("gpu")), cpu="2")
    answer = headroom(scene, pod)
    assert answer["copies"] == 2
    assert "Insufficient cpu" in answer["limit"]["message"]
    copies_agree(scene, pod, answer)


def test_partitions_until_the_shared_counters_are_used_up(scene: Scene) -> None:
    a = scene.node("a")
    b = scene.node("b")
    for node in (a, b):
        scene.partitioned_gpu(node)
    expression = f'device.attributes["{scene.driver}"].units == 4'
    half = request("h", scene.device_class("part"), selectors=[{"cel": {"expression": expression}}])
    pod = template_pod(scene, "half", half)
    answer = headroom(scene, pod)
    assert answer["copies"] == 4  # two halves of each GPU
    copies_agree(scene, pod, answer)


def test_consumable_capacity_shared_until_used_up(scene: Scene) -> None:
    a = scene.node("a")
    b = scene.node("b")
    for node, bandwidth in ((a, "100G"), (b, "50G")):
        nic = {
            "name": "nic-0",
            "allowMultipleAllocations": True,
            "capacity": {"bandwidth": {"value": bandwidth}},
        }
        scene.pool_slice(node, "nics", 1, devices=[nic])
    share = request("bw", scene.device_class("nic"), capacity={"requests": {"bandwidth": "30G"}})
    pod = template_pod(scene, "link", share)
    answer = headroom(scene, pod)
    assert answer["copies"] == 3 + 1
    copies_agree(scene, pod, answer)


def test_tainted_devices_and_a_tainted_node_are_left_out(scene: Scene) -> None:
    a = scene.node("a")
    scene.node("b", taints=[{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}])
    devices = [{"name": f"gpu-{i}"} for i in range(3)]
    devices[0]["taints"] = [{"key": "example.com/unhealthy", "value": "ecc", "effect": "NoSchedule"}]
    scene.pool_slice(a, "gpus", 1, devices=devices)
    scene.gpus(scene.node_names[1], 4)
    pod = template_pod(scene, "train", request("g", scene.device_class("gpu")))
    answer = headroom(scene, pod)
    assert answer["copies"] == 2
    assert "untolerated taint" in answer["limit"]["message"]
    copies_agree(scene, pod, answer)


def test_a_pod_quota_refuses_the_copy_first(scene: Scene) -> None:
    a = scene.node("a")
    scene.gpus(a, 8)
    hard = {"pods": "3", "requests.cpu": "10"}
    scene.create(
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "team", "namespace": scene.ns},
            "spec": {"hard": hard},
        }
    )
    path = f"/api/v1/namespaces/{scene.ns}/resourcequotas/team"
    wait_for(
        "the quota controller to count the namespace", lambda: scene.get(path).get("status", {}).get("used")
    )
    pod = template_pod(scene, "train", request("g", scene.device_class("gpu")), cpu="1")
    answer = headroom(scene, pod)
    assert (answer["copies"], answer["limit"]["by"]) == (3, "Quota")
    assert answer["limit"]["message"].startswith('pods "train-copy-4" is forbidden: exceeded quota: team')
    copies_agree(scene, pod, answer)


def cpu_driver_cores(scene: Scene, node: str, count: int) -> None:
    """A CPU driver's pool on ``node`` in the style of dra-driver-cpu: one device per core, with its
    topology as attributes, each mapped onto one of the node's ``cpu`` (KEP-5517's
    ``nodeAllocatableResourceMappings``, kept by the API server only with the alpha gate)."""
    cores = [
        {
            "name": f"cpu-{i:03d}",
            "attributes": {
                "dra.cpu/cpuID": {"int": i},
                "dra.cpu/coreID": {"int": i // 2},
                "dra.cpu/numaNodeID": {"int": i // (count // 2)},
                "dra.cpu/socketID": {"int": 0},
            },
            "nodeAllocatableResourceMappings": {"cpu": {"allocationMultiplier": "1"}},
        }
        for i in range(count)
    ]
    scene.pool_slice(node, "cpus", 1, devices=cores)


def draguard_refuses(scene: Scene, pod: dict[str, Any], words: str) -> None:
    """draguard's admission rules, run by ``draguard test`` on the cluster as the API server has it
    now (the webhook's own code, without a webhook), refuse creating ``pod`` in ``words``."""
    (scene.tmp / "state.yaml").write_text(yaml.safe_dump_all(cluster(scene)))
    test = {"name": "the next copy", "operation": "CREATE", "object": in_namespace(scene, pod)}
    test.update(expect="deny", messageContains=words)
    suite = scene.tmp / "suite.yaml"
    suite.write_text(yaml.safe_dump({"name": "headroom", "state": ["state.yaml"], "tests": [test]}))
    out = io.StringIO()
    with redirect_stdout(out):
        code = cli.main(["test", str(suite), "-o", "json"])
    assert code == 0, out.getvalue()


def test_cpu_devices_folded_into_a_quota_stop_the_copies(allocatable_scene: Scene) -> None:
    """Node-allocatable cpu devices with a quota (KEP-5517). Each copy asks for 1 cpu in its
    container and two cores of a CPU driver through its template claim, so draguard folds 3 cpu
    into ``requests.cpu``: of a quota of 10, three copies use 9 and the fourth is refused
    (``pods "pinned-copy-4" is forbidden: exceeded quota: ...``), before cores (8) or the node's
    cpu (64) run out.

    What the real cluster does, and which part is draguard's own rule: the three copies bind on the
    node draguard counted (the real kube-scheduler with the gate). The API server's quota admission
    charges a pod its containers' requests only, never the cpu its claims' devices hand out: after
    three copies the quota's ``status.used`` says ``requests.cpu: 3``, not 9, and without draguard it
    admits the fourth copy, which the scheduler binds too (cores are left). Refusing it is
    draguard's quota rule (README, "quota"): its webhook charges the cores to a ledger when the
    scheduler reserves a claim and, at pod creation, refuses a pod whose smallest footprint
    exceeds the quota; ``draguard test`` runs that rule on the cluster as read back after the three
    copies (the real allocations, the real ``status.used``) and must refuse the fourth copy with
    the numbers headroom gave. The webhook itself is not installed here (its install costs more
    than this test may; tests/kube/test_e2e_quota.py runs it on this control plane)."""
    scene = allocatable_scene
    a = scene.node("a", allocatable={"cpu": "64"})
    cpu_driver_cores(scene, a, 8)
    quota = {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "team", "namespace": scene.ns}}
    scene.create({**quota, "spec": {"hard": {"requests.cpu": "10"}}})
    path = f"/api/v1/namespaces/{scene.ns}/resourcequotas/team"
    wait_for(
        "the quota controller to count the namespace", lambda: scene.get(path).get("status", {}).get("used")
    )
    pod = template_pod(scene, "pinned", request("cores", scene.device_class("cpu"), count=2), cpu="1")
    answer = headroom(scene, pod)
    # 1 + 2 cpu a copy: three use 9 of 10
    used, limited = "requests.cpu=9", "requests.cpu=10"
    exceeded = f"exceeded quota: team, requested: requests.cpu=3, used: {used}, limited: {limited}"
    assert (answer["copies"], answer["limit"]["by"]) == (3, "Quota")
    assert answer["limit"]["message"] == f'pods "pinned-copy-4" is forbidden: {exceeded}'
    copies_bind(scene, pod, answer)
    assert scene.get(path)["status"]["used"] == {"requests.cpu": "3"}  # the containers' cpu only
    fourth = copy_of(pod, 4)
    draguard_refuses(scene, fourth, exceeded)
    created = create(scene, fourth)
    assert created.status == 201, created.body  # upstream alone admits it ...
    assert scene.decision("pinned-copy-4", bound=True).node == a  # ... and the scheduler binds it
