"""validate() as a whole: defaulting first, unknown fields, creates versus updates, admin access."""

from __future__ import annotations

from typing import Any

import pytest
from dra_objects import (
    allocated,
    claim,
    device,
    exact,
    first_available,
    lines,
    opaque,
    resource_slice,
    result,
    sub,
)

from policies.api.kinds import decode
from policies.validation import ErrorType, validate


def test_count_zero_is_defaulted_to_one_before_validation() -> None:
    """The API server stores count 0 as 1, so "must be greater than zero" never fires for it."""
    assert lines(claim(exact(count=0))) == []
    assert lines(claim(exact(allocationMode="ExactCount", count=0))) == []


def test_defaulting_does_not_hide_negative_counts() -> None:
    assert lines(claim(exact(count=-2))) == [
        "spec.devices.requests[0].exactly.count: Invalid value: -2: must be greater than zero"
    ]


def test_toleration_operator_defaults_to_equal() -> None:
    """Defaulted to Equal, an empty operator requires a label value; with Exists it would reject one."""
    assert lines(claim(exact(tolerations=[{"key": "k", "value": "v"}]))) == []
    assert lines(claim(exact(tolerations=[{"key": "k", "value": "a b"}])))[0].startswith(
        'spec.devices.requests[0].exactly.tolerations[0].value: Invalid value: "a b": a valid label'
    )


def test_subrequests_are_defaulted_too() -> None:
    obj = claim({"name": "req-0", "firstAvailable": [{"name": "a", "deviceClassName": "gpu", "count": 0}]})
    assert lines(obj) == []


def test_validation_does_not_change_its_input() -> None:
    obj = decode(claim(exact()))
    validate(obj)
    assert obj.to_json() == claim(exact())


UNKNOWN: list[tuple[str, dict[str, Any], list[str]]] = [
    ("at the top", {**claim(exact()), "extra": 1}, ['unknown field "extra"']),
    (
        "in the spec",
        {**claim(exact()), "spec": {"devices": {"requests": [exact()]}, "foo": 1}},
        ['unknown field "spec.foo"'],
    ),
    (
        "in a request, next to a real error",
        claim({"name": "req-0", "exactly": {"deviceClass": "gpu"}}),
        [
            'unknown field "spec.devices.requests[0].exactly.deviceClass"',
            "spec.devices.requests[0].exactly.deviceClassName: Required value",
        ],
    ),
    (
        "snake_case is not an alias",
        claim({"name": "req-0", "exactly": {"deviceClassName": "gpu", "admin_access": True}}),
        ['unknown field "spec.devices.requests[0].exactly.admin_access"'],
    ),
    (
        "inside a map entry",
        resource_slice(device(attributes={"model": {"string": "a", "note": "x"}})),
        ['unknown field "spec.devices[0].attributes.model.note"'],
    ),
    (
        "in metadata",
        {**claim(exact()), "metadata": {"name": "c", "nmae": "x"}},
        ['unknown field "metadata.nmae"'],
    ),
    (
        "a 1.37 field on the 1.36 API",
        claim(exact(derivedAttributes=[{"name": "d.io/x", "expression": "1"}])),
        ['unknown field "spec.devices.requests[0].exactly.derivedAttributes"'],
    ),
]


@pytest.mark.parametrize(("obj", "expected"), [pytest.param(o, e, id=name) for name, o, e in UNKNOWN])
def test_unknown_fields(obj: dict[str, Any], expected: list[str]) -> None:
    assert lines(obj) == expected


def test_known_metadata_fields_are_not_unknown() -> None:
    meta = {
        "name": "c",
        "namespace": "ns",
        "uid": "u",
        "resourceVersion": "1",
        "generation": 2,
        "creationTimestamp": "2026-01-01T00:00:00Z",
        "managedFields": [{"manager": "kubectl", "operation": "Apply", "fieldsV1": {"f:spec": {}}}],
        "selfLink": "/x",
        "deletionGracePeriodSeconds": 30,
        "finalizers": ["resource.kubernetes.io/delete-protection"],
        "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u", "controller": True}],
    }
    assert lines({**claim(exact()), "metadata": meta}) == []


