"""``draguard allocate --kubeconfig`` against the session's real control plane: three GPU nodes, two
of whose GPUs hold pods the real kube-scheduler placed; the answer for a new pod (read from a file,
the cluster listed from the API server) is compared with what kube-scheduler does when the same pod
is then created: the node it binds, or the message it writes into PodScheduled."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from controlplane import ControlPlane
from deploy import apply, remove
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


def allocate(plane: ControlPlane, tmp_path: Path, *documents: dict[str, Any]) -> dict[str, Any]:
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(yaml.safe_dump_all(documents))
    draguard = str(Path(sys.executable).parent / "draguard")
    done = subprocess.run(
        [
            draguard,
            "allocate",
            "-f",
            str(manifest),
            f"--kubeconfig={plane.admin_kubeconfig}",
            "-n",
            NS,
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
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
