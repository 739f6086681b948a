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

from policies.api.core import Pod
from policies.api.quantity import Quantity
from policies.footprint import pod_requests

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
    return Resource.of(pod_requests(pod))


def non_zero_requests(pod: Pod) -> Resource:
    """The requests the scoring counts, with the defaults for containers that name none."""
    return Resource.of(pod_requests(pod, missing=NON_ZERO_DEFAULTS))
