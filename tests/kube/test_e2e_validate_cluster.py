"""``draguard validate --kubeconfig`` against the session's real API server: each document is judged
as ``kubectl apply`` would send it there, and the API server's own answer to that write is the
reference (the test makes the same write and compares)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from controlplane import ControlPlane, call
from deploy import apply, remove
from inprocess import draguard
from kubernetes import client
from workloads import device_class

from webhook.cluster import READER_LABEL

NS = "e2e-validate"
ADMIN_NS = "e2e-validate-admin"
DRIVER = "validate.example.com"
CLAIMS = f"/apis/resource.k8s.io/v1/namespaces/{NS}/resourceclaims"


def claim(namespace: str, selector: str, admin: bool = False) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": DRIVER, "selectors": [{"cel": {"expression": selector}}]}
    if admin:
        exactly["adminAccess"] = True
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "gpu", "namespace": namespace},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}},
    }


A100 = f'device.attributes["{DRIVER}"].model == "A100"'
H100 = f'device.attributes["{DRIVER}"].model == "H100"'


@pytest.fixture(scope="module")
def cluster(control_plane: ControlPlane) -> Iterator[ControlPlane]:
    admin = control_plane.client()
    core = client.CoreV1Api(admin)
    core.create_namespace({"metadata": {"name": NS}})
    core.create_namespace(
        {"metadata": {"name": ADMIN_NS, "labels": {"resource.kubernetes.io/admin-access": "true"}}}
    )
    objects = [device_class(DRIVER), claim(NS, A100)]
    apply(admin, objects)
    try:
        yield control_plane
    finally:
        remove(admin, objects)
        core.delete_namespace(NS)
        core.delete_namespace(ADMIN_NS)


def validate(
    tmp_path: Path, kubeconfig: Path, *documents: dict[str, Any], flags: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    manifest = tmp_path / "manifest.yaml"
    manifest.write_text(yaml.safe_dump_all(documents))
    return draguard("validate", "-f", str(manifest), f"--kubeconfig={kubeconfig}", *flags)


def test_a_changed_claim_spec_is_refused_as_the_api_server_refuses_it(
    cluster: ControlPlane, tmp_path: Path
) -> None:
    changed = claim(NS, H100)
    done = validate(tmp_path, cluster.admin_kubeconfig, changed)
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "spec: Invalid value" in done.stdout and "field is immutable" in done.stdout, done.stdout
    # the API server refuses the same update, in the same words
    stored = call(cluster.client(), "GET", f"{CLAIMS}/gpu").body
    refused = call(cluster.client(), "PUT", f"{CLAIMS}/gpu", {**stored, "spec": changed["spec"]})
    assert refused.status == 422 and "field is immutable" in refused.message, refused.message


def test_the_stored_claim_applied_again_is_an_accepted_update(cluster: ControlPlane, tmp_path: Path) -> None:
    done = validate(tmp_path, cluster.admin_kubeconfig, claim(NS, A100))
    assert done.returncode == 0, (done.stdout, done.stderr)
    # and a claim that is new there is a create: no immutability to refuse it
    fresh = {**claim(NS, H100), "metadata": {"name": "fresh", "namespace": NS}}
    assert validate(tmp_path, cluster.admin_kubeconfig, fresh).returncode == 0
    # -o json says which was which (draguard.io/v1alpha2's update)
    both = validate(tmp_path, cluster.admin_kubeconfig, claim(NS, A100), fresh, flags=("-o", "json"))
    report = json.loads(both.stdout)
    assert report["apiVersion"] == "draguard.io/v1alpha2", report
    judged = [(o["name"], o["update"]) for o in report["objects"]]
    assert judged == [(f"{NS}/gpu", True), (f"{NS}/fresh", False)], report


def test_admin_access_comes_from_the_namespace_labels_in_the_cluster(
    cluster: ControlPlane, tmp_path: Path
) -> None:
    allowed = validate(tmp_path, cluster.admin_kubeconfig, claim(ADMIN_NS, A100, admin=True))
    assert allowed.returncode == 0, (allowed.stdout, allowed.stderr)
    wanting = {**claim(NS, A100, admin=True), "metadata": {"name": "admin", "namespace": NS}}
    refused = validate(tmp_path, cluster.admin_kubeconfig, wanting)
    assert refused.returncode == 1 and "admin-access" in refused.stdout, refused.stdout
    # the API server agrees: the unlabeled namespace refuses the create, the labeled one takes it
    api = cluster.client()
    assert call(api, "POST", CLAIMS, wanting).status == 422
    labeled = f"/apis/resource.k8s.io/v1/namespaces/{ADMIN_NS}/resourceclaims"
    created = call(api, "POST", labeled, claim(ADMIN_NS, A100, admin=True))
    assert created.status == 201, created.message
    call(api, "DELETE", f"{labeled}/gpu")


def test_a_forbidden_list_is_one_line_naming_the_resource_and_verb(
    cluster: ControlPlane, tmp_path: Path
) -> None:
    nobody = cluster.kubeconfig(cert=cluster.client_certificate("e2e-nobody"), name="nobody")
    done = validate(tmp_path, nobody, claim(NS, A100))
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    # validate first GETs the object each document names
    assert "cannot get resourceclaims.resource.k8s.io: forbidden" in lines[0], lines[0]
    assert f"kubectl get clusterroles -l {READER_LABEL}" in lines[0], lines[0]
    assert "Traceback" not in done.stderr


# includes() on a list attribute compiles only in the stored-expressions environment (the
# DRAListTypeAttributes gate is off in 1.36): a create refuses it, an unchanged update keeps it.
LISTED = f'device.attributes["{DRIVER}"].models.includes("a100")'


def listed_class(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": LISTED}}]},
    }


def test_a_selector_only_the_stored_environment_compiles_is_kept_by_an_unchanged_update(
    cluster: ControlPlane, tmp_path: Path
) -> None:
    stored = listed_class("e2e-validate-listed")
    cluster.write_stored("deviceclasses", stored)  # as a cluster holds what another version admitted
    path = f"/apis/resource.k8s.io/v1/deviceclasses/{stored['metadata']['name']}"
    api = cluster.client()
    try:
        kept = validate(tmp_path, cluster.admin_kubeconfig, stored)
        assert kept.returncode == 0, (kept.stdout, kept.stderr)
        assert "1 update of a stored object" in kept.stderr, kept.stderr
        # the API server agrees: the same object applied again is accepted...
        current = call(api, "GET", path).body
        assert call(api, "PUT", path, {**current, "spec": stored["spec"]}).status == 200
        # ...and a new class with that selector is refused, by both
        fresh = listed_class("e2e-validate-listed-new")
        refused = validate(tmp_path, cluster.admin_kubeconfig, fresh)
        assert refused.returncode == 1 and "spec.selectors[0].cel.expression" in refused.stdout, (
            refused.stdout
        )
        assert call(api, "POST", "/apis/resource.k8s.io/v1/deviceclasses", fresh).status == 422
    finally:
        call(api, "DELETE", path)
