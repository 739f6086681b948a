"""Turning the devices picked for a claim into its ``AllocationResult``.

Upstream 1.36: the end of ``Allocate`` in ``structured/internal/incubating/allocator_incubating.go``
(dra-reference 4.15-4.16). Device results keep the order they were picked in; fields are copied
verbatim (a request's tolerations, a device's binding conditions), as Go copies the slices. The
configuration lists each class's config once for all requests using the class, then the claim's
configs; a claim config naming several top-level requests is repeated once per request, which is
the 1.36 behaviour (fixed in 1.37).
"""

from __future__ import annotations

from typing import Any

from policies.allocator.errors import AllocationError
from policies.allocator.features import Features
from policies.allocator.nodes import NodeSelectorError, ResultSelectorBuilder
from policies.allocator.search import ClaimData, Pick, RequestData
from policies.api.base import NodeSelector
from policies.api.resource import (
    SOURCE_FROM_CLAIM,
    SOURCE_FROM_CLASS,
    AllocationResult,
    DeviceAllocationConfiguration,
    DeviceRequestAllocationResult,
)


def build_result(data: ClaimData, features: Features, node_name: str) -> AllocationResult:
    """The claim's allocation; raises AllocationError for a multi-term slice node selector.

    Validated as one document: pydantic builds the nested models (the device results not kept on
    the device, the DeviceAllocationResult) in a single pass, which costs less than constructing
    each of them on its own. Models given inside it (kept entries, config, node selector) are
    taken as they are."""
    results = [_device_result(pick, features) for pick in data.picks]
    config = _config(data)
    devices: dict[str, Any] = {"results": results}
    if config:
        devices["config"] = config
    allocation: dict[str, Any] = {"devices": devices}
    selector = _node_selector(data, node_name)
    if selector is not None:
        allocation["node_selector"] = selector
    return AllocationResult.model_validate(allocation)


def _device_result(pick: Pick, features: Features) -> DeviceRequestAllocationResult | dict[str, Any]:
    """The result entry of one pick: a model, or the fields of one for build_result to validate.

    Most entries name only the request and the device (no tolerations, share, consumed capacity
    or binding conditions): those depend on nothing else, so the device keeps them for the
    Allocator's lifetime and every call picking it for a request of that name reuses the
    (frozen) entry instead of validating a new one.
    """
    device, rd = pick.device, pick.request
    plain = (
        rd.raw_tolerations is None
        and pick.share_id is None
        and pick.consumption is None
        and device.binding_conditions is None
        and device.binding_failure_conditions is None
    )
    if not plain:
        return _result_fields(pick, features)
    key = (rd.full_name, rd.admin)
    found = device.results.get(key)
    if found is None:
        found = DeviceRequestAllocationResult(**_result_fields(pick, features))
        device.remember_result(key, found)
    return found


def _result_fields(pick: Pick, features: Features) -> dict[str, Any]:
    device, rd = pick.device, pick.request
    fields: dict[str, Any] = {
        "request": rd.full_name,
        "driver": device.driver,
        "pool": device.pool_name,
        "device": device.name,
    }
    if rd.admin:
        fields["admin_access"] = True
    if rd.raw_tolerations is not None:
        fields["tolerations"] = list(rd.raw_tolerations)
    if features.device_binding_and_status:
        if device.binding_conditions is not None:
            fields["binding_conditions"] = list(device.binding_conditions)
        if device.binding_failure_conditions is not None:
            fields["binding_failure_conditions"] = list(device.binding_failure_conditions)
    if pick.share_id is not None:
        fields["share_id"] = pick.share_id
    consumed = pick.consumed
    if consumed:
        fields["consumed_capacity"] = consumed
    return fields


def _chosen(data: ClaimData) -> list[RequestData]:
    """Per request: the request itself or the alternative the search settled on."""
    return [alternatives[data.selected[r]] for r, alternatives in enumerate(data.requests)]


def _config(data: ClaimData) -> list[DeviceAllocationConfiguration]:
    chosen = _chosen(data)
    if not data.claim.spec.devices.config and not any(
        rd.device_class and rd.device_class.spec.config for rd in chosen
    ):
        return []
    entries: list[dict[str, Any]] = []
    class_entries: dict[str, range] = {}
    for rd in chosen:
        seen = class_entries.get(rd.class_name)
        if seen is not None:
            for i in seen:
                entries[i]["requests"].append(rd.full_name)
            continue
        start = len(entries)
        device_class = rd.device_class
        for class_item in (device_class.spec.config or []) if device_class else []:
            entries.append(
                {"source": SOURCE_FROM_CLASS, "requests": [rd.full_name], "opaque": class_item.opaque}
            )
        class_entries[rd.class_name] = range(start, len(entries))

    requests = data.claim.spec.devices.requests or []
    for item in data.claim.spec.devices.config or []:
        names = list(item.requests) if item.requests is not None else None
        entry = {"source": SOURCE_FROM_CLAIM, "requests": names, "opaque": item.opaque}
        if not item.requests:
            entries.append(entry)
            continue
        for request, rd in zip(requests, chosen, strict=True):
            if request.name in item.requests or (rd.parent is not None and rd.full_name in item.requests):
                entries.append(entry)
    return [DeviceAllocationConfiguration(**{k: v for k, v in e.items() if v is not None}) for e in entries]


