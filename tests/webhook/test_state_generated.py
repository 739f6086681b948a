"""``serve --state`` of a generated cluster decides as the offline commands decide on the same objects.

``serve --state`` (and the live state) read a cluster the compact way: big JSON files streamed,
objects trimmed (no managedFields, a Node's status reduced to what the scheduler reads), models
compacted, pods kept as records whose spec and labels the pods of a template share, only the pods
a rule or the scheduler reads. The offline commands read the same files whole into models and
``Snapshot.build``. Whatever the compact path leaves out must not change a decision: the rules'
answers to a few reviews, and the dry run's (``POST /v1/dryrun``, ``draguard allocate``) answers,
must be the same on both.

The cluster is ``benchmarks/clustergen.py``'s at a hundredth of the scale limit (50 nodes of 8
GPUs, 200 allocated claims, 1,000 bound pods as the API server stores them), plus a few objects
the generator does not make: two nodes whose devices hand out node memory per pod and per
container (KEP-5517), a claim on one reserved by a running pod and about to be reserved by a
second one with two containers, a pending pod, a finished one and a PriorityClass.
"""

from __future__ import annotations

import copy
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from benchmarks import clustergen
from policies.allocator import SearchBudget
from policies.api.defaults import apply_defaults
from policies.api.kinds import decode
from policies.config import Config
from policies.dryrun import DryRun, FeatureGates, Prepared, Question
from policies.dryrun.request import Limits, answer_request, parse_request
from policies.rules import engine
from policies.rules.registry import RULES
from policies.scheduler.profile import Unpaced
from policies.snapshot import Snapshot
from webhook import manifests, review
from webhook.server import split_rules
from webhook.state import FileState

sys.path.append(str(Path(__file__).resolve().parents[1] / "rules"))  # the KEP-5517 fixtures
from node_allocatable_fixtures import (
    _class,
    _node_objects,
    claim,
    consumer,
    container,
    pod,
    quota,
    request,
)

NOW = datetime(2026, 11, 22, 9, 0, tzinfo=UTC)
SIZES = clustergen.Sizes.scaled(0.01)
NS = clustergen.namespace_name(0)
CREATED = "2026-11-20T08:00:00Z"
KEP5517_GPU, OTHER_GPU = "gpu.example.com", "vgpu.example.com"


def stored(obj: dict[str, Any], phase: str = "Running") -> dict[str, Any]:
    """A pod as the API server stores it: created, its priority set by admission, a phase."""
    obj = copy.deepcopy(obj)
    obj["metadata"].update({"creationTimestamp": CREATED, "resourceVersion": "7001"})
    obj["spec"].setdefault("priority", 0)
    obj["status"] = {"phase": phase, "startTime": CREATED}
    return obj


# The KEP-5517 part: a GPU with 1Gi of memory overhead per pod and 512Mi per container.
def other_driver(obj: Any) -> Any:
    """The generated cluster's GPUs are gpu.example.com's: the KEP-5517 GPUs are another driver's."""
    return json.loads(json.dumps(obj).replace(KEP5517_GPU, OTHER_GPU))


CORES = other_driver(claim("cores", request("gpu", "gpu"), devices=("gpu/gpu-0",), reserved=("a",)))


def extra_objects() -> list[dict[str, Any]]:
    a = pod("a", container("main", "c"), claims={"c": "cores"}, nodeName="node-1")
    b = pod("b", container("x", "c"), container("y", "c"), claims={"c": "cores"}, nodeName="node-1")
    b["spec"]["containers"][0]["resources"]["limits"] = {"memory": "1Gi"}  # so limits.memory is charged
    waiting = pod("waiting", container("main", "g"), templates={"g": "gpu-one"})
    done = pod("done", container("main"), nodeName="node-2")
    objects: list[dict[str, Any]] = [_class(c) for c in ("cpu", "gpu", "mem", "nic")]
    for node in ("node-1", "node-2"):
        objects += _node_objects(node)
    resources = {"cpu": "16", "memory": "64Gi", "pods": "110", "hugepages-2Mi": "4Gi"}
    for obj in objects:
        if obj["kind"] == "Node":
            obj["status"] = {"capacity": resources, "allocatable": resources}
    objects += [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}},
        quota("team-a-quota", {"requests.memory": "10Gi", "limits.memory": "1Gi"}, {"requests.memory": "0"}),
        claim("cores", request("gpu", "gpu"), devices=("gpu/gpu-0",), reserved=("a",)),
        stored(a),
        stored(b),
        stored(waiting, phase="Pending"),
        stored(done, phase="Succeeded"),
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "training"},
            "value": 1000,
        },
    ]
    return list(other_driver(objects))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("cluster")
    clustergen.write(str(directory), SIZES)
    (directory / "extra.json").write_text(json.dumps({"kind": "List", "items": extra_objects()}))
    return directory


