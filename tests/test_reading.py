"""What a document is to draguard (``policies.reading``): every kind and version accounted for as a
default Kubernetes 1.36 API server accounts for it."""

from __future__ import annotations

from typing import Any

import pytest

from policies.api.core import Pod
from policies.api.resource import DeviceTaintRule, ResourceClaim
from policies.api.runtimeconfig import RuntimeConfig
from policies.reading import CUSTOM_RESOURCE, NOT_CHECKED, ReadOptions, read

CLAIM_V1BETA1 = {
    "apiVersion": "resource.k8s.io/v1beta1",
    "kind": "ResourceClaim",
    "metadata": {"name": "c", "namespace": "ns"},
    "spec": {"devices": {"requests": [{"name": "gpu", "deviceClassName": "gpu.example.com"}]}},
}


def deployment(template_spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "team-a"},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": template_spec},
        },
    }


def test_older_dra_versions_are_refused_naming_the_version_and_the_fix() -> None:
    (error,) = read(CLAIM_V1BETA1).errors
    assert error.startswith('apiVersion: Unsupported value: "resource.k8s.io/v1beta1": not served by default')
    assert "since resource.k8s.io/v1 went GA" in error
    assert "draguard convert -f FILE" in error and "--api-versions resource.k8s.io/v1beta1" in error


def test_api_versions_accepts_them_converted() -> None:
    reading = read(CLAIM_V1BETA1, ReadOptions(api_versions=RuntimeConfig.parse(["resource.k8s.io/v1beta1"])))
    assert reading.errors == []
    assert isinstance(reading.obj, ResourceClaim) and reading.obj.api_version == "resource.k8s.io/v1"
    exactly = reading.obj.spec.devices.requests[0].exactly  # type: ignore[index]
    assert exactly is not None and exactly.device_class_name == "gpu.example.com"


def test_strict_decoding_happens_in_the_version_written() -> None:
    """A v1beta1 request is flat: its fields are known there, and unknown fields are named with
    the path the user wrote, before any conversion."""
    raw = {**CLAIM_V1BETA1, "spec": {"devices": {"requests": [{"name": "g", "deviceClassNam": "x"}]}}}
    reading = read(raw, ReadOptions(api_versions=RuntimeConfig.parse(["resource.k8s.io/v1beta1"])))
    assert reading.errors == [
        'unknown field "spec.devices.requests[0].deviceClassNam": did you mean "deviceClassName"?'
    ]


def test_device_taint_rules_need_their_version_turned_on() -> None:
    rule = {
        "apiVersion": "resource.k8s.io/v1beta2",
        "kind": "DeviceTaintRule",
        "metadata": {"name": "r"},
        "spec": {"taint": {"key": "k", "effect": "NoSchedule"}},
    }
    (error,) = read(rule).errors
    assert "DRADeviceTaintRules" in error
    assert "--api-versions resource.k8s.io/v1beta2/devicetaintrules=true" in error
    assert isinstance(
        read(rule, ReadOptions(api_versions=RuntimeConfig.parse([rule["apiVersion"]]))).obj, DeviceTaintRule
    )
    alpha = {**rule, "apiVersion": "resource.k8s.io/v1alpha3"}
    converted = read(alpha, ReadOptions(api_versions=RuntimeConfig.parse(["resource.k8s.io/v1alpha3"]))).obj
    assert isinstance(converted, DeviceTaintRule) and converted.api_version == "resource.k8s.io/v1beta2"


