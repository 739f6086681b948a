"""The parts of core/v1 that DRA decisions and the scheduler's filters read: Pod, Node, Namespace,
ResourceQuota.

Only the fields draguard looks at are typed; everything else a Pod carries (volumes, probes, ...)
rides along as preserved extra data, so a mutating patch or a dry-run echo never drops it.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from policies.api.base import ApiModel, LabelSelector, NodeSelector, NodeSelectorTerm, TypedObject
from policies.api.quantity import Quantity

HOSTNAME_LABEL = "kubernetes.io/hostname"

# core/v1 PreemptionPolicy values (a pod's, and a PriorityClass's).
PREEMPT_LOWER_PRIORITY = "PreemptLowerPriority"
PREEMPT_NEVER = "Never"
PREEMPTION_POLICIES = (PREEMPT_LOWER_PRIORITY, PREEMPT_NEVER)


# --- Pod ---------------------------------------------------------------------------------------------


class ContainerResourceClaim(ApiModel):
    """core/v1 ResourceClaim: a container's reference to one of the pod's claims."""

    name: str = ""
    request: str | None = None


class ResourceRequirements(ApiModel):
    limits: dict[str, Quantity] | None = None
    requests: dict[str, Quantity] | None = None
    claims: list[ContainerResourceClaim] | None = None


class ContainerPort(ApiModel):
    name: str | None = None
    host_port: int | None = None
    container_port: int = 0
    protocol: str | None = None
    host_ip: str | None = Field(default=None, alias="hostIP")


class SecurityContext(ApiModel):
    privileged: bool | None = None


class Container(ApiModel):
    name: str = ""
    image: str | None = None
    ports: list[ContainerPort] | None = None
    resources: ResourceRequirements | None = None
    restart_policy: str | None = None
    security_context: SecurityContext | None = None


class PodResourceClaim(ApiModel):
    name: str = ""
    resource_claim_name: str | None = None
    resource_claim_template_name: str | None = None


class PreferredSchedulingTerm(ApiModel):
    weight: int
    preference: NodeSelectorTerm


class NodeAffinity(ApiModel):
    required_during_scheduling_ignored_during_execution: NodeSelector | None = None
    preferred_during_scheduling_ignored_during_execution: list[PreferredSchedulingTerm] | None = None


class PodAffinityTerm(ApiModel):
    label_selector: LabelSelector | None = None
    namespaces: list[str] | None = None
    topology_key: str = ""
    namespace_selector: LabelSelector | None = None
    match_label_keys: list[str] | None = None
    mismatch_label_keys: list[str] | None = None


class WeightedPodAffinityTerm(ApiModel):
    weight: int = 0
    pod_affinity_term: PodAffinityTerm = Field(default_factory=PodAffinityTerm)


class PodAffinity(ApiModel):
    """Also the shape of PodAntiAffinity."""

    required_during_scheduling_ignored_during_execution: list[PodAffinityTerm] | None = None
    preferred_during_scheduling_ignored_during_execution: list[WeightedPodAffinityTerm] | None = None


class Affinity(ApiModel):
    node_affinity: NodeAffinity | None = None
    pod_affinity: PodAffinity | None = None
    pod_anti_affinity: PodAffinity | None = None


class TopologySpreadConstraint(ApiModel):
    max_skew: int = 0
    topology_key: str = ""
    when_unsatisfiable: str = ""
    label_selector: LabelSelector | None = None
    min_domains: int | None = None
    node_affinity_policy: str | None = None
    node_taints_policy: str | None = None
    match_label_keys: list[str] | None = None


class Toleration(ApiModel):
    key: str | None = None
    operator: str | None = None
    value: str | None = None
    effect: str | None = None
    toleration_seconds: int | None = None


class PodSpec(ApiModel):
    node_name: str | None = None
    node_selector: dict[str, str] | None = None
    affinity: Affinity | None = None
    tolerations: list[Toleration] | None = None
    topology_spread_constraints: list[TopologySpreadConstraint] | None = None
    host_network: bool | None = None
    priority_class_name: str | None = None
    priority: int | None = None
    preemption_policy: str | None = None
    scheduling_gates: list[dict[str, Any]] | None = None
    volumes: list[dict[str, Any]] | None = None
    containers: list[Container] = Field(default_factory=list)
    init_containers: list[Container] | None = None
    resource_claims: list[PodResourceClaim] | None = None
    resources: ResourceRequirements | None = None
    overhead: dict[str, Quantity] | None = None
    scheduler_name: str | None = None
    service_account_name: str | None = None
    restart_policy: str | None = None


class PodResourceClaimStatus(ApiModel):
    name: str = ""
    resource_claim_name: str | None = None


class NodeAllocatableMappedResources(ApiModel):
    """KEP-5517 alpha2 (1.37): a mapped amount charged once for the claim."""

    name: str = ""
    quantity: Quantity | None = None


class NodeAllocatableOverheadResources(ApiModel):
    """KEP-5517 alpha2 (1.37): overhead charged per pod and per referencing container."""

    name: str = ""
    per_pod: Quantity | None = None
    per_container: Quantity | None = None


class NodeAllocatableResourceClaimStatus(ApiModel):
    """KEP-5517 pod status entry; carries both the 1.36 (``resources``) and 1.37 (``mapping``,
    ``overhead``) shapes, since clusters in the field serve either."""

    resource_claim_name: str = ""
    containers: list[str] | None = None
    resources: dict[str, Quantity] | None = None
    mapping: list[NodeAllocatableMappedResources] | None = None
    overhead: list[NodeAllocatableOverheadResources] | None = None


class ContainerExtendedResourceRequest(ApiModel):
    """Which claim request serves a container's extended resource (DRAExtendedResource)."""

    container_name: str = ""
    resource_name: str = ""
    request_name: str = ""


