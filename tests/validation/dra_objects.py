"""Small builders for DRA objects as plain JSON, and the one call every validation test makes.

Tests describe an object by what differs from a valid one, then compare the exact kubectl lines.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from policies.api.kinds import decode
from policies.validation import validate

API = "resource.k8s.io/v1"
ADMIN_LABELS = {"resource.kubernetes.io/admin-access": "true"}

# apimachinery messages, as upstream's tests spell them (pkg/apis/resource/validation/*_test.go).
DNS_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
    "and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
DNS_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
LABEL_NAME_MSG = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used "
    "for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
C_IDENTIFIER_MSG = (
    "a valid C identifier must start with alphabetic character or '_', followed by a string of alphanumeric "
    "characters or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName', regex used for validation is "
    "'[A-Za-z_][A-Za-z0-9_]*')"
)
REQUEST_REF_MSG = (
    "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'"
)


def exact(name: str = "req-0", device_class: str = "gpu", **fields: Any) -> dict[str, Any]:
    return {"name": name, "exactly": {"deviceClassName": device_class, **fields}}


def sub(name: str, device_class: str = "gpu", **fields: Any) -> dict[str, Any]:
    return {"name": name, "deviceClassName": device_class, **fields}


def first_available(name: str, *subrequests: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "firstAvailable": list(subrequests)}


def claim(
    *requests: dict[str, Any], name: str = "claim", namespace: str = "ns", **devices: Any
) -> dict[str, Any]:
    """A ResourceClaim; keyword arguments go to spec.devices (constraints, config), plus status=."""
    status = devices.pop("status", None)
    body: dict[str, Any] = {
        "apiVersion": API,
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"devices": {"requests": list(requests), **devices}},
    }
    if status is not None:
        body["status"] = status
    return body


def opaque(driver: str = "dra.example.com", parameters: Any = None, **fields: Any) -> dict[str, Any]:
    params = {"kind": "Config"} if parameters is None else parameters
    return {"opaque": {"driver": driver, "parameters": params}, **fields}


def result(request: str = "req-0", device: str = "gpu-0", **fields: Any) -> dict[str, Any]:
    return {"request": request, "driver": "dra.example.com", "pool": "pool", "device": device, **fields}


def allocated(*results: dict[str, Any], config: Any = None, **allocation: Any) -> dict[str, Any]:
    """A status with an allocation of ``results`` (and allocation ``config``, ``nodeSelector``...)."""
    devices: dict[str, Any] = {"results": list(results)}
    if config is not None:
        devices["config"] = config
    return {"allocation": {"devices": devices, **allocation}}


def device(name: str = "dev-0", **fields: Any) -> dict[str, Any]:
    return {"name": name, **fields}


def resource_slice(*devices: dict[str, Any], name: str = "slice", **spec: Any) -> dict[str, Any]:
    """A ResourceSlice of driver dra.example.com on node-1 unless the spec says otherwise."""
    body_spec: dict[str, Any] = {
        "driver": "dra.example.com",
        "pool": {"name": "pool", "generation": 1, "resourceSliceCount": 1},
    }
    if not {"nodeName", "nodeSelector", "allNodes", "perDeviceNodeSelection"} & spec.keys():
        body_spec["nodeName"] = "node-1"
    body_spec.update(spec)
    if devices:
        body_spec["devices"] = list(devices)
    return {"apiVersion": API, "kind": "ResourceSlice", "metadata": {"name": name}, "spec": body_spec}


def device_class(name: str = "gpu", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "DeviceClass", "metadata": {"name": name}, "spec": spec}


def template(
    *requests: dict[str, Any], metadata: Any = None, name: str = "tmpl", **devices: Any
) -> dict[str, Any]:
    spec: dict[str, Any] = {"spec": {"devices": {"requests": list(requests), **devices}}}
    if metadata is not None:
        spec["metadata"] = metadata
    return {
        "apiVersion": API,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": spec,
    }


def taint_rule(taint: dict[str, Any], selector: Any = None, status: Any = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"taint": taint}
    if selector is not None:
        spec["deviceSelector"] = selector
    body: dict[str, Any] = {
        "apiVersion": API,
        "kind": "DeviceTaintRule",
        "metadata": {"name": "rule"},
        "spec": spec,
    }
    if status is not None:
        body["status"] = status
    return body


def changed(obj: Mapping[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A deep copy of ``obj`` with the dotted ``path`` set (list indexes as numbers: spec.devices.0.name)."""
    out = copy.deepcopy(dict(obj))
    node: Any = out
    parts = path.split(".")
    for part in parts[:-1]:
        node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
    last = parts[-1]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return out


def lines(
    obj: Mapping[str, Any],
    old: Mapping[str, Any] | None = None,
    labels: Mapping[str, str] | None = ADMIN_LABELS,
) -> list[str]:
    """What the validation says, one kubectl line per problem."""
    decoded_old = decode(old) if old is not None else None
    return [str(e) for e in validate(decode(obj), decoded_old, namespace_labels=labels)]
