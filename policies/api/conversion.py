"""Older ``resource.k8s.io`` versions converted field by field as the 1.36 API server converts them.

A 1.36 server still knows v1beta1 and v1beta2 (and v1alpha3 for DeviceTaintRule) but serves them
only when ``--runtime-config`` turns them on; when it does, an object written in them is converted
to the internal version, which is v1's shape, before it is validated. This does the same on the
JSON, so that ``draguard convert`` prints what the server would store and the commands judge an
older object exactly as v1:

* v1beta2 has v1's shape field for field (``pkg/apis/resource/v1beta2/zz_generated.conversion.go``):
  only the apiVersion changes;
* v1beta1 (``pkg/apis/resource/v1beta1/conversion.go``): a request's flat fields
  (``deviceClassName``, ``selectors``, ``allocationMode``, ``count``, ``adminAccess``,
  ``tolerations``, ``capacity``) move under ``exactly`` when any of them is set; a device's
  ``basic`` fields move up into the device; a slice's empty ``nodeName`` and false ``allNodes``
  are dropped (they are pointers in v1);
* DeviceTaintRule has no v1 in 1.36: v1alpha3 becomes v1beta2, the same shape.

v1beta1's defaulting runs before the conversion upstream, but it only fills a request that has a
``deviceClassName`` (which makes it an ``exactly`` request already) the way v1 defaults
``exactly``, so defaulting after the conversion gives the same object.

The input is not modified; the output shares unchanged subtrees with it.
"""

from __future__ import annotations

from typing import Any

GROUP = "resource.k8s.io"
V1 = f"{GROUP}/v1"
V1BETA1 = f"{GROUP}/v1beta1"
V1BETA2 = f"{GROUP}/v1beta2"
V1ALPHA3 = f"{GROUP}/v1alpha3"

# Where each older version's objects go in 1.36.
CONVERTIBLE: dict[str, dict[str, str]] = {
    V1BETA1: {k: V1 for k in ("DeviceClass", "ResourceClaim", "ResourceClaimTemplate", "ResourceSlice")},
    V1BETA2: {k: V1 for k in ("DeviceClass", "ResourceClaim", "ResourceClaimTemplate", "ResourceSlice")},
    V1ALPHA3: {"DeviceTaintRule": V1BETA2},
}

# v1beta1 DeviceRequest fields that v1 holds under "exactly" (ExactDeviceRequest), in v1's order.
EXACT_FIELDS = (
    "deviceClassName",
    "selectors",
    "allocationMode",
    "count",
    "adminAccess",
    "tolerations",
    "capacity",
)


def target_version(api_version: str, kind: str) -> str | None:
    """The version 1.36 stores an ``api_version`` ``kind`` in, if it converts it; else None."""
    return CONVERTIBLE.get(api_version, {}).get(kind)


def convert(raw: dict[str, Any]) -> dict[str, Any]:
    """``raw`` (a convertible object) in the version 1.36 serves it in."""
    api_version, kind = raw["apiVersion"], raw["kind"]
    target = target_version(api_version, kind)
    if target is None:
        raise ValueError(f"{api_version} {kind} is not converted by Kubernetes 1.36")
    out = {**raw, "apiVersion": target}
    if api_version != V1BETA1:
        return out
    spec = raw.get("spec")
    if not isinstance(spec, dict):
        return out
    if kind == "ResourceClaim":
        out["spec"] = _claim_spec(spec)
    elif kind == "ResourceClaimTemplate" and isinstance(spec.get("spec"), dict):
        out["spec"] = {**spec, "spec": _claim_spec(spec["spec"])}
    elif kind == "ResourceSlice":
        out["spec"] = _slice_spec(spec)
    return out


def _claim_spec(spec: dict[str, Any]) -> dict[str, Any]:
    devices = spec.get("devices")
    if not isinstance(devices, dict) or not isinstance(devices.get("requests"), list):
        return spec
    requests = [_request(r) if isinstance(r, dict) else r for r in devices["requests"]]
    return {**spec, "devices": {**devices, "requests": requests}}


def _set(value: Any) -> bool:
    """Go's test for a main request field being set (hasAnyMainRequestFieldsSet): a non-empty
    string, a non-zero count, a non-nil pointer or slice (``adminAccess: false`` and ``selectors: []``
    are set)."""
    if isinstance(value, bool):
        return True
    return value not in (None, "", 0)


def _request(request: dict[str, Any]) -> dict[str, Any]:
    """Convert_v1beta1_DeviceRequest_To_resource_DeviceRequest."""
    out = {"name": request["name"]} if "name" in request else {}
    if any(_set(request.get(f)) for f in EXACT_FIELDS):
        out["exactly"] = {f: request[f] for f in EXACT_FIELDS if request.get(f) is not None}
    out.update({k: v for k, v in request.items() if k not in EXACT_FIELDS and k != "name"})
    return out


def _slice_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """Convert_v1beta1_ResourceSliceSpec_To_resource_ResourceSliceSpec and the devices in it."""
    out = dict(spec)
    if not out.get("nodeName"):
        out.pop("nodeName", None)
    if out.get("allNodes") is not True:
        out.pop("allNodes", None)
    if isinstance(spec.get("devices"), list):
        out["devices"] = [_device(d) if isinstance(d, dict) else d for d in spec["devices"]]
    return out


def _device(device: dict[str, Any]) -> dict[str, Any]:
    """Convert_v1beta1_Device_To_resource_Device: the fields of ``basic`` become the device's."""
    out = {k: v for k, v in device.items() if k != "basic"}
    basic = device.get("basic")
    if isinstance(basic, dict):
        out.update(basic)
    return out
