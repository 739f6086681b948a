"""Strict decoding against the API server's field table: unknown and duplicate fields, JSON types,
worded as kube-apiserver 1.36.2 words them (``strict decoding error: unknown field "spec.nodeNme"``,
checked by hand against the real server with ``fieldValidation=Strict``)."""

from __future__ import annotations

from typing import Any

import pytest

from policies.api import schema
from policies.api.schema import DuplicateKeys
from policies.validation.fielderrors import render
from policies.validation.strict import strict_errors


def lines(raw: Any, type_name: str) -> list[str]:
    return render(strict_errors(raw, type_name))


def pod(spec: dict[str, Any], **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", **meta}, "spec": spec}


CONTAINER = {"name": "c", "image": "registry.example.com/app:1"}


def test_a_complete_pod_has_nothing_unknown() -> None:
    spec = {
        "containers": [
            {
                **CONTAINER,
                "ports": [{"containerPort": 80, "protocol": "TCP"}],
                "resources": {"limits": {"cpu": 1.5, "memory": "1Gi"}, "claims": [{"name": "gpu"}]},
                "livenessProbe": {"httpGet": {"path": "/", "port": "http"}},
                "env": [{"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
            }
        ],
        "volumes": [{"name": "v", "emptyDir": {}}],
        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    }
    assert lines(pod(spec, labels={"app": "x"}), "core.v1.Pod") == []


def test_unknown_fields_anywhere_in_a_pod_are_named_with_their_path_and_the_closest_field() -> None:
    spec = {
        "nodeNme": "n",
        "containers": [{**CONTAINER, "resources": {"claims": [{"name": "gpu", "requests": "gpu"}]}}],
        "resourceClaims": [{"name": "gpu", "resourceClaimTemplate": "t"}],
    }
    assert lines(pod(spec, labelz={}), "core.v1.Pod") == [
        'unknown field "metadata.labelz": did you mean "labels"?',
        'unknown field "spec.nodeNme": did you mean "nodeName"?',
        'unknown field "spec.containers[0].resources.claims[0].requests": did you mean "request"?',
        'unknown field "spec.resourceClaims[0].resourceClaimTemplate": did you mean '
        '"resourceClaimTemplateName"?',
    ]


def test_the_removed_source_field_names_what_replaced_it() -> None:
    spec = {
        "containers": [CONTAINER],
        "resourceClaims": [{"name": "gpu", "source": {"resourceClaimName": "c"}}],
    }
    assert lines(pod(spec), "core.v1.Pod") == [
        'unknown field "spec.resourceClaims[0].source": removed in Kubernetes 1.31: write resourceClaimName '
        "or resourceClaimTemplateName in the entry itself"
    ]


def test_v1beta1_request_fields_in_a_v1_claim_say_where_they_go() -> None:
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "c"},
        "spec": {"devices": {"requests": [{"name": "gpu", "deviceClassName": "gpu.example.com"}]}},
    }
    assert lines(claim, "resource.v1.ResourceClaim") == [
        'unknown field "spec.devices.requests[0].deviceClassName": in resource.k8s.io/v1 deviceClassName '
        "goes under exactly: (a request had it directly in v1beta1)"
    ]


def test_map_entries_are_named_like_fields_and_opaque_parameters_hold_anything() -> None:
    slice_ = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "s"},
        "spec": {
            "driver": "gpu.example.com",
            "nodeName": "n",
            "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "d", "attributes": {"model": {"string": "x", "foo": 1}}}],
        },
    }
    assert lines(slice_, "resource.v1.ResourceSlice") == [
        'unknown field "spec.devices[0].attributes.model.foo"'
    ]
    config = {"opaque": {"driver": "gpu.example.com", "parameters": {"anything": {"goes": [1, None]}}}}
    cls = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "c"},
        "spec": {"config": [config]},
    }
    assert lines(cls, "resource.v1.DeviceClass") == []


def test_duplicate_keys_are_duplicate_fields() -> None:
    meta = DuplicateKeys({"name": "q"}, duplicates=("name",))
    container = DuplicateKeys({"name": "c", "image": "j"}, duplicates=("image",))
    raw = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"containers": [container]}}
    assert lines(raw, "core.v1.Pod") == [
        'duplicate field "metadata.name"',
        'duplicate field "spec.containers[0].image"',
    ]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"replicas": "2"}, 'spec.replicas: Invalid value: "2": must be an integer'),
        ({"replicas": 2.0}, "spec.replicas: Invalid value: 2: must be an integer"),
        ({"replicas": True}, "spec.replicas: Invalid value: true: must be an integer"),
        ({"paused": "yes"}, 'spec.paused: Invalid value: "yes": must be a boolean'),
        ({"selector": ["app"]}, "spec.selector: Invalid value: list: must be an object"),
        (
            {"selector": {"matchLabels": {"app": 1}}},
            "spec.selector.matchLabels.app: Invalid value: 1: must be a string",
        ),
        (
            {"strategy": {"rollingUpdate": {"maxSurge": True}}},
            "spec.strategy.rollingUpdate.maxSurge: Invalid value: true: must be an integer or a string",
        ),
    ],
)
def test_json_types_the_decoder_refuses(spec: dict[str, Any], expected: str) -> None:
    raw = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": spec}
    assert lines(raw, "apps.v1.Deployment") == [expected]


def test_null_is_every_field_s_zero_value() -> None:
    raw = pod({"nodeName": None, "containers": [CONTAINER]}, labels=None)
    assert lines(raw, "core.v1.Pod") == []


def test_ints_and_strings_and_quantities_where_they_may_be() -> None:
    spec = {
        "containers": [
            {
                **CONTAINER,
                "ports": [{"containerPort": 8080}],
                "readinessProbe": {"tcpSocket": {"port": 8080}},
                "resources": {"limits": {"nvidia.com/gpu": 1, "memory": "1Gi"}},
            }
        ]
    }
    assert lines(pod(spec), "core.v1.Pod") == []
    spec["containers"][0]["resources"] = {"limits": {"memory": True}}
    assert lines(pod(spec), "core.v1.Pod") == [
        "spec.containers[0].resources.limits.memory: Invalid value: true: must be a quantity (a string "
        "such as 1Gi, or a number)"
    ]


def test_the_table_covers_the_kinds_draguard_checks() -> None:
    for api_version, kind in [
        ("v1", "Pod"),
        ("apps/v1", "Deployment"),
        ("batch/v1", "CronJob"),
        ("resource.k8s.io/v1", "ResourceClaim"),
        ("resource.k8s.io/v1beta1", "ResourceSlice"),
        ("resource.k8s.io/v1beta2", "DeviceTaintRule"),
    ]:
        type_name = schema.object_type(api_version, kind)
        assert type_name is not None and schema.is_struct(type_name), (api_version, kind)
    assert schema.object_type("v1", "ConfigMap") is None  # served, but not a kind draguard checks
    assert schema.is_namespaced("v1", "ConfigMap") is True
    assert schema.is_namespaced("resource.k8s.io/v1", "DeviceClass") is False
