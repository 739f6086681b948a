"""Extended resources backed by DRA (KEP-5004, DRAExtendedResource): the class that names the
resource and the claim the scheduler builds for the pod.

Upstream ``pkg/scheduler/framework/plugins/dynamicresources/extendeddynamicresources.go``
(``preFilterExtendedResources``, ``filterExtendedResources``, ``createRequestsAndMappings``) and
``extended/`` (the resource name -> DeviceClass mapping: a class's ``spec.extendedResourceName``,
and for every class its implicit name ``deviceclass.resource.kubernetes.io/<class>``).

A pod asking for ``nvidia.com/gpu: 1`` on a node whose allocatable has no ``nvidia.com/gpu`` gets
its devices through an in-memory claim (upstream names it ``<extended-resources>`` until binding):
one exact-count request per container and resource, of the class that backs the resource, named
``container-<index>-request-<index>`` (the container's index among init and regular containers,
the resource's among the container's sorted request names). A non-sidecar init container reuses
the devices of the long-lived containers after it before asking for more, and only the largest
such request is kept. The claim is built per node, from what that node does not offer itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import cached_property

from policies.api.base import ObjectMeta, OwnerReference
from policies.api.core import Container, Pod
from policies.api.resource import (
    DeviceClaim,
    DeviceClass,
    DeviceRequest,
    ExactDeviceRequest,
    ResourceClaim,
    ResourceClaimSpec,
)
from policies.scheduler.resources import DEVICE_CLASS_PREFIX, is_dra_extended

IN_MEMORY_NAME = "<extended-resources>"
EXTENDED_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"


class DeviceClassResolver:
    """Resource name -> the DeviceClass that backs it (upstream DeviceClassResolver)."""

    def __init__(self, classes: Iterable[DeviceClass]) -> None:
        self._classes = tuple(classes)

    @cached_property
    def _by_name(self) -> Mapping[str, DeviceClass]:
        """Implicit names first, then explicit ones. Of classes naming the same resource the one
        written last wins: the scheduler's cache (``extended/cache.go`` ``OnDeviceClassEvent``)
        maps the name to the class of the latest Added or Modified event, and the API server's
        resourceVersion orders the writes (then the creation time, for manifests without one;
        ties: the last name, the order of a fresh scheduler's initial list)."""
        mapping: dict[str, DeviceClass] = {DEVICE_CLASS_PREFIX + c.name: c for c in self._classes}
        explicit = sorted((c for c in self._classes if c.spec.extended_resource_name), key=_written)
        for c in explicit:
            mapping[c.spec.extended_resource_name or ""] = c
        return mapping

    def get(self, name: str) -> DeviceClass | None:
        return self._by_name.get(name) if is_dra_extended(name) else None

    def backs(self, name: str) -> bool:
        return self.get(name) is not None


def _written(device_class: DeviceClass) -> tuple[int, str, str]:
    """When the class was last written, as far as its manifest tells."""
    version = device_class.metadata.resource_version or ""
    return (
        int(version) if version.isdigit() else 0,
        device_class.metadata.creation_timestamp or "",
        device_class.name,
    )


def _container_request(
    index: int, container: Container, resource: str, class_name: str, reusable: list[DeviceRequest | None]
) -> DeviceRequest | None:
    """upstream createResourceRequestAndMappings: the container's own request for ``resource``
    beyond what ``reusable`` requests (of later long-lived containers) already give it."""
    requests = (container.resources.requests if container.resources else None) or {}
    quantity = requests.get(resource)
    wanted = quantity.value() if quantity is not None and quantity.is_integer() else 0
    if not wanted:
        return None
    covered = 0
    for request in reusable:
        if request is not None and request.exactly is not None:
            covered += request.exactly.count or 0
            if covered >= wanted:
                return None
    position = sorted(requests).index(resource)
    return DeviceRequest(
        name=f"container-{index}-request-{position}",
        exactly=ExactDeviceRequest(
            device_class_name=class_name, allocation_mode="ExactCount", count=wanted - covered
        ),
    )


def claim_requests(pod: Pod, resources: Iterable[str], resolver: DeviceClassResolver) -> list[DeviceRequest]:
    """The implicit claim's requests for ``resources`` (upstream createRequestsAndMappings)."""
    containers = [*(pod.spec.init_containers or ()), *pod.spec.containers]
    init_count = len(pod.spec.init_containers or ())
    long_lived = [i for i, c in enumerate(containers) if i >= init_count or c.restart_policy == "Always"]
    short_lived = [i for i in range(init_count) if i not in long_lived]
    out: list[DeviceRequest] = []
    for resource in sorted(resources):
        device_class = resolver.get(resource)
        if device_class is None:
            continue
        by_long: list[DeviceRequest | None] = [None] * len(containers)
        for i in long_lived:
            by_long[i] = _container_request(i, containers[i], resource, device_class.name, [])
        largest: DeviceRequest | None = None
        for i in short_lived:
            request = _container_request(i, containers[i], resource, device_class.name, by_long[i:])
            if request is not None and (largest is None or _count(largest) < _count(request)):
                largest = request
        out += [r for r in (largest, *by_long) if r is not None]
    return sorted(out, key=lambda r: r.name)


def _count(request: DeviceRequest) -> int:
    return (request.exactly.count or 0) if request.exactly is not None else 0


def implicit_claim(pod: Pod, requests: list[DeviceRequest]) -> ResourceClaim:
    """The in-memory claim upstream's PreFilter makes, with the requests for one node."""
    return ResourceClaim(
        apiVersion="resource.k8s.io/v1",
        kind="ResourceClaim",
        metadata=ObjectMeta(
            name=IN_MEMORY_NAME,
            namespace=pod.namespace,
            generate_name=f"{pod.name}-extended-resources-",
            annotations={EXTENDED_CLAIM_ANNOTATION: "true"},
            owner_references=[
                OwnerReference(
                    api_version="v1", kind="Pod", name=pod.name, uid=pod.metadata.uid or "", controller=True
                )
            ],
        ),
        spec=ResourceClaimSpec(devices=DeviceClaim(requests=requests)),
    )


def existing_claim(pod: Pod, claims: Iterable[ResourceClaim]) -> ResourceClaim | None:
    """The pod's extended-resource claim from an earlier attempt (upstream findExtendedResourceClaim)."""
    for claim in claims:
        if (claim.metadata.annotations or {}).get(EXTENDED_CLAIM_ANNOTATION) != "true":
            continue
        for owner in claim.metadata.owner_references or ():
            if owner.name == pod.name and owner.controller and owner.uid == (pod.metadata.uid or ""):
                return claim
    return None
