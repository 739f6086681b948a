"""The sharing rule through the real API server and the real kube-scheduler.

The scheduler reserves an allocated claim for each pod that uses it (PreBind: a
``resourceclaims/status`` update adding the pod to ``reservedFor``). For a claim whose device says
``SamePod``, draguard refuses that update for a second pod, so the scheduler cannot bind it: the
pod stays pending, and what the scheduler records on it must tell a person why. A ``MultiPod``
claim is reserved for both pods.

The policies come from the device attribute ``draguard.io/sharingPolicy`` (CPU cores) and from
``rules.sharing.policies`` (the accelerator, by the class it was requested through); the third
source, KEP-5517's node-allocatable mappings, needs the alpha gate DRANodeAllocatableResources and
is left to the unit tests.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from controlplane import ControlPlane, call
from deploy import Draguard, apply, installed
from workloads import (
    SCHEDULER_ERROR,
    bound_node,
    claim,
    claims,
    create,
    dry_run_until,
    get,
    not_scheduled,
    pod,
    pods,
    release,
    reserved_for,
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


@pytest.fixture(scope="module")
def draguard(control_plane: ControlPlane) -> Iterator[Draguard]:
    control_plane.add_node(NODE)
    apply(control_plane.client(), (MANIFESTS / "cpu-accel-drivers.yaml").read_text())
    control_plane.start_scheduler()
    with installed(control_plane, VALUES) as deployment:
        yield deployment


def test_scheduler_cannot_reserve_a_same_pod_claim_for_a_second_pod(
    draguard: Draguard, control_plane: ControlPlane, kube_namespace: str
) -> None:
    api = control_plane.client()
    create(api, claims(kube_namespace), claim("cores", "cpu.example.com"))
    # Both pods exist before the claim is allocated, so pod admission has nothing to refuse yet:
    # the only point left is the scheduler's reservation.
    for name in ("first", "second"):
        create(api, pods(kube_namespace), pod(name, claims=["cores"], gated=True))
    release(api, kube_namespace, "first")
    assert bound_node(api, kube_namespace, "first") == NODE
    assert reserved_for(api, kube_namespace, "cores") == ["first"]

    release(api, kube_namespace, "second")
    scheduled = not_scheduled(api, kube_namespace, "second")
    # What `kubectl describe pod second` shows, in the condition and in the FailedScheduling event:
    # the scheduler's own reason (its PreBind failed) with draguard's refusal after it.
    refusal = (
        f'admission webhook "sharing.draguard.io" denied the request: claim {kube_namespace}/cores cannot '
        f"be reserved for pod {kube_namespace}/second: it would be shared by pod {kube_namespace}/first, "
        f"pod {kube_namespace}/second, but its device cpu.example.com/{NODE}/cpu-0 has sharing policy "
        "SamePod (device attribute draguard.io/sharingPolicy), so only the containers of one pod may use "
        "it; give each pod a claim of its own (spec.resourceClaims[].resourceClaimTemplateName does)"
    )
    prebind = 'running PreBind plugin "DynamicResources"'
    told = f"{prebind}: add reservation to claim {kube_namespace}/cores: {refusal}"
    assert (scheduled["reason"], scheduled["message"]) == (SCHEDULER_ERROR, told)
    events = get(api, f"/api/v1/namespaces/{kube_namespace}/events")["items"]
    failed = [e["message"] for e in events if e["involvedObject"]["name"] == "second"]
    assert told in failed, failed
    assert "nodeName" not in get(api, f"{pods(kube_namespace)}/second")["spec"]
    assert reserved_for(api, kube_namespace, "cores") == ["first"]

    # A pod created now, with the claim already reserved, is refused before it exists.
    third = pod("third", claims=["cores"])
    dry_run_until(api, "POST", pods(kube_namespace), third, 403)
    refused = call(api, "POST", pods(kube_namespace), third)
    assert refused.message == (
        f'admission webhook "sharing.draguard.io" denied the request: pod {kube_namespace}/third cannot use '
        f"claim {kube_namespace}/cores: it is already reserved by pod {kube_namespace}/first, and its device "
        f"cpu.example.com/{NODE}/cpu-0 has sharing policy SamePod (device attribute "
        "draguard.io/sharingPolicy), so only the containers of one pod may use it; give each pod a claim of "
        "its own (spec.resourceClaims[].resourceClaimTemplateName does)"
    )


def test_multi_pod_claim_is_shared(
    draguard: Draguard, control_plane: ControlPlane, kube_namespace: str
) -> None:
    api = control_plane.client()
    create(api, claims(kube_namespace), claim("accel", "accel.example.com"))
    for name in ("a", "b"):
        create(api, pods(kube_namespace), pod(name, claims=["accel"]))
    assert bound_node(api, kube_namespace, "a") == bound_node(api, kube_namespace, "b") == NODE
    assert sorted(reserved_for(api, kube_namespace, "accel")) == ["a", "b"]


def test_the_same_device_through_the_exclusive_class_is_not_shared(
    draguard: Draguard, control_plane: ControlPlane, kube_namespace: str
) -> None:
    api = control_plane.client()
    create(api, claims(kube_namespace), claim("accel", "accel-exclusive.example.com"))
    create(api, pods(kube_namespace), pod("a", claims=["accel"]))
    assert bound_node(api, kube_namespace, "a") == NODE
    second = pod("b", claims=["accel"])
    dry_run_until(api, "POST", pods(kube_namespace), second, 403)
    refused = call(api, "POST", pods(kube_namespace), second)
    assert "has sharing policy SamePod (draguard config sharing.policies[1])" in refused.message, refused.body