def test_opaque_parameters_may_hold_anything() -> None:
    obj = claim(exact(), config=[{"opaque": {"driver": "d.io", "parameters": {"anything": {"goes": [1]}}}}])
    assert lines(obj) == []


def test_unknown_fields_have_their_own_error_type() -> None:
    errors = validate(decode({**claim(exact()), "extra": 1}))
    assert [e.type for e in errors] == [ErrorType.UNKNOWN_FIELD]


def test_pods_carry_fields_draguard_does_not_model_without_complaint() -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {
            "containers": [{"name": "c", "image": "i", "ports": [{"containerPort": 80}]}],
            "volumes": [],
        },
    }
    assert lines(pod) == []


# --- metadata -------------------------------------------------------------------------------------------


def test_name_or_generate_name_is_required() -> None:
    obj = claim(exact())
    obj["metadata"] = {"namespace": "ns"}
    assert lines(obj) == ["metadata.name: Required value: name or generateName is required"]
    obj["metadata"]["generateName"] = "pod-gpu-"
    assert lines(obj) == []


def test_generate_name_trailing_dash_is_masked_like_upstream() -> None:
    """apimachinery maskTrailingDash (pkg/api/validation/generic.go) replaces the *last two*
    characters of a dash-terminated prefix with "a", so the character before the dash is never
    checked: "gpu.-" is accepted, and "gpu_-" too; a lone "-" is left as it is and rejected."""
    obj = claim(exact())
    for prefix in ("gpu.-", "gpu_-", "gpu--"):
        obj["metadata"] = {"namespace": "ns", "generateName": prefix}
        assert lines(obj) == [], prefix
    obj["metadata"] = {"namespace": "ns", "generateName": "-"}
    assert lines(obj)[0].startswith('metadata.generateName: Invalid value: "-": a lowercase RFC 1123')
    obj["metadata"] = {"namespace": "ns", "generateName": "Gpu-"}
    assert lines(obj)[0].startswith('metadata.generateName: Invalid value: "Gpu-": a lowercase RFC 1123')


def test_metadata_labels_annotations_namespace_generation() -> None:
    obj = claim(exact(), namespace="Team_A")
    obj["metadata"].update({"generation": -1, "annotations": {"/x": "y"}, "labels": {"k": "v" * 64}})
    assert lines(obj) == [
        'metadata.namespace: Invalid value: "Team_A": a lowercase RFC 1123 label must consist of lower case '
        "alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. "
        "'my-name',  or "
        "'123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
        "metadata.generation: Invalid value: -1: must be greater than or equal to 0",
        f'metadata.labels: Invalid value: "{"v" * 64}": must be no more than 63 bytes',
        'metadata.annotations: Invalid value: "/x": prefix part must be non-empty',
    ]


def test_finalizer_names() -> None:
    """apimachinery ValidateFinalizers checks each name as a qualified name (path without index) and
    the orphan/foregroundDeletion conflict; core ValidateObjectMeta then checks each name again, at
    its index, and requires a "/" unless it is a standard finalizer."""
    obj = claim(exact())
    obj["metadata"]["finalizers"] = [
        "resource.kubernetes.io/delete-protection",
        "kubernetes",
        "mine",
        "a b/c",
    ]
    assert lines(obj) == [
        'metadata.finalizers: Invalid value: "a b/c": prefix part a lowercase RFC 1123 subdomain must '
        "consist of lower case alphanumeric characters, '-' or '.', and must start and end with an "
        "alphanumeric character (e.g. 'example.com', regex used for validation is "
        "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
        'metadata.finalizers[2]: Invalid value: "mine": name is neither a standard finalizer name nor is it '
        "fully qualified",
        'metadata.finalizers[3]: Invalid value: "a b/c": prefix part a lowercase RFC 1123 subdomain must '
        "consist of lower case alphanumeric characters, '-' or '.', and must start and end with an "
        "alphanumeric character (e.g. 'example.com', regex used for validation is "
        "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
    ]
    obj["metadata"]["finalizers"] = ["orphan", "foregroundDeletion"]
    assert lines(obj) == [
        'metadata.finalizers: Invalid value: []string{"orphan", "foregroundDeletion"}: finalizer orphan and '
        "foregroundDeletion cannot be both set"
    ]