@pytest.mark.parametrize(
    ("api_version", "kind", "expected"),
    [
        (
            "resource.k8s.io/v1alpha2",
            "ResourceClass",
            'apiVersion: Unsupported value: "resource.k8s.io/v1alpha2": classic DRA was removed in '
            "Kubernetes 1.31; ResourceClass is replaced by DeviceClass (resource.k8s.io/v1)",
        ),
        (
            "resource.k8s.io/v1alpha2",
            "ResourceClaim",
            'apiVersion: Unsupported value: "resource.k8s.io/v1alpha2": classic DRA was removed in '
            "Kubernetes 1.31; write it as a resource.k8s.io/v1 ResourceClaim, whose requests name a "
            "DeviceClass",
        ),
        (
            "extensions/v1beta1",
            "Deployment",
            'apiVersion: Unsupported value: "extensions/v1beta1": Kubernetes 1.36 serves Deployment as '
            "apps/v1",
        ),
        (
            "core/v1",
            "Pod",
            'apiVersion: Unsupported value: "core/v1": Kubernetes 1.36 serves Pod as v1',
        ),
        (
            "apps/v1",
            "Deploymnet",
            'kind: Unsupported value: "Deploymnet": no such kind in apps/v1 (did you mean "Deployment"?)',
        ),
        (
            "resource.k8s.io/v1alpha3",
            "DeviceClass",
            'apiVersion: Unsupported value: "resource.k8s.io/v1alpha3": Kubernetes 1.36 serves '
            "DeviceClass as resource.k8s.io/v1",
        ),
    ],
)
def test_what_1_36_does_not_serve_is_an_error(api_version: str, kind: str, expected: str) -> None:
    reading = read({"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}})
    assert reading.errors == [expected] and reading.skipped is None


@pytest.mark.parametrize(
    ("api_version", "kind", "why"),
    [
        ("v1", "ConfigMap", NOT_CHECKED),
        ("rbac.authorization.k8s.io/v1", "ClusterRole", NOT_CHECKED),
        ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy", NOT_CHECKED),
        ("resource.nvidia.com/v1beta1", "ComputeDomain", CUSTOM_RESOURCE),
        ("kubeflow.org/v2beta1", "MPIJob", CUSTOM_RESOURCE),
        ("scheduling.x-k8s.io/v1alpha1", "PodGroup", CUSTOM_RESOURCE),
        ("gateway.networking.k8s.io/v1", "Gateway", CUSTOM_RESOURCE),
    ],
)
def test_other_kinds_are_skipped_or_refused_on_request(api_version: str, kind: str, why: str) -> None:
    raw = {"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}, "spec": {"anything": 1}}
    reading = read(raw)
    assert (reading.skipped, reading.errors, reading.obj) == (why, [], None)
    assert read(raw, ReadOptions(skip_kinds=frozenset({kind}))).skipped == "--skip-kinds"
    (error,) = read(raw, ReadOptions(strict_kinds=True)).errors
    assert error == f'kind: Unsupported value: "{kind}": {why} (--strict-kinds)'


def test_a_workload_template_is_read_as_its_pod() -> None:
    spec = {
        "containers": [{"name": "c", "image": "i"}],
        "resourceClaims": [{"name": "g", "resourceClaimTemplateName": "t"}],
    }
    reading = read(deployment(spec))
    assert reading.errors == [] and reading.template == ("spec", "template")
    pod = reading.obj
    assert isinstance(pod, Pod)
    assert (pod.name, pod.namespace, pod.metadata.labels) == ("web", "team-a", {"app": "web"})
    assert (
        pod.spec.resource_claims is not None
        and pod.spec.resource_claims[0].resource_claim_template_name == "t"
    )


def test_a_workload_is_decoded_strictly_as_a_whole() -> None:
    reading = read(deployment({"containers": [{"name": "c", "image": "i", "imagePullPolice": "Always"}]}))
    assert reading.errors == [
        'unknown field "spec.template.spec.containers[0].imagePullPolice": did you mean "imagePullPolicy"?'
    ]
    assert reading.obj is None


def test_unknown_fields_as_warnings_or_ignored_but_wrong_types_always_fail() -> None:
    raw = deployment({"nodeNme": "n", "containers": [{"name": "c", "image": "i"}]})
    warned = read(raw, ReadOptions(unknown_fields="warn"))
    assert (warned.errors, warned.warnings) == (
        [],
        ['unknown field "spec.template.spec.nodeNme": did you mean "nodeName"?'],
    )
    ignored = read(raw, ReadOptions(unknown_fields="ignore"))
    assert (ignored.errors, ignored.warnings) == ([], [])
    raw["spec"]["replicas"] = "3"
    assert read(raw, ReadOptions(unknown_fields="ignore")).errors == [
        'spec.replicas: Invalid value: "3": must be an integer'
    ]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("text", '<root>: Invalid value: "text": must be an object'),
        ({"apiVersion": "v1"}, "kind: Required value: every Kubernetes object names its kind"),
        ({"kind": "Pod"}, "apiVersion: Required value: every Kubernetes object names its apiVersion"),
    ],
)
def test_what_is_not_an_object(raw: Any, expected: str) -> None:
    assert read(raw).errors == [expected]
