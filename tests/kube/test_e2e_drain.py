"""The drain rule through the real API server: ``kubectl drain``'s policy/v1 Eviction of a DRA
driver's kubelet-plugin pod is refused while a workload pod on its node still holds a claim the
scheduler allocated there, and allowed once that pod is gone. The refusal is a 429, as a
PodDisruptionBudget's is, so a drain evicting every pod at once waits for the driver pod instead of
failing: the order the rule asks for comes about by itself.

Pods are bound to a node without a kubelet: they never run, and with
``terminationGracePeriodSeconds: 0`` an allowed eviction deletes them at once, as a kubelet would
confirm after they stopped.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from controlplane import ControlPlane, call, wait_for
from deploy import Draguard, apply, installed
from kubernetes import client
from workloads import (
    bound_node,
    claims,
    create,
    dry_run_until,
    eviction,
    pod,
    pod_claim,
    pods,
    reserved_for,
    template,
    templates,
)

MANIFESTS = Path(__file__).parent / "manifests"
NODE, QUIET_NODE = "drain-node-1", "drain-node-2"
PLUGIN_LABELS = {"app.kubernetes.io/name": "nic-kubelet-plugin"}
VALUES = {"rules": {"drain": {"mode": "enforce", "driverPodSelector": {"matchLabels": PLUGIN_LABELS}}}}


@pytest.fixture(scope="module")
def draguard(control_plane: ControlPlane) -> Iterator[Draguard]:
    for node in (NODE, QUIET_NODE):
        control_plane.add_node(node)
    apply(control_plane.client(), (MANIFESTS / "nic-driver.yaml").read_text())
    control_plane.start_scheduler()
    # The resourceclaim controller: claims from templates, and their removal with the pod.
    control_plane.start_controller_manager()
    with installed(control_plane, VALUES) as deployment:
        yield deployment


def evict(namespace: str, name: str) -> tuple[str, dict[str, object]]:
    return f"{pods(namespace)}/{name}/eviction", eviction(namespace, name)


def test_driver_pod_stays_while_its_node_has_claims_in_use(
    draguard: Draguard, control_plane: ControlPlane, kube_namespace: str
) -> None:
    api = control_plane.client()
    create(api, templates(kube_namespace), template("rdma", "nic.example.com"))
    create(api, pods(kube_namespace), pod("train", templates=["rdma"]))
    assert bound_node(api, kube_namespace, "train") == NODE
    held = pod_claim(api, kube_namespace, "train", "rdma")
    assert reserved_for(api, kube_namespace, held) == ["train"]
    create(api, pods(kube_namespace), pod("nic-plugin-a", node_name=NODE, labels=PLUGIN_LABELS))

    path, body = evict(kube_namespace, "nic-plugin-a")
    # draguard's snapshot follows the API server: wait until it has the plugin pod and the claim.
    dry_run_until(api, "POST", path, body, 429)
    refused = call(api, "POST", path, body)
    assert (refused.status, refused.body["reason"]) == (429, "TooManyRequests"), refused.body
    assert refused.message == (
        'admission webhook "drain.draguard.io" denied the request: '
        f"DRA driver pod {kube_namespace}/nic-plugin-a on node {NODE} must not be evicted yet: "
        f"claims {kube_namespace}/{held} are still reserved by workload pods, and the driver must stay "
        "to unprepare their devices; drain the workload pods first, then evict the driver pod"
    )
    assert call(api, "GET", f"{pods(kube_namespace)}/nic-plugin-a").status == 200

    # kubectl drain evicts every pod of the node: the workload goes, its claim with it, and the
    # driver pod's eviction, retried, goes through once draguard has seen that.
    attempts = drain(api, kube_namespace, ["nic-plugin-a", "train"])
    assert attempts[:2] == [("nic-plugin-a", 429), ("train", 201)], attempts
    assert attempts[-1] == ("nic-plugin-a", 201), attempts
    # The resourceclaim controller deletes the pod's claim after the pod, in its own time.
    claim_path = f"{claims(kube_namespace)}/{held}"
    wait_for("the workload's claim to be deleted", lambda: call(api, "GET", claim_path).status == 404)
    assert call(api, "GET", f"{pods(kube_namespace)}/nic-plugin-a").status == 404


def drain(
    api: client.ApiClient, namespace: str, names: list[str], timeout: float = 30
) -> list[tuple[str, int]]:
    """Evict the pods as ``kubectl drain`` does (upstream staging/src/k8s.io/kubectl/pkg/drain/drain.go,
    evictPods): 429 Too Many Requests is "try again later" (after 5 s there, 0.5 s here), 404 is
    gone, and any other refusal makes the drain give up. The (pod, status) of every attempt."""
    attempts: list[tuple[str, int]] = []
    remaining = list(names)
    deadline = time.monotonic() + timeout
    while remaining:
        for name in list(remaining):
            path, body = evict(namespace, name)
            answer = call(api, "POST", path, body)
            attempts.append((name, answer.status))
            if answer.status in (201, 404):
                remaining.remove(name)
            elif answer.status != 429:
                raise AssertionError(f"the drain gives up on {name}: {answer.status} {answer.message}")
        assert time.monotonic() < deadline, f"the drain did not finish: {attempts}"
        time.sleep(0.5 if remaining else 0)
    return attempts


def test_driver_pod_on_a_node_without_claims_in_use_is_evicted(
    draguard: Draguard, control_plane: ControlPlane, kube_namespace: str
) -> None:
    api = control_plane.client()
    create(api, pods(kube_namespace), pod("nic-plugin-b", node_name=QUIET_NODE, labels=PLUGIN_LABELS))
    path, body = evict(kube_namespace, "nic-plugin-b")
    answer = call(api, "POST", path, body)
    assert answer.status == 201, answer.body