@pytest.fixture(scope="module")
def compact_snapshot(cluster: Path) -> Snapshot:
    """As serve --state reads it, every file streamed."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(manifests, "STREAM_BYTES", 1 << 10)
        return FileState.load([str(cluster)], NOW).snapshot


@pytest.fixture(scope="module")
def whole_snapshot(cluster: Path) -> Snapshot:
    """The same files read whole into models, defaulted as the API server stores them."""
    objects = []
    for path in sorted(cluster.glob("*.json")):
        for item in json.loads(path.read_text())["items"]:
            objects.append(apply_defaults(decode(item), NOW))
    return Snapshot.build(objects)


def test_the_two_reads_hold_the_same_cluster(compact_snapshot: Snapshot, whole_snapshot: Snapshot) -> None:
    """What the paths hold differs where it should (pods left out, records instead of models), not
    in what decisions read."""
    assert sorted(compact_snapshot.nodes) == sorted(whole_snapshot.nodes)
    assert len(compact_snapshot.nodes) == SIZES.nodes + 2
    assert len(compact_snapshot.claims) == len(whole_snapshot.claims) == SIZES.claims + 1
    assert dict(compact_snapshot.devices).keys() == dict(whole_snapshot.devices).keys()
    kept = {key for key, info in whole_snapshot.pods.items() if info.bound or info.shape.spec.resource_claims}
    assert set(compact_snapshot.pods) == kept and len(kept) == SIZES.pods + 3
    for key in kept:
        got, want = compact_snapshot.pods[key], whole_snapshot.pods[key]
        assert (got.node_name, got.labels, got.requests, got.priority) == (
            want.node_name,
            want.labels,
            want.requests,
            want.priority,
        )


# --- the rules -----------------------------------------------------------------------------------


def admission_review(obj: dict[str, Any], resource: str, operation: str = "CREATE", **more: Any) -> bytes:
    group, _, version = obj["apiVersion"].rpartition("/")
    body = {
        "uid": f"review-{obj['metadata']['name']}",
        "kind": {"group": group, "version": version, "kind": obj["kind"]},
        "resource": {"group": group, "version": version, "resource": resource},
        "namespace": obj["metadata"].get("namespace", ""),
        "name": obj["metadata"]["name"],
        "operation": operation,
        "userInfo": {"username": "system:serviceaccount:kube-system:resourceclaim-controller"},
        "object": obj,
        **more,
    }
    return json.dumps(
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": body}
    ).encode()


def trainer(name: str, **spec: Any) -> dict[str, Any]:
    """A pod of the generated cluster's first namespace, asking for a GPU through its app's template."""
    resources = {"requests": {"cpu": "1", "memory": "1Gi"}, "claims": [{"name": "gpu"}]}
    containers = [{"name": "trainer", "image": "registry.example.com/trainer:v1", "resources": resources}]
    claims = [{"name": "gpu", "resourceClaimTemplateName": "trainer-gpu"}]
    metadata = {"name": name, "namespace": NS, "labels": {"app": "trainer"}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
            "spec": {"containers": containers, "resourceClaims": claims, **spec}}  # fmt: skip


def template_claim(name: str, *expressions: str) -> dict[str, Any]:
    spec = copy.deepcopy(clustergen.CLAIM_SPEC)
    if expressions:
        spec["devices"]["requests"][0]["exactly"]["selectors"] = [
            {"cel": {"expression": e}} for e in expressions
        ]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": name,
            "namespace": NS,
            "annotations": {"resource.kubernetes.io/pod-claim-name": "gpu"},
        },
        "spec": spec,
    }


def existing_claim(snapshot: Snapshot) -> tuple[str, str]:
    """A claim of the first namespace allocated on some node, and another node."""
    found = next(c for c in snapshot.claims.namespace(NS).values() if c.status and c.status.allocation)
    assert found.status is not None and found.status.allocation is not None
    results = found.status.allocation.devices.results if found.status.allocation.devices else []
    pool = results[0].pool if results else ""
    return found.name, next(n for n in sorted(snapshot.nodes) if n != pool and n.startswith("gpu-node"))


def reviews(snapshot: Snapshot) -> dict[str, bytes]:
    claim_name, other_node = existing_claim(snapshot)
    reserved = copy.deepcopy(CORES)
    reserved["status"]["reservedFor"].append(consumer("b"))
    attribute = f"device.attributes['{clustergen.DRIVER}']"
    return {
        "pod from a template": admission_review(trainer("trainer-new-0"), "pods"),
        "pod with a priority class": admission_review(
            trainer("trainer-new-1", priorityClassName="training"), "pods"
        ),
        "pod placed where its claim is not": admission_review(
            trainer(
                "trainer-pinned",
                nodeName=other_node,
                resourceClaims=[{"name": "gpu", "resourceClaimName": claim_name}],
            ),
            "pods",
        ),
        "claim from a template": admission_review(
            template_claim("trainer-new-0-gpu-abcde"), "resourceclaims"
        ),
        "claim with surprising selectors": admission_review(
            template_claim(
                "odd-selectors",
                f"{attribute}.productName.startsWith('B200')",
                f"{attribute}.prodcutName == 'A100-SXM4-80GB'",
                f"{attribute}.index > 3 && {attribute}.memoryGB > 10",
            ),
            "resourceclaims",
        ),
        "claim reserved for a second pod": admission_review(
            reserved, "resourceclaims", operation="UPDATE", subResource="status", oldObject=CORES
        ),
    }


def answers(snapshot: Snapshot, bodies: dict[str, bytes]) -> dict[str, dict[str, Any]]:
    """The AdmissionReview each review gets from every rule, rules fresh for the snapshot."""
    fresh = [type(rule)() for rule in RULES]
    rules = split_rules(fresh)
    ctx = engine.Context(snapshot, Config(), NOW)
    found = {}
    for name, body in bodies.items():
        request = review.to_request(review.parse(body))
        decisions = [engine.decide(request, rules[path], ctx) for path in ("validate", "mutate")]
        found[name] = {
            path: review.answer(request.uid, d)
            for path, d in zip(("validate", "mutate"), decisions, strict=True)
        }
    return found


def test_the_rules_answer_alike(compact_snapshot: Snapshot, whole_snapshot: Snapshot) -> None:
    bodies = reviews(whole_snapshot)
    got, want = answers(compact_snapshot, bodies), answers(whole_snapshot, bodies)
    for name in bodies:
        assert got[name] == want[name], name
    # The reviews reach the rules they are about.
    said = json.dumps(want)
    assert "matches none" in said and "prodcutName" in said and "fails on" in said
    assert "exceeded quota" in said  # the second pod's containers' overhead does not fit
    assert want["pod placed where its claim is not"]["validate"]["response"]["allowed"] is False


# --- the dry run ---------------------------------------------------------------------------------


def dry_run_answers(snapshot: Snapshot) -> dict[str, Any]:
    prepared = Prepared.of(snapshot, FeatureGates())
    limits = Limits()
    found: dict[str, Any] = {}
    for name, body in {
        "top 20": {"pod": trainer("trainer-ask")},
        "every node": {"pod": trainer("trainer-ask"), "limit": len(snapshot.nodes)},
        "a class's priority": {"pod": trainer("trainer-ask", priorityClassName="training"), "limit": 5},
        "two GPU-memory pods on KEP-5517 nodes": {
            "pod": {
                **pod("c", container("x", "g"), container("y", "g"), templates={"g": "gpu-one"}),
                "metadata": {"name": "c", "namespace": "team-a"},
            },
            "claimTemplates": [
                {
                    "apiVersion": "resource.k8s.io/v1",
                    "kind": "ResourceClaimTemplate",
                    "metadata": {"name": "gpu-one", "namespace": "team-a"},
                    "spec": {"spec": {"devices": {"requests": [request("gpu", "gpu")]}}},
                }
            ],
        },
    }.items():
        question = parse_request(body, limits, NOW)
        answer = answer_request(question, prepared, budget=SearchBudget(), pace=Unpaced())
        found[name] = answer.model_dump(mode="json", by_alias=True)
    # draguard allocate's sequence: each pod that fits is placed before the next is asked.
    pods = [Question(parse_request({"pod": trainer(f"trainer-seq-{i}")}, limits, NOW).pod) for i in range(3)]
    placed = DryRun(prepared).answer_all(pods, None, sequence=True)
    found["placed in sequence"] = [a.model_dump(mode="json", by_alias=True) for a in placed]
    return found


def test_the_dry_run_answers_alike(compact_snapshot: Snapshot, whole_snapshot: Snapshot) -> None:
    got, want = dry_run_answers(compact_snapshot), dry_run_answers(whole_snapshot)
    for name in want:
        assert got[name] == want[name], name
    assert want["top 20"]["fits"] and want["every node"]["fits"]
    assert len(want["every node"]["nodes"]) == SIZES.nodes + 2
    assert [a["placedOn"] for a in want["placed in sequence"]] != [None] * 3
