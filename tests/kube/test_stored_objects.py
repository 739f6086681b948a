"""What draguard says of an object a cluster already holds agrees with kube-apiserver 1.36.2.

Objects that a create would refuse are written straight into etcd (as a cluster holds what it
admitted under another version or other feature gates); then each gets an update that leaves its
spec as it is (a label added). The server refuses that update exactly when draguard's verdict on
the existing object has a part "even as stored", naming the same fields; the parts "on create
only" are what the server's validation ratcheting lets the object keep (an unchanged class
selector is compiled in the stored-expressions environment, a claim's spec is never validated
again, opaque parameters over the limit stay).
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from controlplane import ControlPlane, call

from policies.reading import ReadOptions, read
from policies.validation.documents import EVEN_AS_STORED, ON_CREATE_ONLY, judge_existing

V1 = "resource.k8s.io/v1"
LISTED = 'device.attributes["gpu.example.com"].model.includes("a100")'  # stored-expressions only
EXPENSIVE = "[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(x, " * 7 + "true" + ")" * 7


def device_class(name: str, expression: str, **spec: Any) -> dict[str, Any]:
    selectors = [{"cel": {"expression": expression}}]
    return {
        "apiVersion": V1,
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": selectors, **spec},
    }


def claim_spec(**exactly: Any) -> dict[str, Any]:
    return {
        "devices": {
            "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com", **exactly}}]
        }
    }


# (resource, object, whether a create is refused too): every object here is refused on create.
CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "class-listed-selector": ("deviceclasses", device_class("s-listed", LISTED)),
    "class-expensive-selector": ("deviceclasses", device_class("s-expensive", EXPENSIVE)),
    "class-broken-selector": ("deviceclasses", device_class("s-broken", "device.driver ==")),
    "class-long-selector": (
        "deviceclasses",
        device_class("s-long", "'" + "a" * 10300 + "' == device.driver"),
    ),
    "class-big-parameters": (
        "deviceclasses",
        device_class(
            "s-params",
            'device.driver == "gpu.example.com"',
            config=[{"opaque": {"driver": "gpu.example.com", "parameters": {"blob": "x" * 11000}}}],
        ),
    ),
    "claim-bad-spec": (
        "resourceclaims",
        {
            "apiVersion": V1,
            "kind": "ResourceClaim",
            "metadata": {"name": "s-claim", "namespace": "default"},
            "spec": claim_spec(count=-1, selectors=[{"cel": {"expression": LISTED}}]),
        },
    ),
    "template-bad-spec": (
        "resourceclaimtemplates",
        {
            "apiVersion": V1,
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "s-template", "namespace": "default"},
            "spec": {"spec": claim_spec(allocationMode="Exactcount")},
        },
    ),
    "slice-bad-device": (
        "resourceslices",
        {
            "apiVersion": V1,
            "kind": "ResourceSlice",
            "metadata": {"name": "s-slice"},
            "spec": {
                "driver": "gpu.example.com",
                "nodeName": "node-1",
                "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": "GPU_0"}],
            },
        },
    ),
    "privileged-pod": (  # this control plane runs kube-apiserver with its own --allow-privileged=false
        "pods",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "s-privileged", "namespace": "default"},
            "spec": {
                "containers": [
                    {
                        "name": "plugin",
                        "image": "registry.example.com/plugin:1",
                        "securityContext": {"privileged": True},
                        "terminationMessagePath": "/dev/termination-log",
                        "terminationMessagePolicy": "File",
                        "imagePullPolicy": "IfNotPresent",
                    }
                ],
                "restartPolicy": "Always",
                "dnsPolicy": "ClusterFirst",
                "schedulerName": "default-scheduler",
                "terminationGracePeriodSeconds": 30,
                "securityContext": {},
                "enableServiceLinks": True,
                "preemptionPolicy": "PreemptLowerPriority",
                "priority": 0,
            },
        },
    ),
    "configmap-bad-name": (
        "configmaps",
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "Driver_Config", "namespace": "default"},
        },
    ),
}

_FIELD = re.compile(r"^([^:]+): ")


def _path(obj: dict[str, Any], resource: str) -> str:
    group_version = obj["apiVersion"]
    root = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
    namespace = obj["metadata"].get("namespace")
    return f"{root}{f'/namespaces/{namespace}' if namespace else ''}/{resource}/{obj['metadata']['name']}"


def _fields(lines: list[str]) -> set[str]:
    return {m.group(1) for line in lines if (m := _FIELD.match(line))}


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_unchanged_update_is_refused_exactly_for_what_draguard_says_even_as_stored(
    control_plane: ControlPlane, case: str
) -> None:
    resource, obj = CASES[case]
    control_plane.write_stored(resource, obj)
    api = control_plane.client()
    path = _path(obj, resource)
    try:
        stored = call(api, "GET", path)
        assert stored.status == 200, stored.body  # the server holds it, unvalidated
        answer = call(api, "PATCH", path, {"metadata": {"labels": {"touched": "yes"}}})
    finally:
        call(api, "DELETE", path)
    reading = read({**stored.body, "apiVersion": obj["apiVersion"], "kind": obj["kind"]}, ReadOptions())
    assert reading.errors == []
    warnings = judge_existing(reading, allow_privileged=False)
    assert warnings, "a create of every case is refused: draguard must say so"
    even = [w for w in warnings if f"({EVEN_AS_STORED})" in w.split("\n")[0]]
    assert all(f"({ON_CREATE_ONLY}" in w.split("\n")[0] for w in warnings if w not in even)
    causes = {c["field"] for c in answer.body.get("details", {}).get("causes", []) if c.get("field")}
    if answer.status == 200:
        assert even == [], f"{case}: the server accepts the unchanged update, draguard says {even}"
    else:
        assert answer.status == 422, answer.body
        assert _fields(even) == causes, f"{case}: the server says {answer.message}, draguard {even}"
