"""Older resource.k8s.io versions converted as the 1.36 API server converts them
(``pkg/apis/resource/v1beta1/conversion.go``; v1beta2 and v1alpha3 DeviceTaintRule are v1's and
v1beta2's shape field for field)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from policies.api.conversion import convert, target_version


def claim(api_version: str, *requests: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "ns"},
        "spec": {"devices": {"requests": list(requests)}},
    }


def test_v1beta1_flat_request_moves_under_exactly_in_v1_order() -> None:
    request = {
        "name": "gpu",
        "count": 2,
        "deviceClassName": "gpu.example.com",
        "selectors": [{"cel": {"expression": "true"}}],
        "tolerations": [{"key": "k", "operator": "Exists"}],
    }
    out = convert(claim("resource.k8s.io/v1beta1", request))
    assert out["apiVersion"] == "resource.k8s.io/v1"
    (converted,) = out["spec"]["devices"]["requests"]
    assert converted == {
        "name": "gpu",
        "exactly": {
            "deviceClassName": "gpu.example.com",
            "selectors": [{"cel": {"expression": "true"}}],
            "count": 2,
            "tolerations": [{"key": "k", "operator": "Exists"}],
        },
    }
    assert list(converted["exactly"]) == ["deviceClassName", "selectors", "count", "tolerations"]


@pytest.mark.parametrize(
    ("request_", "exactly"),
    [
        # hasAnyMainRequestFieldsSet: a non-nil pointer or slice is "set", even false or empty ...
        ({"name": "r", "adminAccess": False}, {"adminAccess": False}),
        ({"name": "r", "selectors": []}, {"selectors": []}),
        # ... a zero count or an empty string is not.
        ({"name": "r", "count": 0, "allocationMode": ""}, None),
    ],
)
def test_which_flat_fields_make_an_exactly_request(
    request_: dict[str, Any], exactly: dict[str, Any] | None
) -> None:
    (converted,) = convert(claim("resource.k8s.io/v1beta1", request_))["spec"]["devices"]["requests"]
    assert converted.get("exactly") == exactly


def test_first_available_requests_stay_as_they_are() -> None:
    request = {"name": "gpu", "firstAvailable": [{"name": "big", "deviceClassName": "big.example.com"}]}
    (converted,) = convert(claim("resource.k8s.io/v1beta1", request))["spec"]["devices"]["requests"]
    assert converted == request


def test_templates_convert_their_claim_spec() -> None:
    template = {
        "apiVersion": "resource.k8s.io/v1beta1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "t"},
        "spec": {
            "metadata": {"labels": {"a": "b"}},
            "spec": claim("x", {"name": "g", "deviceClassName": "c"})["spec"],
        },
    }
    out = convert(template)
    assert out["spec"]["metadata"] == {"labels": {"a": "b"}}
    assert out["spec"]["spec"]["devices"]["requests"] == [{"name": "g", "exactly": {"deviceClassName": "c"}}]


def test_v1beta1_slices_lose_basic_and_their_zero_node_fields() -> None:
    slice_ = {
        "apiVersion": "resource.k8s.io/v1beta1",
        "kind": "ResourceSlice",
        "metadata": {"name": "s"},
        "spec": {
            "driver": "gpu.example.com",
            "nodeName": "",
            "allNodes": False,
            "nodeSelector": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "Exists"}]}]
            },
            "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {
                    "name": "gpu-0",
                    "basic": {"attributes": {"model": {"string": "a"}}, "capacity": {"m": {"value": "1"}}},
                },
                {"name": "gpu-1"},
            ],
        },
    }
    before = copy.deepcopy(slice_)
    spec = convert(slice_)["spec"]
    assert slice_ == before  # the input is left alone
    assert "nodeName" not in spec and "allNodes" not in spec
    assert spec["devices"] == [
        {"name": "gpu-0", "attributes": {"model": {"string": "a"}}, "capacity": {"m": {"value": "1"}}},
        {"name": "gpu-1"},
    ]


def test_v1beta2_and_v1alpha3_change_only_their_version() -> None:
    request = {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}
    assert convert(claim("resource.k8s.io/v1beta2", request)) == claim("resource.k8s.io/v1", request)
    rule = {
        "apiVersion": "resource.k8s.io/v1alpha3",
        "kind": "DeviceTaintRule",
        "metadata": {"name": "r"},
        "spec": {"taint": {"key": "k", "effect": "NoSchedule"}},
    }
    assert convert(rule) == {**rule, "apiVersion": "resource.k8s.io/v1beta2"}


def test_what_is_not_converted() -> None:
    assert target_version("resource.k8s.io/v1", "ResourceClaim") is None
    assert target_version("resource.k8s.io/v1beta1", "DeviceTaintRule") is None
    with pytest.raises(ValueError, match="not converted"):
        convert({"apiVersion": "apps/v1", "kind": "Deployment"})
