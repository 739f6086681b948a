"""DeviceClass, ResourceClaimTemplate, DeviceTaintRule and the DRA parts of a Pod."""

from __future__ import annotations

from typing import Any

import pytest
from dra_objects import (
    DNS_LABEL_MSG,
    DNS_SUBDOMAIN_MSG,
    LABEL_NAME_MSG,
    changed,
    device_class,
    exact,
    lines,
    opaque,
    taint_rule,
    template,
)

SELECTOR = {"cel": {"expression": 'device.driver == "dra.example.com"'}}


# --- DeviceClass ----------------------------------------------------------------------------------------

CLASS_CASES: list[tuple[str, dict[str, Any], list[str]]] = [
    (
        "selectors, config and extended resource",
        device_class(selectors=[SELECTOR], config=[opaque()], extendedResourceName="example.com/gpu"),
        [],
    ),
    (
        "name not a subdomain",
        device_class("GPU"),
        [f'metadata.name: Invalid value: "GPU": {DNS_SUBDOMAIN_MSG}'],
    ),
    (
        "more than 32 selectors",
        device_class(selectors=[SELECTOR] * 33),
        ["spec.selectors: Too many: 33: must have at most 32 items"],
    ),
    ("selector without cel", device_class(selectors=[{}]), ["spec.selectors[0].cel: Required value"]),
    (
        "more than 32 config entries",
        device_class(config=[opaque()] * 33),
        ["spec.config: Too many: 33: must have at most 32 items"],
    ),
    ("config without opaque", device_class(config=[{}]), ["spec.config[0].opaque: Required value"]),
    (
        "native resource as extended resource name",
        device_class(extendedResourceName="cpu"),
        ['spec.extendedResourceName: Invalid value: "cpu": must be a valid extended resource name'],
    ),
    (
        "kubernetes.io domain",
        device_class(extendedResourceName="kubernetes.io/gpu"),
        [
            'spec.extendedResourceName: Invalid value: "kubernetes.io/gpu": must be a valid extended '
            "resource name"
        ],
    ),
    (
        "requests. prefix",
        device_class(extendedResourceName="requests.example.com/gpu"),
        [
            'spec.extendedResourceName: Invalid value: "requests.example.com/gpu": '
            "must be a valid extended resource name"
        ],
    ),
]


@pytest.mark.parametrize(("obj", "expected"), [pytest.param(o, e, id=name) for name, o, e in CLASS_CASES])
def test_device_class(obj: dict[str, Any], expected: list[str]) -> None:
    assert lines(obj) == expected


def test_class_config_parameters_are_stored_when_the_config_is_unchanged() -> None:
    big = device_class(config=[opaque(parameters={"data": "x" * 10240})])
    assert lines(big) == ["spec.config[0].opaque.parameters: Too long: may not be more than 10240 bytes"]
    assert lines(changed(big, "spec.selectors", [SELECTOR]), big) == []
    assert lines(changed(big, "spec.config", [opaque(), *big["spec"]["config"]]), big) == [
        "spec.config[1].opaque.parameters: Too long: may not be more than 10240 bytes"
    ]


def test_class_name_cannot_change() -> None:
    old = device_class()
    assert lines(changed(old, "metadata.name", "other"), old) == [
        'metadata.name: Invalid value: "other": field is immutable'
    ]


# --- ResourceClaimTemplate -----------------------------------------------------------------------------

