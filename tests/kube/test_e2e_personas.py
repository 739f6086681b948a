"""The personas rule in enforce mode through the real API server and its authorizers.

RBAC cannot say "this driver's slices only": a driver's kubelet plugin may write every
ResourceSlice, and the Node authorizer with NodeRestriction lets a kubelet write any slice of its
own node, whatever the driver. draguard narrows both; these tests show what the API server itself
already refuses (draguard is never asked) and what only draguard refuses.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from controlplane import ControlPlane, call, wait_for
from deploy import Draguard, apply, installed
from kubernetes import client
from workloads import RESOURCE, device_class, dry_run_until, resource_slice, slices

MANIFESTS = Path(__file__).parent / "manifests"
DPU = "dpu.example.com"  # its kubelet plugin runs as a ServiceAccount; kubelets may publish for it
FPGA = "fpga.example.com"  # published by a user identity only
NODE, OTHER_NODE = "persona-node-1", "persona-node-2"
PLUGIN = "system:serviceaccount:dpu-driver:kubelet-plugin"
ADMIN_ACCESS = "resource.kubernetes.io/admin-access"
CLASSES = f"{RESOURCE}/deviceclasses"
SLICE_WRITER = [
    {
        "apiGroups": ["resource.k8s.io"],
        "resources": ["resourceslices"],
        "verbs": ["get", "list", "create", "update", "patch", "delete"],
    }
]
VALUES = {
    "rules": {
        "personas": {
            "mode": "enforce",
            "drivers": [
                {"driver": DPU, "serviceAccounts": ["dpu-driver:kubelet-plugin"], "nodes": True},
                {"driver": FPGA, "users": ["fpga-driver"]},
            ],
        }
    }
}


@pytest.fixture(scope="module")
def draguard(control_plane: ControlPlane) -> Iterator[Draguard]:
    for node in (NODE, OTHER_NODE):
        control_plane.add_node(node)
    apply(control_plane.client(), (MANIFESTS / "dpu-driver.yaml").read_text())
    control_plane.grant(None, "fpga-driver", SLICE_WRITER)
    class_writer = [
        {"apiGroups": ["resource.k8s.io"], "resources": ["deviceclasses"], "verbs": ["create", "patch"]}
    ]
    control_plane.grant(None, "alice", class_writer)
    control_plane.grant(None, "carol", class_writer)
    control_plane.grant(
        None, "bob", [{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["create", "patch"]}]
    )
    with installed(control_plane, VALUES) as deployment:
        yield deployment


@pytest.fixture
def plugin(control_plane: ControlPlane) -> client.ApiClient:
    """The DPU driver's kubelet plugin, with its ServiceAccount's token."""
    return control_plane.token_client(control_plane.service_account_token("dpu-driver", "kubelet-plugin"))


@pytest.fixture
def kubelet(control_plane: ControlPlane) -> client.ApiClient:
    """The kubelet of NODE: what the Node authorizer and NodeRestriction recognise."""
    return control_plane.client(f"system:node:{NODE}", ["system:nodes"])


@pytest.fixture
def cleanup(control_plane: ControlPlane) -> Iterator[list[str]]:
    """Paths of cluster-scoped objects a test made, deleted afterwards by the admin."""
    made: list[str] = []
    yield made
    for path in made:
        call(control_plane.client(), "DELETE", path)


def fpga_class(name: str) -> dict[str, Any]:
    """A DeviceClass of the FPGA driver's devices, under another name."""
    return {**device_class(FPGA), "metadata": {"name": name}}


def denied(answer: Any, webhook: str = "personas.draguard.io") -> str:
    """The text after the API server's prefix of a webhook refusal (the test fails otherwise)."""
    prefix = f'admission webhook "{webhook}" denied the request: '
    assert answer.status == 403, answer.body
    assert answer.message.startswith(prefix), answer.message
    return str(answer.message.removeprefix(prefix))


def test_non_admin_device_class_write_is_refused(
    draguard: Draguard, control_plane: ControlPlane, cleanup: list[str]
) -> None:
    """alice has RBAC to create DeviceClasses; draguard keeps them to the admins."""
    alice = control_plane.client("alice", ["dev"])
    refused = call(alice, "POST", CLASSES, fpga_class("alice-fpga"))
    assert (
        denied(refused)
        == "user alice may not create DeviceClass alice-fpga: only admins (groups system:masters) may"
    )
    cleanup.append(f"{CLASSES}/admin-fpga")
    made = call(control_plane.client(), "POST", CLASSES, fpga_class("admin-fpga"))
    assert made.status == 201, made.body
    relabel = {"metadata": {"labels": {"team": "alice"}}}
    refused = call(alice, "PATCH", f"{CLASSES}/admin-fpga", relabel)
    assert "user alice may not update DeviceClass admin-fpga" in denied(refused)


