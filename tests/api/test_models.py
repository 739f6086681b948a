"""The models cover every field of upstream's types, and only those.

full_objects.py sets every field of every modeled type (resource.k8s.io/v1 as of 1.36 plus the 1.37
node-allocatable shape; the core/v1 fields draguard reads), written from upstream's types.go. Here
we check the two directions: the models know each of those fields (no "unknown" leftovers), and
each model field appears in the fixtures (so a field added to a model gets a round-trip test).
"""

from __future__ import annotations

import inspect
from collections import defaultdict
from typing import Any

import pytest
from full_objects import ADMISSION_REVIEW, DECODABLE, POD, RESOURCE_CLAIM, RESOURCE_SLICE
from pydantic import ValidationError

from policies.api import admission, base, core, resource, scheduling
from policies.api.base import ApiModel
from policies.api.kinds import decode
from policies.api.quantity import Quantity
from policies.validation.unknown import unknown_fields


def walk(value: object, seen: dict[type[ApiModel], set[str]]) -> None:
    """Record which fields of which model classes carry a value."""
    if isinstance(value, ApiModel):
        seen[type(value)] |= set(value.model_fields_set) & set(type(value).model_fields)
        for name in type(value).model_fields:
            walk(getattr(value, name), seen)
    elif isinstance(value, list):
        for item in value:
            walk(item, seen)
    elif isinstance(value, dict):
        for item in value.values():
            walk(item, seen)


def decoded_fixtures() -> list[ApiModel]:
    review = admission.AdmissionReview.model_validate(ADMISSION_REVIEW, by_name=False)
    return [decode(data) for data in DECODABLE.values()] + [review]


# Models that no decodable object contains: list metadata, and admission's unused StatusDetails.
NOT_IN_OBJECTS = {base.ListMeta, admission.StatusDetails}


def concrete_models(*modules: Any) -> list[type[ApiModel]]:
    """Model classes defined in ``modules`` that objects are made of (bases like TypedObject excluded)."""
    classes = [
        cls
        for module in modules
        for _, cls in inspect.getmembers(module, inspect.isclass)
        if issubclass(cls, ApiModel) and cls.__module__ == module.__name__
    ]
    bases = {b for cls in classes for b in cls.__mro__[1:]}
    return [cls for cls in classes if cls not in bases and cls not in NOT_IN_OBJECTS]


@pytest.mark.parametrize("name", list(DECODABLE))
def test_fixtures_have_no_unknown_fields(name: str) -> None:
    assert unknown_fields(decode(DECODABLE[name])) == []


def test_every_model_field_is_exercised_by_the_fixtures() -> None:
    seen: dict[type[ApiModel], set[str]] = defaultdict(set)
    for obj in decoded_fixtures():
        walk(obj, seen)
    missing = {
        f"{cls.__name__}.{field}"
        for cls in concrete_models(resource, core, base, admission, scheduling)
        for field in cls.model_fields
        if field not in seen[cls]
    }
    assert missing == set()


def test_fields_read_back_as_typed_attributes() -> None:
    claim = decode(RESOURCE_CLAIM)
    assert isinstance(claim, resource.ResourceClaim)
    request = (claim.spec.devices.requests or [])[0]
    assert request.exactly is not None
    assert request.exactly.count == 2
    assert request.exactly.tolerations is not None and request.exactly.tolerations[0].toleration_seconds == 60
    assert claim.status is not None and claim.status.allocation is not None
    result = (claim.status.allocation.devices.results or [])[0] if claim.status.allocation.devices else None
    assert result is not None and result.share_id == "0b5f4c1e-3a4d-4e8f-9c2b-1d2e3f405162"
    assert result.consumed_capacity == {
        "memory": Quantity.parse("10Gi"),
        "gpu.example.com/cores": Quantity.parse("0"),
    }

    slice_ = decode(RESOURCE_SLICE)
    assert isinstance(slice_, resource.ResourceSlice)
    gpu = (slice_.spec.devices or [])[0]
    attributes = gpu.attributes or {}
    assert attributes["index"].int_ == 0 and attributes["virtual"].bool_ is False
    assert gpu.node_allocatable_resources is not None
    mapping = gpu.node_allocatable_resources["cpu"].mapping
    assert mapping is not None and mapping.capacity_multiplier == Quantity.parse("2")

    pod = decode(POD)
    assert isinstance(pod, core.Pod)
    assert pod.status is not None
    statuses = pod.status.node_allocatable_resource_claim_statuses or []
    assert statuses[1].mapping is not None and statuses[1].mapping[0].quantity == Quantity.parse("4")


def test_models_are_frozen() -> None:
    claim = decode(RESOURCE_CLAIM)
    with pytest.raises(ValidationError):
        claim.metadata.name = "other"  # type: ignore[misc]


def test_required_api_strings_decode_as_empty_for_validation_to_report() -> None:
    data = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "status": {"allocation": {"devices": {"results": [{}]}}, "reservedFor": [{}]},
    }
    claim = decode(data)
    assert isinstance(claim, resource.ResourceClaim) and claim.status is not None
    assert claim.status.reserved_for is not None and claim.status.reserved_for[0].uid == ""
    assert claim.to_json() == data


def test_python_code_can_still_build_models_by_attribute_name() -> None:
    """Other modules construct models in Python; decoding is what insists on wire names."""
    toleration = resource.DeviceToleration(key="k", toleration_seconds=5)
    assert toleration.to_json() == {"key": "k", "tolerationSeconds": 5}
