"""Equal device attributes and capacities are one shared object (policies.api.base.share_values).

Sharing must never change what a document decodes to: not the validation verdict, not the fields,
not the round trip; and it must work however a Device is built.
"""

from __future__ import annotations

import gc
from typing import Any

import pytest
from pydantic import ValidationError

from policies.api.base import _SHARED
from policies.api.kinds import decode
from policies.api.resource import Device, DeviceAttribute, DeviceCapacity, ResourceSlice


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


def test_equal_values_are_one_object_across_devices_and_slices() -> None:
    first, second = slice_with({"string": "a100"}, {"string": "a100"}), slice_with({"string": "a100"})
    assert attribute(first, 0) is attribute(first, 1) is attribute(second, 0)
    capacities = [(d.capacity or {})["mem"] for d in (first.spec.devices or [])]
    assert capacities[0] is capacities[1]


def test_devices_built_with_keywords_share_too_and_stay_whole() -> None:
    built = Device(name="d", attributes={"model": DeviceAttribute(string="a100")})
    decoded = attribute(slice_with({"string": "a100"}), 0)
    assert (built.attributes or {})["model"] is decoded
    assert decoded.string == "a100" and decoded.int_ is None


def test_only_equal_fields_share_and_strict_decoding_holds() -> None:
    s = slice_with({"int": 1}, {"bool": True}, {"string": "x", "int": None}, {"string": "x"})
    assert attribute(s, 0).int_ == 1 and attribute(s, 1).bool_ is True
    # An explicit null is not an absent field: both round-trip as they came.
    assert attribute(s, 2) is not attribute(s, 3)
    assert attribute(s, 2).to_json() == {"string": "x", "int": None}
    assert attribute(s, 3).to_json() == {"string": "x"}
    with pytest.raises(ValidationError):  # Go's decoder refuses a number for a bool, sharing or not
        DeviceAttribute.model_validate({"bool": 1})


def test_values_written_differently_stay_apart_and_unknown_fields_are_left_alone() -> None:
    """1.5Gi equals 1536Mi, but prints and reads (isInteger) as written: they are not one object."""
    devices = [
        Device(name="a", capacity={"m": DeviceCapacity.model_validate({"value": "1.5Gi"})}),
        Device(name="b", capacity={"m": DeviceCapacity.model_validate({"value": "1536Mi"})}),
    ]
    first, second = ((d.capacity or {})["m"] for d in devices)
    assert first.value == second.value and first is not second
    assert (first.to_json(), second.to_json()) == ({"value": "1.5Gi"}, {"value": "1536Mi"})
    coloured = {"string": "x", "colour": "red"}
    s = slice_with(coloured, coloured)
    assert attribute(s, 0) is not attribute(s, 1) and attribute(s, 0).model_extra == {"colour": "red"}


def test_round_trip_is_unchanged_by_sharing() -> None:
    raw = {"string": "h100"}
    assert attribute(slice_with(raw, raw), 1).to_json() == raw
    assert DeviceCapacity.model_validate({"value": "80Gi"}).to_json() == {"value": "80Gi"}


def test_a_value_no_device_uses_leaves_the_table() -> None:
    s = slice_with({"string": "only-here-once"})
    key = (DeviceAttribute, b'{"string":"only-here-once"}')
    assert _SHARED.get(key) is attribute(s, 0)
    del s
    gc.collect()
    assert _SHARED.get(key) is None
