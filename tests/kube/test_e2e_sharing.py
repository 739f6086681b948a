"""The sharing rule through the real API server and the real kube-scheduler.

The scheduler reserves an allocated claim for each pod that uses it (PreBind: a
``resourceclaims/status`` update adding the pod to ``reservedFor``). For a claim whose device says
``SamePod``, draguard refuses that update for a second pod, so the scheduler cannot bind it: the
pod stays pending, and what the scheduler records on it must tell a person why. A ``MultiPod``
claim is reserved for both pods.

The policies come from the device attribute ``draguard.io/sharingPolicy`` (CPU cores) and from
``rules.sharing.policies`` (the accelerator, by the class it was requested through). The third
source, the default derived from KEP-5517's node-allocatable mappings, needs the alpha gate
DRANodeAllocatableResources, without which the API server drops the mappings: those tests run on a
second control plane with the gate (``node_allocatable_plane``, tests/conftest.py). There the real
scheduler refuses a second pod on a mapped claim itself, before any reservation; draguard
refuses it earlier still, at pod creation.

Two installs, one per class (the webhooks are cluster-wide, so one at a time).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from controlplane import ControlPlane, call
from deploy import Draguard, apply, installed
from kubernetes import client
from workloads import (
    RESOURCE,
    SCHEDULER_ERROR,
    UNSCHEDULABLE,
    allocation,
    bound_node,
    claim,
    claims,
    create,
    device_class,
    dry_run_until,
    get,
    not_scheduled,
    pod,
    pods,
    release,
    reserved_for,
    resource_slice,
    slices,
)

MANIFESTS = Path(__file__).parent / "manifests"
NODE = "share-node-1"
# First match wins: the accelerator is MultiPod when requested through its shared class, SamePod
# otherwise.
POLICIES = [
    {"deviceClassName": "accel.example.com", "policy": "MultiPod"},
    {"driver": "accel.example.com", "policy": "SamePod"},
]
VALUES = {"rules": {"sharing": {"mode": "enforce", "policies": POLICIES}}}


def same_pod_only(device: str, source: str) -> str:
    """How draguard's sharing refusals end: the device, its policy and where that comes from, the fix."""
    return (
        f"its device {device} has sharing policy SamePod ({source}), so only the containers of one pod may "
        "use it; give each pod a claim of its own (spec.resourceClaims[].resourceClaimTemplateName does)"
    )


def refused_at_creation(
    api: client.ApiClient, ns: str, claim_name: str, holder: str, device: str, source: str
) -> None:
    """A pod created once the claim is reserved for ``holder`` is refused before it exists."""
    third = pod("third", claims=[claim_name])
    dry_run_until(api, "POST", pods(ns), third, 403)
    refused = call(api, "POST", pods(ns), third)
    assert refused.message == (
        f'admission webhook "sharing.draguard.io" denied the request: pod {ns}/third cannot use claim '
        f"{ns}/{claim_name}: it is already reserved by pod {ns}/{holder}, and {same_pod_only(device, source)}"
    )


@pytest.fixture(scope="class")
def attributed(control_plane: ControlPlane) -> Iterator[Draguard]:
    """Policies from a device attribute and from the config."""
    control_plane.add_node(NODE)
    apply(control_plane.client(), (MANIFESTS / "cpuset-accel-drivers.yaml").read_text())
    control_plane.start_scheduler()
    with installed(control_plane, VALUES) as deployment:
        yield deployment


