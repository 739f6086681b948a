"""``draguard convert`` (and ``--api-versions``) convert older resource.k8s.io objects as a real
kube-apiserver 1.36.2 does: the objects are created through v1beta1 and v1beta2 on a server that
serves them (``--runtime-config``), read back through v1, and compared with what draguard makes of
the same documents (converted, then defaulted as the server stores them)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from controlplane import ASSETS_VAR, ControlPlane, call, cannot_run, missing_binaries

from policies.api.defaults import apply_defaults
from policies.api.runtimeconfig import RuntimeConfig
from policies.reading import ReadOptions, read

OLDER = ("resource.k8s.io/v1beta1", "resource.k8s.io/v1beta2")
PLURALS = {
    "DeviceClass": "deviceclasses",
    "ResourceClaim": "resourceclaims",
    "ResourceClaimTemplate": "resourceclaimtemplates",
    "ResourceSlice": "resourceslices",
}
NAMESPACE = "convert-test"


@pytest.fixture(scope="module")
def older_versions_served() -> Iterator[ControlPlane]:
    """A second control plane that serves the older DRA versions (as ``--runtime-config`` does)."""
    missing = missing_binaries()
    if missing:
        cannot_run(missing)
    plane = ControlPlane(Path(os.environ[ASSETS_VAR]), runtime_config=[f"{v}=true" for v in OLDER])
    plane.start()
    try:
        call(plane.client(), "POST", "/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
        yield plane
    finally:
        plane.stop()


def _url(api_version: str, kind: str, name: str = "") -> str:
    base = f"/apis/{api_version}"
    if kind in ("ResourceClaim", "ResourceClaimTemplate"):
        base += f"/namespaces/{NAMESPACE}"
    return f"{base}/{PLURALS[kind]}" + (f"/{name}" if name else "")


EXACT = {"name": "gpu", "deviceClassName": "gpu.example.com"}
DOCUMENTS: list[dict[str, Any]] = [
    {
        "apiVersion": "resource.k8s.io/v1beta1",
        "kind": "ResourceClaim",
        "metadata": {"name": "flat"},
        "spec": {
            "devices": {
                "requests": [
                    {**EXACT, "selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]},
                    {"name": "all", "deviceClassName": "gpu.example.com", "allocationMode": "All"},
                    {"name": "watch", "deviceClassName": "gpu.example.com", "adminAccess": False},
                    {"name": "tolerant", "deviceClassName": "gpu.example.com", "tolerations": [{"key": "k"}]},
                    {
                        "name": "either",
                        "firstAvailable": [
                            {"name": "big", "deviceClassName": "big.example.com"},
                            {"name": "two", "deviceClassName": "gpu.example.com", "count": 2},
                        ],
                    },
                ],
                "constraints": [{"requests": ["gpu", "all"], "matchAttribute": "gpu.example.com/uuid"}],
            }
        },
    },
    {
        "apiVersion": "resource.k8s.io/v1beta1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "template"},
        "spec": {"metadata": {"labels": {"a": "b"}}, "spec": {"devices": {"requests": [EXACT]}}},
    },
    {
        "apiVersion": "resource.k8s.io/v1beta1",
        "kind": "ResourceSlice",
        "metadata": {"name": "basic-devices"},
        "spec": {
            "driver": "gpu.example.com",
            "nodeName": "node-1",
            "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {
                    "name": "gpu-0",
                    "basic": {
                        "attributes": {"model": {"string": "a100"}, "index": {"int": 0}},
                        "capacity": {"memory": {"value": "80Gi"}},
                    },
                },
                {"name": "gpu-1"},
            ],
        },
    },
    {
        "apiVersion": "resource.k8s.io/v1beta2",
        "kind": "DeviceClass",
        "metadata": {"name": "gpu.example.com"},
        "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]},
    },
]


@pytest.mark.parametrize("doc", DOCUMENTS, ids=lambda d: f"{d['apiVersion']}-{d['kind']}")
def test_the_server_stores_what_draguard_converts(
    older_versions_served: ControlPlane, doc: dict[str, Any]
) -> None:
    api = older_versions_served.client()
    created = call(api, "POST", _url(doc["apiVersion"], doc["kind"]), doc)
    assert created.status == 201, created.message
    stored = call(api, "GET", _url("resource.k8s.io/v1", doc["kind"], doc["metadata"]["name"])).body

    reading = read(doc, ReadOptions(api_versions=RuntimeConfig.parse(OLDER)))
    assert reading.errors == [] and reading.obj is not None
    ours = apply_defaults(reading.obj, datetime.now(UTC)).to_json()
    assert ours["apiVersion"] == stored["apiVersion"] == "resource.k8s.io/v1"
    assert ours["spec"] == stored["spec"]
