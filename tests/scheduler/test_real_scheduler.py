"""The dry run against the real kube-scheduler 1.36: the same cluster, the same pod, the same answer.

Hand-written scenarios, one behaviour each, through the harness of ``realscheduler.py`` (the
generated ones are in ``test_fidelity.py``).
"""

from __future__ import annotations

import io
import json
import time
from contextlib import redirect_stderr, redirect_stdout
from typing import Any

import yaml
from controlplane import call, wait_for
from realscheduler import Scene, agree, agree_on_preemption, generated_names_removed, pod_manifest, request

from webhook import cli

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


def test_a_class_only_the_stored_expressions_environment_compiles(scene: Scene) -> None:
    """A class written while DRAListTypeAttributes was on uses ``includes``, which only the
    stored-expressions environment declares with the gate off: the API server holds it, and
    kube-scheduler compiles it there and allocates with it. draguard allocate answers the same
    (issue 24: it refused such a cluster as invalid input)."""
    a = scene.node("a")
    b = scene.node("b")
    scene.gpus(a, 2, model="a100")
    scene.gpus(b, 2, model="h100")
    listed = scene.stored_device_class(
        "listed", f'device.attributes["{scene.driver}"].model.includes("a100")'
    )
    scene.template("two", request("g", listed, 2))
    decision, answer = scene.ask(
        pod_manifest("train", claims=[{"name": "g", "resourceClaimTemplateName": "two"}])
    )
    assert decision.node == a
    agree(decision, answer)
    scene.template("three", request("g", listed, 3))
    decision, answer = scene.ask(
        pod_manifest("more", claims=[{"name": "g", "resourceClaimTemplateName": "three"}])
    )
    assert decision.node is None
    agree(decision, answer)


def test_partitions_of_one_gpu_share_its_counters(scene: Scene) -> None:
    a = scene.node("a")
    b = scene.node("b")
    for node in (a, b):
        scene.partitioned_gpu(node)
    part = scene.device_class("part")

    def units(n: int, count: int = 1) -> dict[str, Any]:
        expression = f'device.attributes["{scene.driver}"].units == {n}'
        return request(f"u{n}", part, count, selectors=[{"cel": {"expression": expression}}])

    def pod(name: str, *requests: dict[str, Any], **spec: Any) -> dict[str, Any]:
        scene.template(name, *requests)
        return pod_manifest(name, claims=[{"name": "p", "resourceClaimTemplateName": name}], **spec)

    decision, answer = scene.ask(pod("too-much", units(4, 2), units(2)))  # 10 units of 8
    assert decision.node is None
    agree(decision, answer)
    first = pod("first", units(4), units(2), nodeSelector={"kubernetes.io/hostname": a})
    decision, answer = scene.ask(first, keep=True)
    assert decision.node == a
    agree(decision, answer)
    # a has 2 units left: a half and two quarters fit on b only, and take all of it.
    decision, answer = scene.ask(pod("second", units(4), units(2, 2)), keep=True)
    assert decision.node == b
    agree(decision, answer)
    decision, answer = scene.ask(pod("whole", units(8)))
    assert decision.node is None
    agree(decision, answer)
    decision, answer = scene.ask(pod("quarter", units(2)))
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


def test_a_claim_reserved_by_as_many_consumers_as_allowed_refuses_another_pod(scene: Scene) -> None:
    a = scene.node("a")
    scene.gpus(a, 1)
    gpu = scene.device_class("gpu")
    result = {"request": "g", "driver": scene.driver, "pool": a, "device": "gpu-0"}
    allocated = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    scene.claim(
        "busy",
        request("g", gpu),
        allocation={"devices": {"results": [result]}, "allocationTimestamp": allocated},
    )
    path = f"/apis/resource.k8s.io/v1/namespaces/{scene.ns}/resourceclaims/busy"
    claim = scene.get(path)
    consumers = [{"resource": "pods", "name": f"p{i}", "uid": f"uid-{i}"} for i in range(256)]
    claim["status"]["reservedFor"] = consumers
    answer = call(scene.api, "PUT", f"{path}/status", claim)
    assert answer.status == 200, answer.body
    decision, answer = scene.ask(pod_manifest("p", claims=[{"name": "g", "resourceClaimName": "busy"}]))
    # 1.36 no longer refuses it in PreFilter: the filters pass, PreBind's update is refused.
    assert decision.reason == "SchedulerError"
    agree(decision, answer)