@pytest.mark.usefixtures("attributed")
class TestDevicePolicies:
    """Policies the driver or the cluster admin set: the attribute, then the config."""

    def test_scheduler_cannot_reserve_a_same_pod_claim_for_a_second_pod(
        self, control_plane: ControlPlane, kube_namespace: str
    ) -> None:
        api, ns = control_plane.client(), kube_namespace
        create(api, claims(ns), claim("cores", "cpuset.example.com"))
        # Both pods exist before the claim is allocated, so pod admission has nothing to refuse yet:
        # the only point left is the scheduler's reservation.
        for name in ("first", "second"):
            create(api, pods(ns), pod(name, claims=["cores"], gated=True))
        release(api, ns, "first")
        assert bound_node(api, ns, "first") == NODE
        assert reserved_for(api, ns, "cores") == ["first"]

        release(api, ns, "second")
        scheduled = not_scheduled(api, ns, "second")
        # What `kubectl describe pod second` shows, in the condition and in the FailedScheduling event:
        # the scheduler's own reason (its PreBind failed) with draguard's refusal after it.
        device = f"cpuset.example.com/{NODE}/cpu-0"
        told = (
            f'running PreBind plugin "DynamicResources": add reservation to claim {ns}/cores: admission '
            f'webhook "sharing.draguard.io" denied the request: claim {ns}/cores cannot be reserved for pod '
            f"{ns}/second: it would be shared by pod {ns}/first, pod {ns}/second, but "
            + same_pod_only(device, "device attribute draguard.io/sharingPolicy")
        )
        assert (scheduled["reason"], scheduled["message"]) == (SCHEDULER_ERROR, told)
        events = get(api, f"/api/v1/namespaces/{ns}/events")["items"]
        failed = [e["message"] for e in events if e["involvedObject"]["name"] == "second"]
        assert told in failed, failed
        assert "nodeName" not in get(api, f"{pods(ns)}/second")["spec"]
        assert reserved_for(api, ns, "cores") == ["first"]

        refused_at_creation(api, ns, "cores", "first", device, "device attribute draguard.io/sharingPolicy")

    def test_multi_pod_claim_is_shared(self, control_plane: ControlPlane, kube_namespace: str) -> None:
        api, ns = control_plane.client(), kube_namespace
        create(api, claims(ns), claim("accel", "accel.example.com"))
        for name in ("a", "b"):
            create(api, pods(ns), pod(name, claims=["accel"]))
        assert bound_node(api, ns, "a") == bound_node(api, ns, "b") == NODE
        assert sorted(reserved_for(api, ns, "accel")) == ["a", "b"]

    def test_the_same_device_through_the_exclusive_class_is_not_shared(
        self, control_plane: ControlPlane, kube_namespace: str
    ) -> None:
        api, ns = control_plane.client(), kube_namespace
        create(api, claims(ns), claim("accel", "accel-exclusive.example.com"))
        create(api, pods(ns), pod("first", claims=["accel"]))
        assert bound_node(api, ns, "first") == NODE
        (device,) = allocation(api, ns, "accel")
        refused_at_creation(api, ns, "accel", "first", device, "draguard config sharing.policies[1]")


CORES = "cores.example.com"
MAPPED_NODE = "share-node-2"


@pytest.fixture(scope="module")
def mapping_plane(node_allocatable_plane: ControlPlane) -> ControlPlane:
    """The session's control plane with KEP-5517's alpha gate (tests/conftest.py)."""
    return node_allocatable_plane


@pytest.fixture(scope="class")
def mapped(mapping_plane: ControlPlane) -> Iterator[Draguard]:
    """A CPU driver whose cores map one to one onto the node's ``cpu``, and the chart's defaults
    (no attribute, no config: the policy is the default derived from the mapping)."""
    api = mapping_plane.client()
    mapping_plane.add_node(MAPPED_NODE, allocatable={"cpu": "4"})
    create(api, f"{RESOURCE}/deviceclasses", device_class(CORES))
    cores = resource_slice(CORES, MAPPED_NODE, devices=2)
    for device in cores["spec"]["devices"]:
        device["nodeAllocatableResourceMappings"] = {"cpu": {"allocationMultiplier": "1"}}
    create(api, slices(), cores)
    mapping_plane.start_scheduler()
    with installed(mapping_plane, {}) as deployment:
        yield deployment


@pytest.mark.usefixtures("mapped")
class TestNodeAllocatableMappings:
    def test_a_core_mapped_onto_the_nodes_cpu_is_one_pods(self, mapping_plane: ControlPlane) -> None:
        api = mapping_plane.client()
        with mapping_plane.namespace() as ns:
            create(api, claims(ns), claim("cores", CORES))
            for name in ("first", "second"):
                create(api, pods(ns), pod(name, claims=["cores"], gated=True))
            release(api, ns, "first")
            assert bound_node(api, ns, "first") == MAPPED_NODE
            # The scheduler's own node-allocatable check refuses the second pod (upstream
            # pkg/scheduler/framework/plugins/dynamicresources): it never gets to reserve the claim.
            release(api, ns, "second")
            scheduled = not_scheduled(api, ns, "second")
            assert scheduled["reason"] == UNSCHEDULABLE
            assert (
                "node allocatable resource claim cores is already used by another pod" in scheduled["message"]
            )
            (device,) = allocation(api, ns, "cores")
            source = "default: the device maps node-allocatable resources directly"
            refused_at_creation(api, ns, "cores", "first", device, source)