def test_impersonated_user_is_the_one_judged(draguard: Draguard, control_plane: ControlPlane) -> None:
    """``kubectl --as carol --as-group dev`` by an admin: the API server authorizes carol and sends
    draguard carol, not the admin who asked."""
    admin_as_carol = control_plane.client()
    admin_as_carol.set_default_header("Impersonate-User", "carol")
    admin_as_carol.set_default_header("Impersonate-Group", "dev")
    refused = call(admin_as_carol, "POST", CLASSES, fpga_class("carol-fpga"))
    assert (
        denied(refused)
        == "user carol may not create DeviceClass carol-fpga: only admins (groups system:masters) may"
    )


def test_driver_writes_its_own_slices_but_not_another_drivers(
    draguard: Draguard, control_plane: ControlPlane, plugin: client.ApiClient, cleanup: list[str]
) -> None:
    own, foreign = resource_slice(DPU, NODE), resource_slice(FPGA, NODE)
    cleanup += [f"{slices()}/{own['metadata']['name']}", f"{slices()}/{foreign['metadata']['name']}"]
    assert call(plugin, "POST", slices(), own).status == 201
    republished = call(
        plugin, "PATCH", f"{slices()}/{own['metadata']['name']}", {"spec": {"pool": {"generation": 2}}}
    )
    assert republished.status == 200, republished.body

    refused = call(plugin, "POST", slices(), foreign)
    name = foreign["metadata"]["name"]
    assert denied(refused) == (
        f"user {PLUGIN} may not create ResourceSlice {name} (driver {FPGA}, node {NODE}): "
        f"slices of driver {FPGA} may be written by admins (groups system:masters), "
        "the driver's identities (fpga-driver)"
    )
    # The FPGA driver's own identity publishes it; the DPU plugin may not delete it (DELETE: the
    # API server sends the old object).
    fpga = control_plane.client("fpga-driver")
    assert call(fpga, "POST", slices(), foreign).status == 201
    refused = call(plugin, "DELETE", f"{slices()}/{foreign['metadata']['name']}")
    assert f"user {PLUGIN} may not delete ResourceSlice {foreign['metadata']['name']}" in denied(refused)
    assert call(fpga, "DELETE", f"{slices()}/{foreign['metadata']['name']}").status == 200


def test_kubelet_writes_only_what_both_the_node_authorizer_and_draguard_allow(
    draguard: Draguard, control_plane: ControlPlane, kubelet: client.ApiClient, cleanup: list[str]
) -> None:
    own_dpu, own_fpga, other = (
        resource_slice(DPU, NODE),
        resource_slice(FPGA, NODE),
        resource_slice(DPU, OTHER_NODE),
    )
    for s in (own_dpu, own_fpga, other):
        cleanup.append(f"{slices()}/{s['metadata']['name']}")

    # Its own node, a driver that lets kubelets publish (nodes: true): both allow, and once it
    # exists the Node authorizer lets the kubelet update it (the slice is an edge to its node).
    assert call(kubelet, "POST", slices(), own_dpu).status == 201
    path = f"{slices()}/{own_dpu['metadata']['name']}"
    # The Node authorizer learns of the new slice from its informers, a moment after it is created.
    republish = {"spec": {"pool": {"generation": 2}}}
    dry_run_until(kubelet, "PATCH", path, republish, 200)
    assert call(kubelet, "PATCH", path, republish).status == 200

    # Another node's slice: NodeRestriction refuses before any webhook is called.
    refused = call(kubelet, "POST", slices(), other)
    assert refused.status == 403, refused.body
    assert "can only create ResourceSlice with the same NodeName as the requesting node" in refused.message
    assert "draguard" not in refused.message
    # ... and updating one that exists is not even authorized (the Node authorizer has no edge).
    assert call(control_plane.client(), "POST", slices(), other).status == 201
    refused = call(
        kubelet, "PATCH", f"{slices()}/{other['metadata']['name']}", {"metadata": {"labels": {"x": "y"}}}
    )
    assert refused.status == 403, refused.body
    assert f'User "system:node:{NODE}" cannot patch resource "resourceslices"' in refused.message

    # Its own node, but a driver that does not let kubelets publish: only draguard refuses.
    refused = call(kubelet, "POST", slices(), own_fpga)
    assert denied(refused).startswith(f"user system:node:{NODE} may not create ResourceSlice")
    # Deleting any slice of its own node is allowed (the kubelet wipes them when a driver goes away).
    assert call(control_plane.client("fpga-driver"), "POST", slices(), own_fpga).status == 201
    path = f"{slices()}/{own_fpga['metadata']['name']}"
    dry_run_until(kubelet, "DELETE", path, None, 200)
    assert call(kubelet, "DELETE", path).status == 200