TEMPLATE_CASES: list[tuple[str, dict[str, Any], list[str]]] = [
    (
        "labels and annotations",
        template(exact(), metadata={"labels": {"a": "b"}, "annotations": {"c": "d"}}),
        [],
    ),
    (
        "spec errors carry the spec.spec prefix",
        template(exact(count=0, allocationMode="All", device_class="")),
        ["spec.spec.devices.requests[0].exactly.deviceClassName: Required value"],
    ),
    (
        # validateFieldAllowList (pkg/apis/core/validation) compares each Go field with its zero
        # value and names it by its Go name with the first letter lowered: UID is "uID"; an empty
        # list is not a nil one and a pointer to 0 is not a nil pointer, so both count as set.
        "metadata set to empty lists or zero pointers",
        template(
            exact(),
            metadata={
                "uid": "u",
                "generation": 0,
                "deletionGracePeriodSeconds": 0,
                "ownerReferences": [],
                "finalizers": [],
                "creationTimestamp": None,
            },
        ),
        [
            "spec.metadata.uID: Forbidden: cannot be set",
            "spec.metadata.deletionGracePeriodSeconds: Forbidden: cannot be set",
            "spec.metadata.ownerReferences: Forbidden: cannot be set",
            "spec.metadata.finalizers: Forbidden: cannot be set",
        ],
    ),
    (
        "other metadata cannot be set",
        template(
            exact(), metadata={"name": "x", "namespace": "y", "finalizers": ["f"], "labels": {"a b": "c"}}
        ),
        [
            f'spec.metadata.labels: Invalid value: "a b": {LABEL_NAME_MSG}',
            "spec.metadata.name: Forbidden: cannot be set",
            "spec.metadata.namespace: Forbidden: cannot be set",
            "spec.metadata.finalizers: Forbidden: cannot be set",
        ],
    ),
    (
        "admin access outside an admin namespace, under upstream's claim path",
        template(exact(adminAccess=True)),
        [
            "spec.devices.requests[0].adminAccess: Forbidden: admin access to devices requires the "
            "`resource.kubernetes.io/admin-access: true` label on the containing namespace"
        ],
    ),
]


@pytest.mark.parametrize(("obj", "expected"), [pytest.param(o, e, id=name) for name, o, e in TEMPLATE_CASES])
def test_template(obj: dict[str, Any], expected: list[str]) -> None:
    assert lines(obj, labels={}) == expected


def test_an_unchanged_template_is_validated_again_as_stored() -> None:
    """ValidateResourceClaimTemplateUpdate validates the (immutable) spec again, its CEL in the
    stored-expressions environment: a gated function stays valid, a bad enum does not (checked
    against kube-apiserver 1.36.2 by tests/kube/test_stored_objects.py)."""
    gated = {"cel": {"expression": 'device.attributes["dra.example.com"].model.includes("a100")'}}
    listed = template(exact(selectors=[gated]))
    assert lines(listed, labels={}) != [] and lines(listed, listed, labels={}) == []
    broken = template(exact(allocationMode="Exactcount"))
    assert [line.split(": ")[0] for line in lines(broken, broken, labels={})] == [
        "spec.spec.devices.requests[0].exactly.allocationMode"
    ]


def test_template_spec_is_immutable() -> None:
    old = template(exact())
    # The internal ResourceClaimTemplateSpec with %#v: metav1.ObjectMeta in full (a zero time prints
    # through time.Time's GoString, a nil *Time as <nil>), then the claim spec.
    assert lines(changed(old, "spec.metadata", {"labels": {"a": "b"}}), old) == [
        "spec: Invalid value: resource.ResourceClaimTemplateSpec{ObjectMeta:v1.ObjectMeta{"
        'Name:"", GenerateName:"", Namespace:"", SelfLink:"", UID:"", ResourceVersion:"", Generation:0, '
        "CreationTimestamp:time.Date(1, time.January, 1, 0, 0, 0, 0, time.UTC), DeletionTimestamp:<nil>, "
        'DeletionGracePeriodSeconds:(*int64)(nil), Labels:map[string]string{"a":"b"}, '
        "Annotations:map[string]string(nil), OwnerReferences:[]v1.OwnerReference(nil), "
        "Finalizers:[]string(nil), ManagedFields:[]v1.ManagedFieldsEntry(nil)}, "
        "Spec:resource.ResourceClaimSpec{Devices:resource.DeviceClaim{Requests:"
        '[]resource.DeviceRequest{resource.DeviceRequest{Name:"req-0", '
        "Exactly:(*resource.ExactDeviceRequest)(0xc000000000), "
        "FirstAvailable:[]resource.DeviceSubRequest(nil)}}, "
        "Constraints:[]resource.DeviceConstraint(nil), Config:[]resource.DeviceClaimConfiguration(nil)}}}: "
        "field is immutable"
    ]


