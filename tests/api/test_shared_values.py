"""Small repeated values (device attributes, capacities, counters) decode to shared instances.

Sharing must never change what a document decodes to: not the validation verdict, not the
fields, not the round trip.
"""

from __future__ import annotations

import gc
from typing import Any

import pytest
from pydantic import ValidationError

from policies.api.base import _SHARED
from policies.api.kinds import decode
from policies.api.resource import Counter, DeviceAttribute, DeviceCapacity, ResourceSlice


def slice_with(*attributes: dict[str, Any]) -> ResourceSlice:
    devices = [{"name": f"d{i}", "attributes": {"a": a}, "capacity": {"mem": {"value": "80Gi"}}}
               for i, a in enumerate(attributes)]
    obj = decode({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"},
        "spec": {"driver": "d.example.com", "nodeName": "n", "pool": {"name": "p", "resourceSliceCount": 1},
                 "devices": devices},
    })
    assert isinstance(obj, ResourceSlice)
    return obj


def attribute(s: ResourceSlice, i: int) -> DeviceAttribute:
    devices = s.spec.devices or []
    return (devices[i].attributes or {})["a"]


def test_equal_values_are_one_instance_across_devices_and_objects() -> None:
    first, second = slice_with({"string": "a100"}, {"string": "a100"}), slice_with({"string": "a100"})
    assert attribute(first, 0) is attribute(first, 1) is attribute(second, 0)
    capacities = [(d.capacity or {})["mem"] for d in (first.spec.devices or [])]
    assert capacities[0] is capacities[1]
    assert Counter.model_validate({"value": "1"}) is Counter.model_validate({"value": "1"})


def test_values_of_another_type_are_not_shared_and_strictness_holds() -> None:
    shared = slice_with({"int": 1}, {"bool": True})
    assert attribute(shared, 0).int_ == 1 and attribute(shared, 1).bool_ is True
    # 1 == True in Python: without the type in the key, {"bool": 1} would get the valid instance.
    with pytest.raises(ValidationError):
        DeviceAttribute.model_validate({"bool": 1})
    assert DeviceAttribute.model_validate({"int": 1}) is attribute(shared, 0)
    with pytest.raises(ValidationError):  # 1.0 == 1 too, and Go's decoder refuses it for an int64
        DeviceAttribute.model_validate({"int": 1.0})


def test_lists_unknown_fields_and_python_names_decode_on_their_own() -> None:
    listed = [DeviceAttribute.model_validate({"ints": [1, 2]}) for _ in range(2)]
    assert listed[0] is not listed[1] and listed[0] == listed[1]  # a list is mutable: never shared
    unknown = DeviceAttribute.model_validate({"string": "x", "colour": "red"})
    assert unknown.model_extra == {"colour": "red"}
    assert DeviceAttribute.model_validate({"string": "x"}).model_extra == {}
    # A Python field name is not a wire name: kwargs set the field, whatever a decoder did before.
    assert decode_int_() is None and DeviceAttribute(int_=5).int_ == 5


def decode_int_() -> int | None:
    """``{"int_": 5}`` in a document is an unknown field, not the ``int`` member."""
    s = slice_with({"int_": 5})
    return attribute(s, 0).int_


def test_round_trip_is_unchanged_by_sharing() -> None:
    raw = {"string": "h100"}
    assert DeviceAttribute.model_validate(raw).to_json() == raw
    assert DeviceCapacity.model_validate({"value": "80Gi"}).to_json() == {"value": "80Gi"}


def test_a_value_no_object_uses_leaves_the_table() -> None:
    value = DeviceAttribute.model_validate({"string": "only-here-once"})
    key = (DeviceAttribute, ("string", str, "only-here-once"))
    assert _SHARED.get(key) is value
    del value
    gc.collect()
    assert _SHARED.get(key) is None