# --- priority and preemption ------------------------------------------------------------------------


def test_priority_classes_decide_who_preempts_whom(scene: Scene) -> None:
    """Pods written as people write them, with ``priorityClassName`` only: draguard resolves their
    priority and preemption policy from the classes (a ``Never`` one, a ``globalDefault`` one) as
    the API server does, and then nominates the node and evicts the pods kube-scheduler does."""
    lowest = scene.priority_class("lowest", -30)
    low = scene.priority_class("low", -10)
    mid = scene.priority_class("mid", 5)
    high = scene.priority_class("high", 1000)
    never = scene.priority_class("never", 1000, preemptionPolicy="Never")
    scene.priority_class("standard", -40, globalDefault=True)
    a, b, c = (scene.node(n, allocatable={"cpu": "2"}) for n in "abc")
    scene.bound("a-low", a, cpu="1", priorityClassName=low)
    scene.bound("a-mid", a, cpu="1", priorityClassName=mid)
    scene.bound("b-mid", b, cpu="2", priorityClassName=mid)
    scene.bound("c-lowest", c, cpu="1", priorityClassName=lowest)
    scene.bound("c-high", c, cpu="1", priorityClassName=high)
    # The class says Never: the scheduler does not even look for victims.
    decision, answer = scene.ask(pod_manifest("patient", cpu="1", priorityClassName=never), as_written=True)
    agree_on_preemption(decision, answer)
    assert answer["message"].endswith("preemption: not eligible due to preemptionPolicy=Never.")
    # No class: the default one's -40 is below every running pod (at priority 0 it would evict c-lowest).
    decision, answer = scene.ask(pod_manifest("plain", cpu="1"), as_written=True)
    agree_on_preemption(decision, answer)
    assert "3 No preemption victims found for incoming pod" in answer["message"]
    # a would lose a-low (a-mid is reprieved), b its mid pod, c only c-lowest: c wins.
    decision, answer = scene.ask(pod_manifest("urgent", cpu="1", priorityClassName=high), as_written=True)
    agree_on_preemption(decision, answer)
    assert (answer["nominated"], answer["victims"]) == (c, [f"{scene.ns}/c-lowest"])


def test_system_classes_resolve_without_a_document(scene: Scene) -> None:
    """``system-cluster-critical`` is in every cluster: a pod naming it preempts even when the input
    holds no such PriorityClass (the harness leaves the system classes out of it)."""
    low = scene.priority_class("low", 10)
    a, b = (scene.node(n, allocatable={"cpu": "2"}) for n in "ab")
    scene.bound("a-1", a, cpu="1", priorityClassName=low)
    scene.bound("a-2", a, cpu="1", priorityClassName=low)
    scene.bound("b-1", b, cpu="2", priorityClassName=low)
    critical = pod_manifest("critical", cpu="2", priorityClassName="system-cluster-critical")
    decision, answer = scene.ask(critical, as_written=True)
    agree_on_preemption(decision, answer)
    assert answer["nominated"] == b and answer["victims"] == [f"{scene.ns}/b-1"]


def test_a_pod_naming_a_missing_class_is_refused_in_the_server_s_words(scene: Scene) -> None:
    scene.priority_class("high", 1000)
    scene.node("a")
    pod = pod_manifest("lost", cpu="1", priorityClassName=scene.n("missing"))
    refused = call(scene.api, "POST", f"/api/v1/namespaces/{scene.ns}/pods", pod)
    assert refused.status == 403
    path = scene.tmp / "lost.yaml"
    written = {**pod, "metadata": {"name": "lost", "namespace": scene.ns}}
    path.write_text(yaml.safe_dump_all([*scene.state(), written]))
    label = f"Pod {scene.ns}/lost: "
    for command, exit_code in (("allocate", 2), ("validate", 1)):
        out = io.StringIO()
        with redirect_stdout(out), redirect_stderr(out):
            code = cli.main([command, "-f", str(path)])
        said = [line.split(label, 1)[1] for line in out.getvalue().splitlines() if label in line]
        assert (code, len(said)) == (exit_code, 1), out.getvalue()
        # The server's words, then the classes there are (draguard's hint).
        assert said[0].startswith(f"{refused.message} (the PriorityClasses are "), (said, refused.message)
        assert scene.n("high") in said[0]
