"""Resource amounts as kube-scheduler counts them: what a pod requests, what a node has.

Upstream: ``pkg/scheduler/framework/types.go`` (``Resource``, ``NewResource``, ``Add``),
``pkg/scheduler/util/utils.go`` (``IsScalarResourceName``, ``DefaultMilliCPURequest``,
``DefaultMemoryRequest``), ``pkg/apis/core/v1/helper/helpers.go`` (``IsExtendedResourceName`` and
friends). A pod's requests are upstream ``PodRequests`` (init containers, restartable sidecars,
pod-level resources, overhead): :func:`policies.footprint.pod_requests`, the one port of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from policies.api.core import Container, Pod, ResourceRequirements
from policies.api.quantity import Quantity
from policies.footprint import max_lists, pod_requests

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"
DEVICE_CLASS_PREFIX = "deviceclass.resource.kubernetes.io/"

# What a container that names no cpu or memory request counts as when nodes are scored (never when
# they are filtered): upstream DefaultMilliCPURequest and DefaultMemoryRequest.
NON_ZERO_DEFAULTS: Mapping[str, Quantity] = MappingProxyType(
    {CPU: Quantity.parse("100m"), MEMORY: Quantity.parse("200Mi")}
)


def is_prefixed_native(name: str) -> bool:
    return "kubernetes.io/" in name


def is_extended(name: str) -> bool:
    """Outside the kubernetes.io namespace and with a domain (``nvidia.com/gpu``)."""
    return "/" in name and not is_prefixed_native(name) and not name.startswith("requests.")


def is_scalar(name: str) -> bool:
    """The resources ``Resource`` keeps by name: extended, hugepages, prefixed native, attachable volumes."""
    return (
        is_extended(name)
        or name.startswith("hugepages-")
        or is_prefixed_native(name)
        or name.startswith("attachable-volumes-")
    )


def is_dra_extended(name: str) -> bool:
    """upstream IsDRAExtendedResourceName: an extended resource, or a DeviceClass's implicit name."""
    return is_extended(name) or name.startswith(DEVICE_CLASS_PREFIX)


@dataclass(frozen=True)
class Resource:
    """upstream framework.Resource: cpu in millicores, the rest in units, scalars by name."""

    milli_cpu: int = 0
    memory: int = 0
    ephemeral_storage: int = 0
    allowed_pods: int = 0
    scalars: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, resources: Mapping[str, Quantity]) -> Resource:
        """upstream NewResource: names the scheduler does not count are dropped."""
        amounts = {CPU: 0, MEMORY: 0, EPHEMERAL_STORAGE: 0, PODS: 0}
        scalars: dict[str, int] = {}
        for name, quantity in resources.items():
            if name == CPU:
                amounts[CPU] += quantity.milli_value()
            elif name in amounts:
                amounts[name] += quantity.value()
            elif is_scalar(name):
                scalars[name] = scalars.get(name, 0) + quantity.value()
        return cls(amounts[CPU], amounts[MEMORY], amounts[EPHEMERAL_STORAGE], amounts[PODS], scalars)

    def plus(self, other: Resource) -> Resource:
        scalars = dict(self.scalars)
        for name, value in other.scalars.items():
            scalars[name] = scalars.get(name, 0) + value
        return Resource(
            self.milli_cpu + other.milli_cpu,
            self.memory + other.memory,
            self.ephemeral_storage + other.ephemeral_storage,
            self.allowed_pods + other.allowed_pods,
            scalars,
        )

    def is_zero(self) -> bool:
        return not (self.milli_cpu or self.memory or self.ephemeral_storage or self.scalars)


def requests(pod: Pod) -> Resource:
    """What NodeResourcesFit fits on a node for the pod (upstream computePodResourceRequest)."""
    return Resource.of(pod_requests(as_resized(pod)))


def non_zero_requests(pod: Pod) -> Resource:
    """The requests the scoring counts, with the defaults for containers that name none."""
    return Resource.of(pod_requests(as_resized(pod), missing=NON_ZERO_DEFAULTS))


def as_resized(pod: Pod) -> Pod:
    """The pod with each container's requests as the scheduler counts them during an in-place
    resize (InPlacePodVerticalScaling, GA): the larger of the spec's, the status's and the
    allocated resources, for containers and sidecars whose status reports resources; only the
    status's and the allocated ones while the resize is infeasible (upstream component-helpers
    ``resource/helpers.go`` ``AggregateContainerRequests``, ``determineContainerReqs``). The pod
    itself when no container's count changes (the common case: a running pod's status repeats
    its spec)."""
    status = pod.status
    if status is None or not (status.container_statuses or status.init_container_statuses):
        return pod
    by_name = {
        c.name: c for c in (*(status.container_statuses or ()), *(status.init_container_statuses or ()))
    }
    infeasible = any(
        c.type == "PodResizePending" and c.reason == "Infeasible" for c in status.conditions or ()
    )
    counted = [
        *((c, True) for c in pod.spec.containers),
        *((c, c.restart_policy == "Always") for c in pod.spec.init_containers or ()),
    ]
    changed: dict[str, dict[str, Quantity]] = {}
    for container, uses_status in counted:
        found = by_name.get(container.name)
        if not uses_status or found is None or found.resources is None:
            continue
        asked = (container.resources.requests if container.resources is not None else None) or {}
        wanted = max_lists(
            {} if infeasible else asked, found.resources.requests or {}, found.allocated_resources or {}
        )
        if wanted != asked:
            changed[container.name] = wanted
    if not changed:
        return pod

    def resized(container: Container) -> Container:
        if container.name not in changed:
            return container
        resources = (container.resources or ResourceRequirements()).model_copy(
            update={"requests": changed[container.name]}
        )
        return container.model_copy(update={"resources": resources})

    spec = pod.spec.model_copy(
        update={
            "containers": [resized(c) for c in pod.spec.containers],
            "init_containers": [resized(c) for c in pod.spec.init_containers]
            if pod.spec.init_containers
            else None,
        }
    )
    return pod.model_copy(update={"spec": spec})