def test_kubelet_wipes_its_nodes_slices_and_the_garbage_collector_those_of_a_deleted_node(
    draguard: Draguard, control_plane: ControlPlane, kubelet: client.ApiClient, cleanup: list[str]
) -> None:
    """The two deleters of other drivers' slices that draguard must let through: the kubelet wiping
    its node's slices (a DeleteCollection by node, as upstream's kubelet does when it starts), and
    the garbage collector removing the slices of a Node that is gone (they are owned by it)."""
    admin = control_plane.client()
    own = [resource_slice(DPU, NODE), resource_slice(FPGA, NODE)]
    kept = resource_slice(FPGA, OTHER_NODE)
    for s in (*own, kept):
        cleanup.append(f"{slices()}/{s['metadata']['name']}")
        assert call(admin, "POST", slices(), s).status == 201
    wiped = call(kubelet, "DELETE", slices(), query={"fieldSelector": f"spec.nodeName={NODE}"})
    assert wiped.status == 200, wiped.body
    left = [s["metadata"]["name"] for s in call(admin, "GET", slices()).body["items"]]
    assert [s for s in left if s.startswith("persona-node-")] == [kept["metadata"]["name"]]

    control_plane.start_controller_manager()
    node = control_plane.add_node("persona-node-gone")
    owned = resource_slice(FPGA, "persona-node-gone")
    owned["metadata"]["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "Node", "name": "persona-node-gone", "uid": node["metadata"]["uid"]}
    ]
    path = f"{slices()}/{owned['metadata']['name']}"
    cleanup.append(path)
    assert call(admin, "POST", slices(), owned).status == 201
    assert call(admin, "DELETE", "/api/v1/nodes/persona-node-gone").status == 200
    wait_for(
        "the garbage collector to delete the gone node's slice",
        lambda: call(admin, "GET", path).status == 404,
    )


def namespace(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def test_admin_access_label_is_set_and_removed_by_admins_only(
    draguard: Draguard, control_plane: ControlPlane, cleanup: list[str]
) -> None:
    bob, admin = control_plane.client("bob", ["dev"]), control_plane.client()
    name = f"t-admin-{secrets.token_hex(3)}"
    path = f"/api/v1/namespaces/{name}"
    cleanup.append(path)

    refused = call(bob, "POST", "/api/v1/namespaces", namespace(name, {ADMIN_ACCESS: "true"}))
    assert denied(refused, "namespaces.personas.draguard.io") == (
        f"user bob may not create Namespace {name} with a changed {ADMIN_ACCESS} label: only admins "
        "(groups system:masters) may change it, because admin access to devices bypasses device isolation "
        "(claims in that namespace can use devices allocated to others)"
    )
    assert call(bob, "POST", "/api/v1/namespaces", namespace(name, {"team": "bob"})).status == 201
    # The opt-out label does not opt a Namespace out of its own check.
    sneaky = {"metadata": {"labels": {ADMIN_ACCESS: "true", "draguard.io/ignore": "true"}}}
    assert f"user bob may not update Namespace {name}" in denied(
        call(bob, "PATCH", path, sneaky), "namespaces.personas.draguard.io"
    )
    assert call(admin, "PATCH", path, {"metadata": {"labels": {ADMIN_ACCESS: "true"}}}).status == 200
    # Other labels of a labelled namespace stay bob's to change; the admin-access one does not.
    assert call(bob, "PATCH", path, {"metadata": {"labels": {"team": "bobs"}}}).status == 200
    removed = call(bob, "PATCH", path, {"metadata": {"labels": {ADMIN_ACCESS: None}}})
    assert f"user bob may not update Namespace {name}" in denied(removed, "namespaces.personas.draguard.io")
