"""``draguard audit --kubeconfig`` on the live cluster, as its admin, and its PolicyReports applied to
the real API server the way ``kubectl apply --server-side -f -`` applies them.

The PolicyReport CRDs (``wgpolicyk8s.io/v1alpha2``) are installed from ``manifests/policyreport-crd.yaml``,
the schema of the real ones; reports are applied with strict field validation (kubectl's default),
so a field the real CRDs do not have, a bad enum value, a name or namespace the API server refuses,
fails the test instead of being pruned silently. The audit runs on the whole session's cluster: the
other test modules' objects are in it too, and the test only asserts about its own.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from controlplane import Answer, ControlPlane, call, wait_for
from deploy import apply, remove
from inprocess import draguard
from kubernetes import client
from workloads import device_class

MANIFESTS = Path(__file__).parent / "manifests"
NS = "e2e-audit"
LEAVING = "e2e-audit-leaving"
HOLD = "e2e.draguard.io/hold"
DRIVER = "audit.example.com"
GROUP = "/apis/wgpolicyk8s.io/v1alpha2"


def crds() -> list[dict[str, Any]]:
    """The PolicyReport CRD from the manifest, and the ClusterPolicyReport made from it."""
    namespaced = yaml.safe_load((MANIFESTS / "policyreport-crd.yaml").read_text())
    cluster = copy.deepcopy(namespaced)
    cluster["metadata"]["name"] = "clusterpolicyreports.wgpolicyk8s.io"
    cluster["spec"]["scope"] = "Cluster"
    cluster["spec"]["names"] = {
        "kind": "ClusterPolicyReport",
        "listKind": "ClusterPolicyReportList",
        "plural": "clusterpolicyreports",
        "singular": "clusterpolicyreport",
        "shortNames": ["cpolr"],
    }
    return [namespaced, cluster]


def cluster_objects() -> list[dict[str, Any]]:
    """What the audit should find: a class selecting nothing, a pool missing half its slices, a
    pending claim no device can satisfy, and one more in a namespace being deleted (a finalizer
    keeps the claim, and so the namespace, there)."""
    nothing = device_class("nowhere.example.com")
    device = {"name": "gpu-0", "attributes": {"model": {"string": "A100"}}}
    selector = f'device.attributes["{DRIVER}"].model == "B200"'
    request = {
        "name": "gpu",
        "exactly": {"deviceClassName": DRIVER, "selectors": [{"cel": {"expression": selector}}]},
    }
    return [
        device_class(DRIVER),
        {**nothing, "metadata": {"name": "audit-nothing"}},
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": "audit-node-a-half"},
            "spec": {
                "driver": DRIVER,
                "nodeName": "audit-node-a",
                "pool": {"name": "audit-node-a", "generation": 1, "resourceSliceCount": 2},
                "devices": [device],
            },
        },
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "wants-b200", "namespace": NS},
            "spec": {"devices": {"requests": [request]}},
        },
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "wants-b200", "namespace": LEAVING, "finalizers": [HOLD]},
            "spec": {"devices": {"requests": [request]}},
        },
    ]


@pytest.fixture(scope="module")
def cluster(control_plane: ControlPlane) -> Iterator[ControlPlane]:
    admin = control_plane.client()
    core = client.CoreV1Api(admin)
    control_plane.add_node("audit-node-a")
    for namespace in (NS, LEAVING):
        core.create_namespace({"metadata": {"name": namespace}})
    objects = cluster_objects()
    definitions = crds()
    apply(admin, [*objects, *definitions])
    core.delete_namespace(LEAVING)
    for crd in definitions:
        wait_for(f"{crd['metadata']['name']} to be established", lambda crd=crd: established(admin, crd))
    try:
        yield control_plane
    finally:
        held = f"/apis/resource.k8s.io/v1/namespaces/{LEAVING}/resourceclaims/wants-b200"
        call(admin, "PATCH", held, {"metadata": {"finalizers": None}})
        node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "audit-node-a"}}
        remove(admin, [*definitions, *objects, node])
        core.delete_namespace(NS)


def established(api: client.ApiClient, crd: dict[str, Any]) -> bool:
    found = call(
        api, "GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd['metadata']['name']}"
    )
    conditions = (found.body.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)


def audit(plane: ControlPlane, *output: str) -> subprocess.CompletedProcess[str]:
    """``draguard audit --kubeconfig`` with the admin's kubeconfig, as a cluster admin runs it."""
    return draguard("audit", f"--kubeconfig={plane.admin_kubeconfig}", *output)


