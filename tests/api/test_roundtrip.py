"""Parse then dump gives back the same JSON, for every kind; bad input fails with one clear line.

A round trip must be exact because draguard hands objects back (dry-run answers, patches) and
because the webhook must not lose what a newer cluster sends: unknown fields and explicit nulls
survive, quantities keep their spelling.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from full_objects import ADMISSION_REVIEW, DECODABLE, RESOURCE_CLAIM, RESOURCE_SLICE

from policies.api.admission import AdmissionReview
from policies.api.kinds import DecodeError, decode
from policies.api.resource import ResourceSlice

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize("data", [pytest.param(d, id=name) for name, d in DECODABLE.items()])
def test_every_kind_round_trips(data: dict[str, Any]) -> None:
    assert decode(copy.deepcopy(data)).to_json() == data


@pytest.mark.parametrize("data", [pytest.param(d, id=name) for name, d in DECODABLE.items()])
def test_round_trip_survives_json_text(data: dict[str, Any]) -> None:
    """What the webhook does: bytes in, model, bytes out."""
    text = json.dumps(data)
    assert json.loads(json.dumps(decode(json.loads(text)).to_json())) == data


def test_admission_review_round_trips() -> None:
    review = AdmissionReview.model_validate(copy.deepcopy(ADMISSION_REVIEW), by_name=False)
    assert review.to_json() == ADMISSION_REVIEW


def example_documents() -> list[Any]:
    found = []
    for path in sorted(EXAMPLES.rglob("*.yaml")):
        for i, doc in enumerate(yaml.safe_load_all(path.read_text())):
            items = doc.get("items", []) if doc and doc.get("kind") == "List" else [doc]
            # Only Kubernetes objects: policy-test suites and draguard configs live under examples/ too.
            objects = [o for o in items if isinstance(o, dict) and "apiVersion" in o and "kind" in o]
            found += [pytest.param(o, id=f"{path.name}#{i}-{j}") for j, o in enumerate(objects)]
    return found


@pytest.mark.parametrize("data", example_documents())
def test_examples_round_trip(data: dict[str, Any]) -> None:
    assert decode(copy.deepcopy(data)).to_json() == data


UNKNOWN_AND_NULLS: list[tuple[str, dict[str, Any]]] = [
    ("top-level unknown field", {**RESOURCE_SLICE, "futureTopLevel": {"a": [1, None]}}),
    (
        "nested unknown fields",
        {
            **RESOURCE_CLAIM,
            "spec": {
                "devices": {
                    "requests": [
                        {"name": "r", "exactly": {"deviceClassName": "c"}, "derivedAttributes": [{"x": 1}]}
                    ],
                    "scoring": "future",
                }
            },
        },
    ),
    (
        "explicit nulls",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "c", "labels": None},
            "spec": {
                "devices": {
                    "requests": [
                        {"name": "r", "exactly": {"deviceClassName": "c", "count": None, "tolerations": None}}
                    ],
                    "constraints": None,
                }
            },
            "status": None,
        },
    ),
    ("explicit null node name", {**RESOURCE_SLICE, "spec": {**RESOURCE_SLICE["spec"], "nodeName": None}}),
    (
        "quantities keep their spelling",
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "n"},
            "status": {
                "allocatable": {"cpu": "1000m", "memory": "1.5Gi", "pods": 110, "ephemeral-storage": "1e3"}
            },
        },
    ),
]


@pytest.mark.parametrize("data", [pytest.param(d, id=name) for name, d in UNKNOWN_AND_NULLS])
def test_unknown_fields_and_nulls_are_kept(data: dict[str, Any]) -> None:
    assert decode(copy.deepcopy(data)).to_json() == data


def test_absent_fields_stay_absent() -> None:
    """Defaults of the models (empty strings, empty lists) never show up in a dump."""
    data = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {}, "spec": {}}
    assert decode(data).to_json() == data


BAD: list[tuple[str, Any, list[str]]] = [
    (
        "wrong apiVersion for a known kind",
        {"apiVersion": "resource.k8s.io/v1beta1", "kind": "ResourceClaim"},
        [
            "apiVersion: Unsupported value: 'resource.k8s.io/v1beta1': ResourceClaim must be "
            "resource.k8s.io/v1"
        ],
    ),
    (
        "unknown kind",
        {"apiVersion": "v1", "kind": "ConfigMap"},
        [
            "kind: Unsupported value: 'ConfigMap': supported kinds: DeviceClass, DeviceTaintRule, Namespace, "
            "Node, Pod, PriorityClass, ResourceClaim, ResourceClaimTemplate, ResourceQuota, ResourceSlice"
        ],
    ),
    ("missing kind", {"apiVersion": "v1"}, ["kind: Required value"]),
    ("missing apiVersion", {"kind": "Pod"}, ["apiVersion: Required value"]),
    ("not an object", ["a"], ["<root>: Invalid value: list: must be an object"]),
    (
        "a string where a list belongs",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "spec": {"devices": {"requests": "gpu"}},
        },
        ["spec.devices.requests: Invalid value: 'gpu': must be a list"],
    ),
    (
        "a string where a number belongs",
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "spec": {"pool": {"generation": "1"}}},
        ["spec.pool.generation: Invalid value: '1': must be an integer"],
    ),
    (
        "a float where an integer belongs",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "spec": {"devices": {"requests": [{"name": "r", "exactly": {"count": 1.5}}]}},
        },
        ["spec.devices.requests[0].exactly.count: Invalid value: 1.5: must be an integer"],
    ),
    (
        "a string where a boolean belongs",
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "spec": {"allNodes": "true"}},
        ["spec.allNodes: Invalid value: 'true': must be a boolean"],
    ),
    (
        "a number where a string belongs",
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": 5}},
        ["metadata.name: Invalid value: 5: must be a string"],
    ),
    (
        "a list where an object belongs, inside a map",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "spec": {"devices": [{"name": "d", "attributes": {"a": []}}]},
        },
        ["spec.devices[0].attributes.a: Invalid value: list: must be an object"],
    ),
    (
        "two problems, two lines",
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "spec": {"allNodes": 1, "devices": {}}},
        [
            "spec.allNodes: Invalid value: 1: must be a boolean",
            "spec.devices: Invalid value: object: must be a list",
        ],
    ),
]


@pytest.mark.parametrize(("data", "problems"), [pytest.param(d, p, id=name) for name, d, p in BAD])
def test_decode_errors_name_the_field(data: Any, problems: list[str]) -> None:
    with pytest.raises(DecodeError) as caught:
        decode(data)
    assert caught.value.problems == problems


def test_a_missing_capacity_value_is_the_zero_quantity() -> None:
    """Go decodes a missing resource.Quantity as its zero value ("0"), and nothing requires one, so
    the API server accepts such a device; it is not a decoding error."""
    obj = decode(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "spec": {"devices": [{"name": "d", "capacity": {"m": {}}}]},
        }
    )
    assert isinstance(obj, ResourceSlice) and obj.spec.devices is not None
    capacity = obj.spec.devices[0].capacity
    assert capacity is not None and str(capacity["m"].value) == "0"
    assert obj.to_json()["spec"]["devices"][0]["capacity"] == {"m": {}}


def test_bad_quantity_names_the_field() -> None:
    data = {"apiVersion": "v1", "kind": "Node", "status": {"allocatable": {"cpu": "lots"}}}
    with pytest.raises(DecodeError) as caught:
        decode(data)
    (problem,) = caught.value.problems
    assert problem.startswith("status.allocatable.cpu: Invalid value: 'lots': ")
