"""The prescheduled rule through the real API server: a pod pinned with ``spec.nodeName`` whose
claims nobody will allocate is refused with the fix; with the chart's mutating webhook it is
rewritten to a hostname node selector, and the real kube-scheduler then allocates its devices and
binds it to the node it asked for.

Two installs of the chart, one per class (the webhooks are cluster-wide, so one at a time).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from controlplane import ControlPlane, call
from deploy import Draguard, apply, installed
from workloads import (
    bound_node,
    claim,
    claims,
    create,
    dry_run_until,
    get,
    pod,
    pod_claim,
    pods,
    reserved_for,
    template,
    templates,
)

MANIFESTS = Path(__file__).parent / "manifests"
NODE = "pre-node-1"
# As on clouds whose node names are not host names: the rewrite must use the Node's label.
HOSTNAME = "pre-host-1"
ACCELERATOR = {"cloud.google.com/gke-tpu-accelerator": "tpu-v5-lite"}
TPU = "tpu.example.com"


@pytest.fixture(scope="module")
def tpu_node(control_plane: ControlPlane) -> str:
    """A node with a TPU driver's slice, and the scheduler (which alone allocates claims)."""
    control_plane.add_node(NODE, labels={"kubernetes.io/hostname": HOSTNAME, **ACCELERATOR})
    apply(control_plane.client(), (MANIFESTS / "tpu-driver.yaml").read_text())
    control_plane.start_scheduler()
    return NODE


@pytest.fixture(scope="class")
def refusing(control_plane: ControlPlane, tpu_node: str) -> Iterator[Draguard]:
    """The chart's defaults: the validating webhook only."""
    with installed(control_plane, {}) as deployment:
        yield deployment


@pytest.fixture(scope="class")
def rewriting(control_plane: ControlPlane, tpu_node: str) -> Iterator[Draguard]:
    """``webhooks.prescheduled.mutating.enabled``: the mutating webhook too."""
    control_plane.start_controller_manager()  # the resourceclaim controller: claims from templates
    values = {"webhooks": {"prescheduled": {"mutating": {"enabled": True}}}}
    with installed(control_plane, values) as deployment:
        yield deployment


@pytest.mark.usefixtures("refusing")
class TestRefused:
    """The chart's defaults: a pinned pod is refused unless its claims are allocated there."""

    def test_pinned_pod_with_an_unallocated_claim_is_refused_with_the_fix(
        self, control_plane: ControlPlane, kube_namespace: str
    ) -> None:
        api = control_plane.client()
        create(api, claims(kube_namespace), claim("tpu", TPU))
        pinned = pod("pinned", claims=["tpu"], node_name=NODE)
        # Until draguard's snapshot has the new claim, it says the claim does not exist.
        dry_run_until(api, "POST", pods(kube_namespace), pinned, 403, "is not allocated")
        answer = call(api, "POST", pods(kube_namespace), pinned)
        assert answer.status == 403, answer.body
        message = answer.message
        assert message.startswith('admission webhook "prescheduled.draguard.io" denied the request: '), (
            message
        )
        assert f"pod {kube_namespace}/pinned sets spec.nodeName {NODE}" in message
        assert f'pod claim "tpu": claim {kube_namespace}/tpu is not allocated' in message
        assert f"spec.nodeSelector {{kubernetes.io/hostname: {HOSTNAME}}}" in message
        assert call(api, "GET", f"{pods(kube_namespace)}/pinned").status == 404

    def test_pinned_pod_with_a_template_claim_is_refused(
        self, control_plane: ControlPlane, kube_namespace: str
    ) -> None:
        api = control_plane.client()
        create(api, templates(kube_namespace), template("one-tpu", TPU))
        answer = call(api, "POST", pods(kube_namespace), pod("pinned", templates=["one-tpu"], node_name=NODE))
        assert answer.status == 403, answer.body
        assert f"comes from ResourceClaimTemplate {kube_namespace}/one-tpu" in answer.message

    def test_pinned_pod_whose_claim_is_allocated_on_that_node_is_admitted(
        self, control_plane: ControlPlane, kube_namespace: str
    ) -> None:
        """The claim the scheduler allocated for a first pod is usable by a second pod pinned there."""
        api = control_plane.client()
        create(api, claims(kube_namespace), claim("tpu", TPU))
        create(api, pods(kube_namespace), pod("first", claims=["tpu"]))
        assert bound_node(api, kube_namespace, "first") == NODE
        # The API server has the allocation; draguard's snapshot may be a moment behind.
        pinned = pod("second", claims=["tpu"], node_name=NODE)
        dry_run_until(api, "POST", pods(kube_namespace), pinned, 201)
        answer = call(api, "POST", pods(kube_namespace), pinned)
        assert answer.status == 201, answer.body
        assert answer.body["spec"]["nodeName"] == NODE


@pytest.mark.usefixtures("rewriting")
class TestRewritten:
    """With the mutating webhook the pod is rewritten, then scheduled."""

    def test_pinned_pod_is_rewritten_and_scheduled_to_its_node(
        self, control_plane: ControlPlane, kube_namespace: str
    ) -> None:
        api = control_plane.client()
        create(api, templates(kube_namespace), template("one-tpu", TPU))
        answer = call(api, "POST", pods(kube_namespace), pod("pinned", templates=["one-tpu"], node_name=NODE))
        assert answer.status == 201, answer.body
        spec = answer.body["spec"]
        assert "nodeName" not in spec
        assert spec["nodeSelector"] == {"kubernetes.io/hostname": HOSTNAME}
        assert answer.warnings == (
            f"pod {kube_namespace}/pinned: draguard replaced spec.nodeName {NODE} with the node selector "
            f"kubernetes.io/hostname={HOSTNAME} so that the scheduler allocates the pod's devices",
        )
        assert bound_node(api, kube_namespace, "pinned") == NODE
        made = pod_claim(api, kube_namespace, "pinned", "one-tpu")
        allocated = get(api, f"{claims(kube_namespace)}/{made}")["status"]["allocation"]
        assert all(r["device"].startswith("tpu-") for r in allocated["devices"]["results"])
        assert reserved_for(api, kube_namespace, made) == ["pinned"]

    def test_a_pod_selecting_nodes_already_keeps_its_selector(
        self, control_plane: ControlPlane, kube_namespace: str
    ) -> None:
        """The hostname joins the pod's own selector (a JSON Pointer with an escaped ``/``, which the
        API server applies)."""
        api = control_plane.client()
        create(api, templates(kube_namespace), template("one-tpu", TPU))
        selecting = pod("selecting", templates=["one-tpu"], node_name=NODE, node_selector=ACCELERATOR)
        answer = call(api, "POST", pods(kube_namespace), selecting)
        assert answer.status == 201, answer.body
        assert answer.body["spec"]["nodeSelector"] == {**ACCELERATOR, "kubernetes.io/hostname": HOSTNAME}
        assert bound_node(api, kube_namespace, "selecting") == NODE

    def test_pod_pinned_to_an_unknown_node_is_not_rewritten_but_refused(
        self, control_plane: ControlPlane, kube_namespace: str
    ) -> None:
        api = control_plane.client()
        create(api, templates(kube_namespace), template("one-tpu", TPU))
        answer = call(
            api, "POST", pods(kube_namespace), pod("lost", templates=["one-tpu"], node_name="no-such-node")
        )
        assert answer.status == 403, answer.body
        assert "sets spec.nodeName no-such-node (a node the cluster snapshot does not have)" in answer.message
