"""``draguard allocate --kubeconfig`` against the session's real control plane: three GPU nodes, two
of whose GPUs hold pods the real kube-scheduler placed; the answer for a new pod (read from a file,
the cluster listed from the API server) is compared with what kube-scheduler does when the same pod
is then created: the node it binds, or the message it writes into PodScheduled."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from controlplane import ControlPlane, call, wait_for
from deploy import apply, remove
from inprocess import draguard
from kubernetes import client
from workloads import (
    bound_node,
    claim,
    claims,
    create,
    device_class,
    not_scheduled,
    pod,
    pods,
    resource_slice,
)

from webhook.cluster import READER_LABEL
from webhook.state import RESOURCES

NS = "e2e-allocate"
DRIVER = "allocate.example.com"
NODES = ("allocate-node-0", "allocate-node-1", "allocate-node-2")
POOL = {"e2e.draguard.io/pool": "allocate"}


def placed(name: str, claim_name: str) -> dict[str, Any]:
    return {**pod(name, claims=[claim_name], node_selector=POOL), "metadata": {"name": name, "namespace": NS}}


@pytest.fixture(scope="module")
def cluster(control_plane: ControlPlane) -> Iterator[ControlPlane]:
    """Three nodes with one GPU each, two pods holding one GPU each, placed by kube-scheduler."""
    admin = control_plane.client()
    core = client.CoreV1Api(admin)
    for node in NODES:
        control_plane.add_node(node, labels=POOL)
    objects = [device_class(DRIVER), *(resource_slice(DRIVER, node) for node in NODES)]
    apply(admin, objects)
    control_plane.start_scheduler()
    with control_plane.namespace(NS):
        for i in range(2):
            create(admin, claims(NS), claim(f"gpu-{i}", DRIVER))
            create(admin, pods(NS), placed(f"holder-{i}", f"gpu-{i}"))
        for i in range(2):
            bound_node(admin, NS, f"holder-{i}")
        try:
            yield control_plane
        finally:
            for i in range(2):
                core.delete_namespaced_pod(f"holder-{i}", NS, grace_period_seconds=0)
            nodes = [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": n}} for n in NODES]
            remove(admin, [*objects, *nodes])


def run_allocate(
    tmp_path: Path, kubeconfig: Path, *documents: dict[str, Any]
) -> subprocess.CompletedProcess[str]:
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(yaml.safe_dump_all(documents))
    return draguard("allocate", "-f", str(manifest), f"--kubeconfig={kubeconfig}", "-n", NS, "-o", "json")


def allocate(plane: ControlPlane, tmp_path: Path, *documents: dict[str, Any]) -> dict[str, Any]:
    done = run_allocate(tmp_path, plane.admin_kubeconfig, *documents)
    assert done.returncode in (0, 1), done.stderr
    assert "note: read from context test" in done.stderr, done.stderr
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


def question(name: str, claim_name: str, count: int = 1) -> list[dict[str, Any]]:
    wanted = claim(claim_name, DRIVER)
    wanted["spec"]["devices"]["requests"][0]["exactly"]["count"] = count
    new = pod(name, claims=[claim_name], node_selector=POOL)
    return [wanted, new]


def test_a_new_pod_fits_where_kube_scheduler_then_binds_it(cluster: ControlPlane, tmp_path: Path) -> None:
    documents = question("newcomer", "gpu-new")
    answer = allocate(cluster, tmp_path, *documents)
    [asked] = answer["pods"]
    assert asked["pod"] == f"{NS}/newcomer" and asked["fits"], asked
    fitting = [n["node"] for n in asked["nodes"] if n["fits"]]
    api = cluster.client()
    taken = {bound_node(api, NS, f"holder-{i}") for i in range(2)}
    assert fitting == [n for n in NODES if n not in taken], asked
    # the files' pods are the questions, the cluster's holders are load: created, kube-scheduler agrees
    for document in documents:
        path = claims(NS) if document["kind"] == "ResourceClaim" else pods(NS)
        create(api, path, document)
    try:
        assert bound_node(api, NS, "newcomer") == fitting[0]
    finally:
        client.CoreV1Api(api).delete_namespaced_pod("newcomer", NS, grace_period_seconds=0)


def test_a_pod_that_fits_nowhere_gets_kube_schedulers_message(cluster: ControlPlane, tmp_path: Path) -> None:
    documents = question("greedy", "two-gpus", count=2)
    answer = allocate(cluster, tmp_path, *documents)
    [asked] = answer["pods"]
    assert not asked["fits"] and asked["reason"] == "Unschedulable", asked
    api = cluster.client()
    create(api, claims(NS), documents[0])
    create(api, pods(NS), documents[1])
    try:
        scheduled = not_scheduled(api, NS, "greedy")
    finally:
        client.CoreV1Api(api).delete_namespaced_pod("greedy", NS, grace_period_seconds=0)
    assert scheduled["reason"] == asked["reason"]
    assert scheduled["message"] == asked["message"], (scheduled["message"], asked["message"])
    assert "cannot allocate all claims" in asked["message"], asked["message"]


def test_without_a_pending_pod_only_the_files_claims_are_asked(cluster: ControlPlane, tmp_path: Path) -> None:
    """The cluster's own unallocated claim and pending pod are load, never questions: with no pending
    pod in the files, the question is the files' unallocated claims; the answer's sources say what
    came from the cluster and which file objects replace its own."""
    api = cluster.client()
    create(api, claims(NS), claim("idle", DRIVER))  # used by no pod: nothing allocates it
    create(api, pods(NS), {**pod("stuck", claims=["idle"], gated=True), "metadata": {"name": "stuck"}})
    try:
        mine = claim("mine", DRIVER)
        answer = allocate(cluster, tmp_path, device_class(DRIVER), mine)
        [asked] = answer["pods"]
        assert asked["claims"] == [f"{NS}/mine"], asked  # not the cluster's idle claim
        sources = answer["sources"]
        assert sources["cluster"]["context"] == "test" and sources["cluster"]["server"] == cluster.url
        assert sources["cluster"]["objects"]["resourceclaims"] >= 3, sources  # gpu-0, gpu-1, idle
        files = [(f["kind"], f["name"], f["replaces"]) for f in sources["files"]]
        assert files == [("DeviceClass", DRIVER, True), ("ResourceClaim", f"{NS}/mine", False)]
        # nothing of the files to ask: an error, although the cluster holds a pending pod and a claim
        done = run_allocate(tmp_path, cluster.admin_kubeconfig, device_class(DRIVER))
        assert done.returncode == 2, done.stdout
        assert "nothing to ask: the files have (the cluster's own are not asked)" in done.stderr, done.stderr
    finally:
        client.CoreV1Api(api).delete_namespaced_pod("stuck", NS, grace_period_seconds=0)
        client.ResourceV1Api(api).delete_namespaced_resource_claim("idle", NS)


def test_a_forbidden_list_is_one_line_naming_the_resource_and_verb(
    cluster: ControlPlane, tmp_path: Path
) -> None:
    """Credentials granted every read but that of pods: allocate's list of pods is refused, in one
    line naming the verb and the resource, and how to find the chart's reader role."""
    user = "e2e-allocate-no-pods"
    readable = [r for r in RESOURCES if r.plural != "pods"]
    rules = [
        {"apiGroups": [r.api_version.rpartition("/")[0]], "resources": [r.plural], "verbs": ["get", "list"]}
        for r in readable
    ]
    group = "rbac.authorization.k8s.io"
    rbac = [
        {"apiVersion": f"{group}/v1", "kind": "ClusterRole", "metadata": {"name": user}, "rules": rules},
        {
            "apiVersion": f"{group}/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": user},
            "roleRef": {"apiGroup": group, "kind": "ClusterRole", "name": user},
            "subjects": [{"apiGroup": group, "kind": "User", "name": user}],
        },
    ]
    admin = cluster.client()
    apply(admin, rbac)
    try:
        as_user = cluster.client(user)
        wait_for("the binding to take effect", lambda: call(as_user, "GET", "/api/v1/nodes").status == 200)
        kubeconfig = cluster.kubeconfig(cert=cluster.client_certificate(user), name=user)
        done = run_allocate(tmp_path, kubeconfig, *question("refused", "gpu-refused"))
    finally:
        remove(admin, rbac)
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "cannot list pods: forbidden" in lines[0], lines[0]
    assert f"kubectl get clusterroles -l {READER_LABEL}" in lines[0], lines[0]
    assert "Traceback" not in done.stderr and done.stdout == ""


def test_a_claim_the_cluster_holds_keeps_its_allocation_when_the_files_name_it(
    cluster: ControlPlane, tmp_path: Path
) -> None:
    """kubectl apply of a claim the cluster holds keeps the stored status (the API server's update
    never writes a claim's status): holder-0's claim, as its author wrote it, still holds its GPU."""
    api = cluster.client()
    taken = {bound_node(api, NS, f"holder-{i}") for i in range(2)}
    answer = allocate(cluster, tmp_path, claim("gpu-0", DRIVER), *question("again", "gpu-again"))
    [asked] = answer["pods"]
    fitting = {n["node"] for n in asked["nodes"] if n["fits"]}
    assert not fitting & taken, asked
    assert answer["sources"]["files"][0] == {
        "source": f"{tmp_path / 'pod.yaml'}: document 1",
        "kind": "ResourceClaim",
        "name": f"{NS}/gpu-0",
        "replaces": True,
    }