class PodExtendedResourceClaimStatus(ApiModel):
    """The scheduler-made claim behind a pod's extended resources (KEP-5004)."""

    request_mappings: list[ContainerExtendedResourceRequest] | None = None
    resource_claim_name: str = ""


class PodCondition(ApiModel):
    type: str = ""
    status: str = ""
    reason: str | None = None


class ContainerStatus(ApiModel):
    """What the scheduler reads of a container's status: the resources of an in-place resize."""

    name: str = ""
    resources: ResourceRequirements | None = None
    allocated_resources: dict[str, Quantity] | None = None


class PodStatus(ApiModel):
    phase: str | None = None
    conditions: list[PodCondition] | None = None
    nominated_node_name: str | None = None
    start_time: str | None = None
    container_statuses: list[ContainerStatus] | None = None
    init_container_statuses: list[ContainerStatus] | None = None
    resource_claim_statuses: list[PodResourceClaimStatus] | None = None
    extended_resource_claim_status: PodExtendedResourceClaimStatus | None = None
    node_allocatable_resource_claim_statuses: list[NodeAllocatableResourceClaimStatus] | None = None


class Pod(TypedObject):
    spec: PodSpec = Field(default_factory=PodSpec)
    status: PodStatus | None = None


# --- Node, Namespace, ResourceQuota -------------------------------------------------------------------


class Taint(ApiModel):
    key: str = ""
    value: str | None = None
    effect: str = ""
    time_added: str | None = None


class NodeSpec(ApiModel):
    unschedulable: bool | None = None
    taints: list[Taint] | None = None


class ContainerImage(ApiModel):
    names: list[str] | None = None
    size_bytes: int | None = None


class NodeStatus(ApiModel):
    allocatable: dict[str, Quantity] | None = None
    capacity: dict[str, Quantity] | None = None
    images: list[ContainerImage] | None = None


class Node(TypedObject):
    spec: NodeSpec | None = None
    status: NodeStatus | None = None

    @property
    def labels(self) -> dict[str, str]:
        return self.metadata.labels or {}


class Namespace(TypedObject):
    pass


class ScopedResourceSelectorRequirement(ApiModel):
    scope_name: str
    operator: str
    values: list[str] | None = None


class ScopeSelector(ApiModel):
    match_expressions: list[ScopedResourceSelectorRequirement] | None = None


class ResourceQuotaSpec(ApiModel):
    hard: dict[str, Quantity] | None = None
    scopes: list[str] | None = None
    scope_selector: ScopeSelector | None = None


class ResourceQuotaStatus(ApiModel):
    hard: dict[str, Quantity] | None = None
    used: dict[str, Quantity] | None = None


class ResourceQuota(TypedObject):
    spec: ResourceQuotaSpec = Field(default_factory=ResourceQuotaSpec)
    status: ResourceQuotaStatus | None = None