# --- DeviceTaintRule -----------------------------------------------------------------------------------

TAINT = {"key": "example.com/broken", "effect": "NoExecute"}

TAINT_RULE_CASES: list[tuple[str, dict[str, Any], list[str]]] = [
    ("taint for one device", taint_rule(TAINT, {"driver": "d.io", "pool": "p/q", "device": "d-0"}), []),
    (
        "bad selector",
        taint_rule(TAINT, {"driver": "", "pool": "P", "device": "D"}),
        [
            "spec.deviceSelector.driver: Required value",
            f'spec.deviceSelector.pool: Invalid value: "P": {DNS_SUBDOMAIN_MSG}',
            f'spec.deviceSelector.device: Invalid value: "D": {DNS_LABEL_MSG}',
        ],
    ),
    (
        "bad taint",
        taint_rule({"key": "k", "value": "a b", "effect": "Evict"}),
        [
            'spec.taint.value: Invalid value: "a b": a valid label must be an empty string or consist of '
            "alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character "
            "(e.g. "
            "'MyValue',  or 'my_value',  or '12345', regex used for validation is "
            "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
            'spec.taint.effect: Unsupported value: "Evict": supported values: "NoExecute", "NoSchedule", '
            '"None"',
        ],
    ),
    (
        "more than 8 conditions",
        taint_rule(
            TAINT,
            status={
                "conditions": [
                    {
                        "type": f"T{i}",
                        "status": "True",
                        "reason": "R",
                        "lastTransitionTime": "2026-01-01T00:00:00Z",
                    }
                    for i in range(9)
                ]
            },
        ),
        ["status.conditions: Too many: 9: must have at most 8 items"],
    ),
]


@pytest.mark.parametrize(
    ("obj", "expected"), [pytest.param(o, e, id=name) for name, o, e in TAINT_RULE_CASES]
)
def test_taint_rule(obj: dict[str, Any], expected: list[str]) -> None:
    assert lines(obj) == expected


def test_taint_rule_v1beta2_is_validated_the_same() -> None:
    rule = {**taint_rule({"key": "k", "effect": ""}), "apiVersion": "resource.k8s.io/v1beta2"}
    assert lines(rule) == ["spec.taint.effect: Required value"]


def test_unchanged_unknown_effect_is_accepted_on_update() -> None:
    """Effects added by a newer release must survive updates that do not touch them."""
    old = taint_rule({"key": "k", "effect": "FutureEffect"})
    assert lines(changed(old, "spec.taint.value", "v"), old) == []
    assert lines(changed(old, "spec.taint.effect", "Other"), old) == [
        'spec.taint.effect: Unsupported value: "Other": supported values: "NoExecute", "NoSchedule", "None"'
    ]


# --- Pod -----------------------------------------------------------------------------------------------


def pod(claims: list[dict[str, Any]], *containers: dict[str, Any], **extra: Any) -> dict[str, Any]:
    spec = {
        "resourceClaims": claims,
        "containers": list(containers) or [{"name": "c", "image": "i"}],
        **extra,
    }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "pod", "namespace": "ns"}, "spec": spec}


def container(*claims: dict[str, Any]) -> dict[str, Any]:
    return {"name": "c", "image": "i", "resources": {"claims": list(claims)}}


