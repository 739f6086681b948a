"""The selectors rule through the real API server: warnings reach the client, updates keep old
selectors unchecked."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from controlplane import ControlPlane, call, wait_for
from deploy import Draguard, apply, installed

MANIFESTS = Path(__file__).parent / "manifests"
CLASSES = "/apis/resource.k8s.io/v1/deviceclasses"


@pytest.fixture(scope="module")
def draguard(control_plane: ControlPlane) -> Iterator[Draguard]:
    control_plane.add_node("e2e-node-a", labels={"gpu": "a100"})
    apply(control_plane.client(), (MANIFESTS / "gpu-driver.yaml").read_text())
    with installed(control_plane, {}) as deployment:
        yield deployment


def claims(namespace: str) -> str:
    return f"/apis/resource.k8s.io/v1/namespaces/{namespace}/resourceclaims"


def gpu_claim(name: str, selector: str) -> dict:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "gpu",
                        "exactly": {
                            "deviceClassName": "gpu.example.com",
                            "selectors": [{"cel": {"expression": selector}}],
                        },
                    }
                ]
            }
        },
    }


def test_claim_matching_no_device_is_admitted_with_a_warning(
    draguard: Draguard, control_plane: ControlPlane, kube_namespace: str
) -> None:
    control_plane.grant(
        kube_namespace,
        "alice",
        [
            {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["create"]},
        ],
    )
    api = control_plane.client("alice", ["dev"])
    selector = 'device.attributes["gpu.example.com"].model == "H200"'
    answer = call(api, "POST", claims(kube_namespace), gpu_claim("h200", selector))
    assert answer.status == 201, answer.body
    assert any("matches none" in w for w in answer.warnings), answer.warnings
    fine = call(
        api,
        "POST",
        claims(kube_namespace),
        gpu_claim("a100", 'device.attributes["gpu.example.com"].model.startsWith("A100")'),
    )
    assert fine.status == 201, fine.body
    assert fine.warnings == ()


def test_device_class_update_keeps_old_selectors_unchecked(
    draguard: Draguard, control_plane: ControlPlane
) -> None:
    api = control_plane.client()
    nothing = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "e2e-h200"},
        "spec": {"selectors": [{"cel": {"expression": 'device.driver == "h200.example.com"'}}]},
    }
    known = [replica.snapshot_objects("DeviceClass") for replica in draguard.replica]
    created = call(api, "POST", CLASSES, nothing)
    assert created.status == 201, created.body
    assert any("matches none" in w for w in created.warnings), created.warnings
    wait_for(
        "draguard's snapshot to hold the new class",
        lambda: all(
            r.snapshot_objects("DeviceClass") > n for r, n in zip(draguard.replica, known, strict=True)
        ),
        interval=0.05,
    )
    relabelled = call(api, "PATCH", f"{CLASSES}/e2e-h200", {"metadata": {"labels": {"tier": "gold"}}})
    assert relabelled.status == 200, relabelled.body
    assert relabelled.warnings == ()
