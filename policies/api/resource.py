"""resource.k8s.io/v1 models: DeviceClass, ResourceClaim(Template), ResourceSlice, DeviceTaintRule.

Field by field from upstream ``staging/src/k8s.io/api/resource/v1/types.go`` (release-1.36), plus
the two KEP-5517 device shapes (1.36 ``nodeAllocatableResourceMappings`` and the 1.37
``nodeAllocatableResources``) because clusters in the field serve either. Optional pointers are
``X | None`` so that "absent" and "zero" stay distinct, as the allocator needs (``count: 0`` is
defaulted to 1, an absent ``adminAccess`` differs from ``false`` when the feature is off).

Strings the API requires default to "" instead of failing to decode: like Go, which decodes a
missing string as "", the validation then reports "Required value" with the field's path.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from policies.api.base import ApiModel, Condition, NodeSelector, ObjectMeta, TypedObject, share_values
from policies.api.quantity import Quantity

GROUP = "resource.k8s.io"
VERSION = "v1"
API_VERSION = f"{GROUP}/{VERSION}"

# Allocation modes and config sources (types.go constants).
EXACT_COUNT = "ExactCount"
ALL = "All"
SOURCE_FROM_CLASS = "FromClass"
SOURCE_FROM_CLAIM = "FromClaim"

# Label on a namespace that allows adminAccess requests in it.
ADMIN_ACCESS_LABEL = "resource.kubernetes.io/admin-access"


# --- selectors and configuration -------------------------------------------------------------------


class CELDeviceSelector(ApiModel):
    expression: str = ""


class DeviceSelector(ApiModel):
    cel: CELDeviceSelector | None = None


class OpaqueDeviceConfiguration(ApiModel):
    driver: str = ""
    # runtime.RawExtension: any JSON value; validation insists on a JSON object.
    parameters: Any = None


class DeviceConfiguration(ApiModel):
    opaque: OpaqueDeviceConfiguration | None = None


class DeviceClassConfiguration(DeviceConfiguration):
    pass


class DeviceClaimConfiguration(DeviceConfiguration):
    requests: list[str] | None = None


class DeviceAllocationConfiguration(DeviceConfiguration):
    source: str = ""
    requests: list[str] | None = None


# --- DeviceClass ------------------------------------------------------------------------------------


class DeviceClassSpec(ApiModel):
    selectors: list[DeviceSelector] | None = None
    config: list[DeviceClassConfiguration] | None = None
    extended_resource_name: str | None = None


class DeviceClass(TypedObject):
    spec: DeviceClassSpec = Field(default_factory=DeviceClassSpec)


# --- ResourceClaim ----------------------------------------------------------------------------------


class DeviceToleration(ApiModel):
    key: str | None = None
    operator: str | None = None
    value: str | None = None
    effect: str | None = None
    toleration_seconds: int | None = None


class CapacityRequirements(ApiModel):
    requests: dict[str, Quantity] | None = None


class ExactDeviceRequest(ApiModel):
    device_class_name: str = ""
    selectors: list[DeviceSelector] | None = None
    allocation_mode: str | None = None
    count: int | None = None
    admin_access: bool | None = None
    tolerations: list[DeviceToleration] | None = None
    capacity: CapacityRequirements | None = None


class DeviceSubRequest(ApiModel):
    name: str = ""
    device_class_name: str = ""
    selectors: list[DeviceSelector] | None = None
    allocation_mode: str | None = None
    count: int | None = None
    tolerations: list[DeviceToleration] | None = None
    capacity: CapacityRequirements | None = None


class DeviceRequest(ApiModel):
    name: str = ""
    exactly: ExactDeviceRequest | None = None
    first_available: list[DeviceSubRequest] | None = None


class DeviceConstraint(ApiModel):
    requests: list[str] | None = None
    match_attribute: str | None = None
    distinct_attribute: str | None = None


class DeviceClaim(ApiModel):
    requests: list[DeviceRequest] | None = None
    constraints: list[DeviceConstraint] | None = None
    config: list[DeviceClaimConfiguration] | None = None


class ResourceClaimSpec(ApiModel):
    devices: DeviceClaim = Field(default_factory=DeviceClaim)


class DeviceRequestAllocationResult(ApiModel):
    request: str = ""
    driver: str = ""
    pool: str = ""
    device: str = ""
    admin_access: bool | None = None
    tolerations: list[DeviceToleration] | None = None
    binding_conditions: list[str] | None = None
    binding_failure_conditions: list[str] | None = None
    share_id: str | None = Field(default=None, alias="shareID")
    consumed_capacity: dict[str, Quantity] | None = None


class DeviceAllocationResult(ApiModel):
    results: list[DeviceRequestAllocationResult] | None = None
    config: list[DeviceAllocationConfiguration] | None = None


class AllocationResult(ApiModel):
    devices: DeviceAllocationResult | None = None
    node_selector: NodeSelector | None = None
    allocation_timestamp: str | None = None


class ResourceClaimConsumerReference(ApiModel):
    api_group: str | None = None
    resource: str = ""
    name: str = ""
    uid: str = ""


class NetworkDeviceData(ApiModel):
    interface_name: str | None = None
    ips: list[str] | None = None
    hardware_address: str | None = None


class AllocatedDeviceStatus(ApiModel):
    driver: str = ""
    pool: str = ""
    device: str = ""
    share_id: str | None = Field(default=None, alias="shareID")
    conditions: list[Condition] | None = None
    data: Any = None
    network_data: NetworkDeviceData | None = None


class ResourceClaimStatus(ApiModel):
    allocation: AllocationResult | None = None
    reserved_for: list[ResourceClaimConsumerReference] | None = None
    devices: list[AllocatedDeviceStatus] | None = None


class ResourceClaim(TypedObject):
    spec: ResourceClaimSpec = Field(default_factory=ResourceClaimSpec)
    status: ResourceClaimStatus | None = None


class ResourceClaimTemplateSpec(ApiModel):
    metadata: ObjectMeta | None = None
    spec: ResourceClaimSpec = Field(default_factory=ResourceClaimSpec)


class ResourceClaimTemplate(TypedObject):
    spec: ResourceClaimTemplateSpec = Field(default_factory=ResourceClaimTemplateSpec)


# --- ResourceSlice ----------------------------------------------------------------------------------


class ResourcePool(ApiModel):
    name: str = ""
    generation: int = 0
    resource_slice_count: int = 0


class DeviceAttribute(ApiModel):
    """Exactly one member is set; list members exist with DRAListTypeAttributes (1.36 alpha)."""

    int_: int | None = Field(default=None, alias="int")
    bool_: bool | None = Field(default=None, alias="bool")
    string: str | None = None
    version: str | None = None
    ints: list[int] | None = None
    bools: list[bool] | None = None
    strings: list[str] | None = None
    versions: list[str] | None = None


class CapacityRequestPolicyRange(ApiModel):
    min: Quantity | None = None
    max: Quantity | None = None
    step: Quantity | None = None


class CapacityRequestPolicy(ApiModel):
    default: Quantity | None = None
    valid_values: list[Quantity] | None = None
    valid_range: CapacityRequestPolicyRange | None = None


# Go's zero resource.Quantity: what a missing "value" decodes to (no validation rule requires one).
_ZERO = Quantity.parse("0")


class DeviceCapacity(ApiModel):
    value: Quantity = _ZERO
    request_policy: CapacityRequestPolicy | None = None


class Counter(ApiModel):
    value: Quantity = _ZERO


class CounterSet(ApiModel):
    name: str = ""
    counters: dict[str, Counter] | None = None


class DeviceCounterConsumption(ApiModel):
    counter_set: str = ""
    counters: dict[str, Counter] | None = None


class DeviceTaint(ApiModel):
    key: str = ""
    value: str | None = None
    effect: str = ""
    time_added: str | None = None


class NodeAllocatableResourceMapping(ApiModel):
    """KEP-5517 as shipped in 1.36 (alpha): ``Device.nodeAllocatableResourceMappings[R]``."""

    capacity_key: str | None = None
    allocation_multiplier: Quantity | None = None


class NodeAllocatableMapping(ApiModel):
    """KEP-5517 alpha2 (1.37): the ``mapping`` member of ``nodeAllocatableResources[R]``."""

    capacity_key: str | None = None
    capacity_multiplier: Quantity | None = None
    device_multiplier: Quantity | None = None


class NodeAllocatableOverhead(ApiModel):
    per_pod: Quantity | None = None
    per_container: Quantity | None = None


class NodeAllocatableResource(ApiModel):
    """KEP-5517 alpha2 (1.37): ``Device.nodeAllocatableResources[R]``."""

    mapping: NodeAllocatableMapping | None = None
    overhead: NodeAllocatableOverhead | None = None


class Device(ApiModel):
    name: str = ""
    attributes: dict[str, DeviceAttribute] | None = None
    capacity: dict[str, DeviceCapacity] | None = None
    consumes_counters: list[DeviceCounterConsumption] | None = None
    node_name: str | None = None
    node_selector: NodeSelector | None = None
    all_nodes: bool | None = None
    taints: list[DeviceTaint] | None = None
    binds_to_node: bool | None = None
    binding_conditions: list[str] | None = None
    binding_failure_conditions: list[str] | None = None
    allow_multiple_allocations: bool | None = None
    node_allocatable_resource_mappings: dict[str, NodeAllocatableResourceMapping] | None = None
    node_allocatable_resources: dict[str, NodeAllocatableResource] | None = None

    @field_validator("attributes", "capacity")
    @classmethod
    def _share(cls, values: dict[str, Any] | None) -> dict[str, Any] | None:
        return share_values(values)  # a cluster's devices repeat a few values: one object each


class ResourceSliceSpec(ApiModel):
    driver: str = ""
    pool: ResourcePool = Field(default_factory=ResourcePool)
    node_name: str | None = None
    node_selector: NodeSelector | None = None
    all_nodes: bool | None = None
    devices: list[Device] | None = None
    per_device_node_selection: bool | None = None
    shared_counters: list[CounterSet] | None = None


class ResourceSlice(TypedObject):
    spec: ResourceSliceSpec = Field(default_factory=ResourceSliceSpec)


# --- DeviceTaintRule (v1beta2 in 1.36, v1 in 1.37) ----------------------------------------------------


class DeviceTaintSelector(ApiModel):
    driver: str | None = None
    pool: str | None = None
    device: str | None = None


class DeviceTaintRuleSpec(ApiModel):
    device_selector: DeviceTaintSelector | None = None
    taint: DeviceTaint = Field(default_factory=DeviceTaint)


class DeviceTaintRuleStatus(ApiModel):
    conditions: list[Condition] | None = None


class DeviceTaintRule(TypedObject):
    spec: DeviceTaintRuleSpec = Field(default_factory=DeviceTaintRuleSpec)
    status: DeviceTaintRuleStatus | None = None
