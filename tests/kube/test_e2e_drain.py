"""The drain rule through the real API server: ``kubectl drain``'s policy/v1 Eviction of a DRA
driver's kubelet-plugin pod is refused while a workload pod on its node still holds a claim the
scheduler allocated there, and allowed once that pod is gone.

Pods are bound to a node without a kubelet: they never run, and with
``terminationGracePeriodSeconds: 0`` an allowed eviction deletes them at once, as a kubelet would
confirm after they stopped.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from controlplane import ControlPlane, call, wait_for
from deploy import Draguard, apply, installed
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
    dry_run_until(api, "POST", path, body, 403)
    refused = call(api, "POST", path, body)
    assert refused.status == 403, refused.body
    assert refused.message == (
        'admission webhook "drain.draguard.io" denied the request: '
        f"DRA driver pod {kube_namespace}/nic-plugin-a on node {NODE} must not be evicted yet: "
        f"claims {kube_namespace}/{held} are still reserved by workload pods, and the driver must stay "
        "to unprepare their devices; drain the workload pods first, then evict the driver pod"
    )
    assert call(api, "GET", f"{pods(kube_namespace)}/nic-plugin-a").status == 200

    # kubectl drain evicts the workload (not a driver pod: allowed), its claim goes with it ...
    workload_path, workload_body = evict(kube_namespace, "train")
    assert call(api, "POST", workload_path, workload_body).status == 201
    wait_for(
        "the workload's claim to go",
        lambda: call(api, "GET", f"{claims(kube_namespace)}/{held}").status == 404,
    )
    # ... and then the driver pod may go too.
    dry_run_until(api, "POST", path, body, 201)
    assert call(api, "POST", path, body).status == 201
    assert call(api, "GET", f"{pods(kube_namespace)}/nic-plugin-a").status == 404


def test_driver_pod_on_a_node_without_claims_in_use_is_evicted(
    draguard: Draguard, control_plane: ControlPlane, kube_namespace: str
) -> None:
    api = control_plane.client()
    create(api, pods(kube_namespace), pod("nic-plugin-b", node_name=QUIET_NODE, labels=PLUGIN_LABELS))
    path, body = evict(kube_namespace, "nic-plugin-b")
    answer = call(api, "POST", path, body)
    assert answer.status == 201, answer.body