def test_annotations_are_limited_to_256_kib_in_total() -> None:
    obj = claim(exact())
    obj["metadata"]["annotations"] = {f"a{i}": "x" * 1024 for i in range(256)}
    assert lines(obj) == ["metadata.annotations: Too long: may not be more than 262144 bytes"]


def test_namespace_of_cluster_scoped_objects_is_ignored() -> None:
    """The API server clears it, so it is no error."""
    obj = resource_slice(device())
    obj["metadata"]["namespace"] = "Not_A_Label"
    assert lines(obj) == []


# --- updates -------------------------------------------------------------------------------------------


def test_claim_spec_is_immutable_and_not_rechecked() -> None:
    old = claim(exact(count=-1))
    assert lines(old, old) == []
    new = claim(exact(count=2))
    # ValidateImmutableField shows the new internal spec with %#v (a set pointer is an address).
    assert lines(new, old) == [
        "spec: Invalid value: resource.ResourceClaimSpec{Devices:resource.DeviceClaim{Requests:"
        '[]resource.DeviceRequest{resource.DeviceRequest{Name:"req-0", '
        "Exactly:(*resource.ExactDeviceRequest)(0xc000000000), "
        "FirstAvailable:[]resource.DeviceSubRequest(nil)}}, "
        "Constraints:[]resource.DeviceConstraint(nil), Config:[]resource.DeviceClaimConfiguration(nil)}}: "
        "field is immutable"
    ]


def test_immutable_claim_spec_prints_subrequests_constraints_and_config() -> None:
    old = claim(exact())
    new = claim(
        first_available(
            "req-0", sub("a", tolerations=[{"key": "k", "operator": "Exists"}]), sub("b", count=2)
        ),
        constraints=[{"requests": ["req-0"], "matchAttribute": "dra.example.com/numa"}],
        config=[opaque()],
    )
    assert lines(new, old) == [
        "spec: Invalid value: resource.ResourceClaimSpec{Devices:resource.DeviceClaim{Requests:"
        '[]resource.DeviceRequest{resource.DeviceRequest{Name:"req-0", '
        "Exactly:(*resource.ExactDeviceRequest)(nil), FirstAvailable:[]resource.DeviceSubRequest{"
        'resource.DeviceSubRequest{Name:"a", DeviceClassName:"gpu", '
        "Selectors:[]resource.DeviceSelector(nil), "
        'AllocationMode:"ExactCount", Count:1, Tolerations:[]resource.DeviceToleration{'
        'resource.DeviceToleration{Key:"k", Operator:"Exists", Value:"", Effect:"", '
        "TolerationSeconds:(*int64)(nil)}}, Capacity:(*resource.CapacityRequirements)(nil)}, "
        'resource.DeviceSubRequest{Name:"b", DeviceClassName:"gpu", '
        "Selectors:[]resource.DeviceSelector(nil), "
        'AllocationMode:"ExactCount", Count:2, Tolerations:[]resource.DeviceToleration(nil), '
        "Capacity:(*resource.CapacityRequirements)(nil)}}}}, "
        "Constraints:[]resource.DeviceConstraint{resource.DeviceConstraint{"
        'Requests:[]string{"req-0"}, MatchAttribute:(*resource.FullyQualifiedName)(0xc000000000), '
        "DistinctAttribute:(*resource.FullyQualifiedName)(nil)}}, "
        "Config:[]resource.DeviceClaimConfiguration{resource.DeviceClaimConfiguration{"
        "Requests:[]string(nil), DeviceConfiguration:resource.DeviceConfiguration{"
        "Opaque:(*resource.OpaqueDeviceConfiguration)(0xc000000000)}}}}}: field is immutable"
    ]


def test_name_and_namespace_are_immutable_generation_only_grows() -> None:
    old = claim(exact())
    old["metadata"]["generation"] = 3
    new = claim(exact(), name="other", namespace="ns2")
    new["metadata"]["generation"] = 2
    assert lines(new, old) == [
        "metadata.generation: Invalid value: 2: must not be decremented",
        'metadata.name: Invalid value: "other": field is immutable',
        'metadata.namespace: Invalid value: "ns2": field is immutable',
    ]