def _node_selector(data: ClaimData, node_name: str) -> NodeSelector | None:
    builder = ResultSelectorBuilder(node_name)
    try:
        for pick in data.picks:
            if builder.pinned:
                break  # a pinned result stays pinned, whatever the other devices say
            device, info = pick.device, pick.device.slice
            if info.per_device:
                builder.add(
                    node_name=device.node_name,
                    binds_to_node=device.binds_to_node,
                    selector=device.node_selector,
                )
            else:
                builder.add(
                    node_name=info.node_name, binds_to_node=device.binds_to_node, selector=info.node_selector
                )
    except NodeSelectorError as err:
        raise AllocationError(f"create NodeSelector for claim {data.claim.name}: {err}") from None
    return builder.build()


# --- the result as Go's encoding/json prints it -----------------------------------------------------------
#
# The AllocationResult built above keeps Go's in-memory shape (an empty but non-nil list stays a list,
# as upstream's reflect.DeepEqual-based tests require). Printed by the API server or kubectl, Go drops
# every ``omitempty`` field that is empty and writes map keys sorted; this renders that form. Required
# fields (no ``omitempty`` in ``k8s.io/api/resource/v1`` and ``core/v1`` types.go) are listed per object.

_RESULT_REQUIRED = frozenset({"request", "driver", "pool", "device"})
_CONFIG_REQUIRED = frozenset({"source"})
_OPAQUE_REQUIRED = frozenset({"driver", "parameters"})
_REQUIREMENT_REQUIRED = frozenset({"key", "operator"})


def allocation_result_json(result: AllocationResult) -> dict[str, Any]:
    """``result`` as upstream would serialise it: empty optional fields left out, map keys sorted."""
    data = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    devices = data.get("devices") or {}
    rendered: dict[str, Any] = {}
    if devices.get("results"):
        models = result.devices.results if result.devices and result.devices.results else []
        rendered["results"] = [
            _device_result_json(r, m) for r, m in zip(devices["results"], models, strict=True)
        ]
    if devices.get("config"):
        rendered["config"] = [_config_json(c) for c in devices["config"]]
    # DeviceAllocationResult is a struct: encoding/json prints it even when empty.
    out: dict[str, Any] = {"devices": rendered}
    if "nodeSelector" in data:
        selector = data["nodeSelector"]
        out["nodeSelector"] = {
            "nodeSelectorTerms": [_term_json(t) for t in selector.get("nodeSelectorTerms") or []],
            **_omit_empty({k: v for k, v in selector.items() if k != "nodeSelectorTerms"}),
        }
    out.update(_omit_empty({k: v for k, v in data.items() if k not in ("devices", "nodeSelector")}))
    return out


def _device_result_json(item: dict[str, Any], model: DeviceRequestAllocationResult) -> dict[str, Any]:
    out = _omit_empty(item, _RESULT_REQUIRED)
    if "tolerations" in out:
        out["tolerations"] = [_omit_empty(t) for t in out["tolerations"]]
    if "consumedCapacity" in out and model.consumed_capacity:
        # Go's MarshalJSON writes String(), the canonical form, never the text a value was parsed from.
        out["consumedCapacity"] = {name: str(q) for name, q in sorted(model.consumed_capacity.items())}
    return out


def _config_json(item: dict[str, Any]) -> dict[str, Any]:
    out = _omit_empty(item, _CONFIG_REQUIRED)
    if "opaque" in out:
        out["opaque"] = _omit_empty(out["opaque"], _OPAQUE_REQUIRED)
    return out


def _term_json(term: dict[str, Any]) -> dict[str, Any]:
    out = _omit_empty(term)
    for key in ("matchExpressions", "matchFields"):
        if key in out:
            out[key] = [_omit_empty(r, _REQUIREMENT_REQUIRED) for r in out[key]]
    return out


def _omit_empty(item: dict[str, Any], required: frozenset[str] = frozenset()) -> dict[str, Any]:
    """Drop ``omitempty`` members that are empty; ``False`` and ``0`` are pointers here and stay."""
    return {k: v for k, v in item.items() if k in required or v not in ("", [], {}, None)}