POD_CASES: list[tuple[str, dict[str, Any], list[str]]] = [
    (
        "claims referenced by containers",
        pod(
            [{"name": "gpu", "resourceClaimName": "c"}, {"name": "nic", "resourceClaimTemplateName": "t"}],
            container({"name": "gpu"}, {"name": "nic", "request": "req-0"}),
        ),
        [],
    ),
    (
        "claim names",
        pod([{"name": "", "resourceClaimName": "c"}, {"name": "A", "resourceClaimName": "c"}]),
        [
            "spec.resourceClaims[0].name: Required value",
            f'spec.resourceClaims[1].name: Invalid value: "A": {DNS_LABEL_MSG}',
        ],
    ),
    (
        "duplicate claim names",
        pod([{"name": "gpu", "resourceClaimName": "c"}, {"name": "gpu", "resourceClaimName": "d"}]),
        ['spec.resourceClaims[1].name: Duplicate value: "gpu"'],
    ),
    (
        "no source, two sources",
        pod([{"name": "a"}, {"name": "b", "resourceClaimName": "C", "resourceClaimTemplateName": "t"}]),
        [
            # core validatePodResourceClaim passes the internal struct: Go prints it with %#v (a set
            # pointer shows an address, which no two API servers agree on).
            'spec.resourceClaims[0]: Invalid value: core.PodResourceClaim{Name:"a", '
            "ResourceClaimName:(*string)(nil), ResourceClaimTemplateName:(*string)(nil)}: "
            "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`",
            'spec.resourceClaims[1]: Invalid value: core.PodResourceClaim{Name:"b", '
            "ResourceClaimName:(*string)(0xc000000000), ResourceClaimTemplateName:(*string)(0xc000000000)}: "
            "at most one of `resourceClaimName` or `resourceClaimTemplateName` may be specified",
            f'spec.resourceClaims[1].resourceClaimName: Invalid value: "C": {DNS_SUBDOMAIN_MSG}',
        ],
    ),
    (
        "generated claim name too long",
        {**pod([{"name": "gpu", "resourceClaimTemplateName": "t"}]), "metadata": {"name": "p" * 250}},
        [
            f'spec.resourceClaims[0].name: Invalid value: "{"p" * 250}-gpu": final ResourceClaim name: '
            "must be no more than 253 bytes"
        ],
    ),
    (
        "container references",
        pod(
            [{"name": "gpu", "resourceClaimName": "c"}],
            container(
                {"name": "gpu"},
                {"name": "gpu"},
                {"name": "nic"},
                {"name": ""},
                {"name": "gpu", "request": "R"},
            ),
        ),
        [
            'spec.containers[0].resources.claims[1]: Duplicate value: "gpu"',
            'spec.containers[0].resources.claims[2]: Not found: "nic": must be one of the names in '
            "pod.spec.resourceClaims: gpu",
            "spec.containers[0].resources.claims[3]: Required value",
            f'spec.containers[0].resources.claims[4].request: Invalid value: "R": {DNS_LABEL_MSG}',
        ],
    ),
    (
        # validateResourceClaimNames: an empty name is the only error reported for its entry.
        "reference without a name but with a bad request",
        pod([{"name": "gpu", "resourceClaimName": "c"}], container({"name": "", "request": "R"})),
        ["spec.containers[0].resources.claims[0]: Required value"],
    ),
    (
        "reference without pod claims",
        pod([], {"name": "init", "image": "i", "resources": {"claims": [{"name": "gpu"}]}}),
        [
            'spec.containers[0].resources.claims[0]: Not found: "gpu": must be one of the names in '
            "pod.spec.resourceClaims which is empty"
        ],
    ),
    (
        "init containers are checked too",
        pod(
            [],
            {"name": "c", "image": "i"},
            initContainers=[{"name": "i", "image": "i", "resources": {"claims": [{"name": "x"}]}}],
        ),
        [
            'spec.initContainers[0].resources.claims[0]: Not found: "x": must be one of the names in '
            "pod.spec.resourceClaims which is empty"
        ],
    ),
    (
        "pod-level claims",
        pod([{"name": "gpu", "resourceClaimName": "c"}], resources={"claims": [{"name": "gpu"}]}),
        ["spec.resources.claims: Forbidden: claims may not be specified at the pod level"],
    ),
    (
        "claim statuses",
        {
            **pod([{"name": "gpu", "resourceClaimTemplateName": "t"}]),
            "status": {
                "resourceClaimStatuses": [
                    {"name": "gpu", "resourceClaimName": "pod-gpu-x1"},
                    {"name": "gpu"},
                    {"name": "nic", "resourceClaimName": "Bad"},
                ]
            },
        },
        [
            'status.resourceClaimStatuses[1].name: Duplicate value: "gpu"',
            'status.resourceClaimStatuses[2].name: Invalid value: "nic": must match the name of an entry in '
            "`spec.resourceClaims`",
            f'status.resourceClaimStatuses[2].name: Invalid value: "Bad": {DNS_SUBDOMAIN_MSG}',
        ],
    ),
]