def server_side_apply(api: client.ApiClient, report: dict[str, Any]) -> Answer:
    """``kubectl apply --server-side`` of one report: an apply patch, strict field validation."""
    metadata = report["metadata"]
    plural = "policyreports" if report["kind"] == "PolicyReport" else "clusterpolicyreports"
    where = f"/namespaces/{metadata['namespace']}" if "namespace" in metadata else ""
    path = f"{GROUP}{where}/{plural}/{metadata['name']}"
    params = api.param_serialize(
        method="PATCH",
        resource_path=path,
        query_params=[("fieldManager", "kubectl"), ("fieldValidation", "Strict"), ("force", "true")],
        header_params={"Accept": "application/json", "Content-Type": "application/apply-patch+yaml"},
        body=json.dumps(report),
        auth_settings=["BearerToken"],
    )
    response = api.call_api(*params).response
    raw = response.read()
    return Answer(response.status, json.loads(raw) if raw else {}, ())


def ours(results: list[dict[str, Any]]) -> dict[str, list[str]]:
    """This module's objects in a report's results: rule -> the names of the objects found."""
    found: dict[str, list[str]] = {}
    for result in results:
        for resource in result.get("resources") or []:
            if resource["name"] in ("audit-nothing", "audit-node-a-half", "wants-b200", DRIVER):
                found.setdefault(result["rule"], []).append(resource["name"])
    return found


def test_the_audit_of_the_live_cluster_names_what_is_wrong(cluster: ControlPlane) -> None:
    done = audit(cluster)
    assert done.returncode == 1, done.stderr  # an incomplete pool is a fail
    assert "audit-node-a" in done.stdout and "incomplete-pools" in done.stdout, done.stdout
    assert "audit-nothing" in done.stdout and "unmatched-selectors" in done.stdout


def test_its_policy_reports_are_accepted_by_the_api_server_as_they_are(cluster: ControlPlane) -> None:
    done = audit(cluster, "-o", "policyreport")
    assert done.returncode == 1, done.stderr
    reports = list(yaml.safe_load_all(done.stdout))
    api = cluster.client()
    for report in reports:
        answer = server_side_apply(api, report)
        assert answer.status in (200, 201), (report["kind"], report["metadata"], answer.message)
        stored = answer.body
        # nothing pruned: what the API server keeps is what draguard wrote
        assert stored["results"] == report["results"], report["metadata"]
        assert stored["summary"] == report["summary"]
    namespaced = next(r for r in reports if r["metadata"].get("namespace") == NS)
    assert namespaced["kind"] == "PolicyReport" and namespaced["metadata"]["name"] == "draguard-audit"
    # the selectors rule as if the claim were created now, and the health check of pending claims
    assert ours(namespaced["results"]) == {"selectors": ["wants-b200"], "unmatched-selectors": ["wants-b200"]}
    cluster_wide = next(r for r in reports if r["kind"] == "ClusterPolicyReport")
    found = ours(cluster_wide["results"])
    assert found["incomplete-pools"] == ["audit-node-a-half"], found
    assert "audit-nothing" in found["unmatched-selectors"], found
    # Nothing for the namespace being deleted, where the API server would refuse the report
    assert all(r["metadata"].get("namespace") != LEAVING for r in reports)
    # (other modules' namespaces may be being deleted too: the session has no namespace controller)
    assert re.search(rf"results in namespaces being deleted \([^)]*\b{LEAVING}\b", done.stderr), done.stderr
    refused = server_side_apply(
        api, {**namespaced, "metadata": {**namespaced["metadata"], "namespace": LEAVING}}
    )
    assert refused.status == 403 and "because it is being terminated" in refused.message, refused.message
    # applied again (a CronJob's next run): the same objects, updated in place
    again = audit(cluster, "-o", "policyreport")
    for report in yaml.safe_load_all(again.stdout):
        assert server_side_apply(api, report).status == 200