def test_update_of_a_slice_checks_metadata_as_an_update_only() -> None:
    """ValidateResourceSliceUpdate (like the template and DeviceTaintRule updates) runs only
    ValidateObjectMetaUpdate: generation first, then name/namespace, then labels and annotations;
    the create-time checks (name format, negative generation) are not repeated."""
    old = resource_slice(device())
    old["metadata"]["generation"] = 3
    new = resource_slice(device())
    new["metadata"].update({"generation": -1, "labels": {"a b": "c"}})
    assert lines(new, old) == [
        "metadata.generation: Invalid value: -1: must not be decremented",
        'metadata.labels: Invalid value: "a b": name part must consist of alphanumeric characters, '
        "'-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or "
        "'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
    ]


def test_update_of_a_claim_checks_metadata_as_a_create_and_an_update() -> None:
    """ValidateResourceClaimUpdate runs ValidateObjectMeta, then ValidateObjectMetaUpdate."""
    old = claim(exact())
    old["metadata"]["generation"] = 3
    new = claim(exact())
    new["metadata"]["generation"] = -1
    assert lines(new, old) == [
        "metadata.generation: Invalid value: -1: must be greater than or equal to 0",
        "metadata.generation: Invalid value: -1: must not be decremented",
    ]


def test_old_object_of_another_kind() -> None:
    assert lines(claim(exact()), resource_slice(device())) == [
        'kind: Invalid value: "ResourceClaim": must be the same kind as the old object (ResourceSlice)'
    ]


def test_update_is_compared_after_defaulting_both_sides() -> None:
    """count 0 and count 1 are the same stored value, so this is no change."""
    assert lines(claim(exact(count=1)), claim(exact(count=0))) == []


# --- admin access -------------------------------------------------------------------------------------

ADMIN = claim(exact("a"), exact("b", adminAccess=True), exact("c", adminAccess=True))


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        pytest.param({"resource.kubernetes.io/admin-access": "true"}, [], id="labelled namespace"),
        pytest.param(
            {"resource.kubernetes.io/admin-access": "True"},
            [
                "spec.devices.requests[1].adminAccess: Forbidden: admin access to devices requires "
                "the "
                "`resource.kubernetes.io/admin-access: true` label on the containing namespace"
            ],
            id="value is case-sensitive",
        ),
        pytest.param(
            None,
            [
                "spec.devices.requests[1].adminAccess: Internal error: could not retrieve namespace "
                "to "
                'verify admin access: labels of namespace "ns" are not known'
            ],
            id="namespace not known",
        ),
    ],
)
def test_admin_access_needs_the_namespace_label(labels: dict[str, str] | None, expected: list[str]) -> None:
    assert lines(ADMIN, labels=labels) == expected


def test_admin_access_false_needs_no_label() -> None:
    assert lines(claim(exact(adminAccess=False)), labels=None) == []


def test_admin_access_is_not_rechecked_on_update() -> None:
    """The spec is immutable, so the strategy does not look at the namespace again."""
    assert lines(ADMIN, ADMIN, labels={}) == []


def test_result_toleration_operator_defaults_to_equal() -> None:
    """The generated defaulter (pkg/apis/resource/v1/zz_generated.defaults.go,
    SetObjectDefaults_ResourceClaim) walks status.allocation.devices.results[].tolerations too: an
    omitted operator is Equal there as well."""
    obj = claim(exact(), status=allocated(result(tolerations=[{"key": "k", "value": "v"}])))
    assert lines(obj) == []
    bad = claim(exact(), status=allocated(result(tolerations=[{"key": "k", "value": "a b"}])))
    assert lines(bad)[0].startswith(
        'status.allocation.devices.results[0].tolerations[0].value: Invalid value: "a b": a valid label'
    )


def test_update_of_a_core_object_checks_metadata_as_an_update_only() -> None:
    """ValidateNodeUpdate (like the Pod, Namespace and ResourceQuota updates) runs only
    ValidateObjectMetaUpdate: a negative generation is only "must not be decremented"."""
    old = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1", "generation": 1}}
    new = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1", "generation": -1}}
    assert lines(new, old) == ["metadata.generation: Invalid value: -1: must not be decremented"]