@pytest.mark.parametrize(("obj", "expected"), [pytest.param(o, e, id=name) for name, o, e in POD_CASES])
def test_pod(obj: dict[str, Any], expected: list[str]) -> None:
    assert lines(obj) == expected


def test_core_kinds_metadata_is_checked_too() -> None:
    assert lines({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a.b"}}) == [
        'metadata.name: Invalid value: "a.b": must not contain dots'
    ]
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "node-1"},
        "status": {"allocatable": {"cpu": "4"}},
    }
    assert lines(node) == []


# --- Node, Namespace, ResourceQuota past their metadata (tests/kube/test_core_kinds_agreement.py
# holds them to kube-apiserver 1.36.2 case by case) -----------------------------------------------


def test_the_quota_and_node_of_issue_28_are_refused() -> None:
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "q", "namespace": "team-a"},
        "spec": {"hard": {"cpu": "-1", "a/b/c": "1"}, "scopes": ["Bogus"]},
    }
    found = lines(quota)
    assert 'spec.hard[cpu]: Invalid value: "-1": must be greater than or equal to 0' in found
    label_key = 'spec.hard[a/b/c]: Invalid value: "a/b/c": a valid label key'
    assert any(line.startswith(label_key) for line in found)
    assert 'spec.scopes: Invalid value: ["Bogus"]: unsupported scope' in found
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "node-1"},
        "spec": {"podCIDR": "notacidr", "taints": [{"key": "k", "effect": "Bogus"}]},
    }
    assert lines(node) == [
        'metadata.taints[0].effect: Unsupported value: "Bogus": supported values: "NoSchedule", '
        '"PreferNoSchedule", "NoExecute"',
        'spec.podCIDRs[0]: Invalid value: "notacidr": must be a valid CIDR value, (e.g. 10.9.8.0/24 or '
        "2001:db8::/64)",
    ]


def test_updates_keep_what_the_api_server_keeps() -> None:
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "q", "namespace": "team-a"},
        "spec": {"hard": {"pods": "2"}, "scopes": ["Terminating"]},
    }
    assert lines(changed(quota, "spec", {"hard": {"pods": "3"}, "scopes": ["NotTerminating"]}), quota) == [
        'spec.scopes: Invalid value: ["NotTerminating"]: field is immutable'
    ]
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "node-1"},
        "spec": {"podCIDRs": ["10.244.1.0/24"], "providerID": "cloud://1"},
    }
    assert lines(changed(node, "spec", {"podCIDRs": ["10.244.2.0/24"], "providerID": "cloud://1"}), node) == [
        'spec.podCIDRs: Forbidden: node updates may not change podCIDR except from "" to valid'
    ]
    assert lines(changed(node, "spec", {"podCIDRs": ["10.244.1.0/24"], "providerID": "cloud://2"}), node) == [
        'spec.providerID: Forbidden: node updates may not change providerID except from "" to valid'
    ]
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}}
    assert lines(changed(namespace, "spec", {"finalizers": ["bogus"]}), namespace) == []  # create-only
