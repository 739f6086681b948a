"""``draguard headroom`` against the real kube-scheduler 1.36: N copies fit, copy N+1 does not.

For each shape, draguard is asked on the cluster read back from the API server how many copies of
a pod fit; then the copies are created one at a time against the real control plane, each awaited
until the scheduler binds it. All N must bind, on the nodes draguard counted (how many on each:
where scores tie the scheduler picks at random, so the order is not compared), and copy N+1 must
stay Pending with the PodScheduled message draguard predicted, word for word, or be refused by
the API server's quota admission in the words draguard predicted.
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


def headroom(scene: Scene, pod: dict[str, Any]) -> dict[str, Any]:
    """draguard's answer for ``pod`` on the cluster as the API server has it now."""
    scene.seen()  # the scheduler's informers have what was just written (see Scene.ask)
    asked = {**pod, "metadata": {**pod["metadata"], "namespace": scene.ns}}
    quotas = scene.get(f"/api/v1/namespaces/{scene.ns}/resourcequotas")["items"]
    objects = [*scene.state(), *({"apiVersion": "v1", "kind": "ResourceQuota", **q} for q in quotas)]
    path = scene.tmp / "headroom.yaml"
    path.write_text(yaml.safe_dump_all([*objects, asked]))
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


def copies_agree(scene: Scene, pod: dict[str, Any], answer: dict[str, Any]) -> None:
    """Copies 1..N bind, on the nodes draguard counted; copy N+1 stays Pending (or is refused) in
    draguard's words."""
    nodes = []
    for n in range(1, answer["copies"] + 1):
        made = copy_of(pod, n)
        created = create(scene, made)
        assert created.status == 201, created.body
        decision = scene.decision(made["metadata"]["name"], bound=True)
        nodes.append(decision.node)
    assert Counter(nodes) == Counter(answer["order"])
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
