"""Devices -> node-allocatable resources (KEP-5517), and a pod's footprint as the scheduler counts it.

A DRA driver can hand out CPU, memory or hugepages (a CPU driver), or need some of them for its
devices (an accelerator pinning host memory). KEP-5517 lets a device say so, in one of two shapes
(dra-reference 6.2 and 6.3), both of which clusters in the field serve:

* 1.36 ``nodeAllocatableResourceMappings[R] = {capacityKey?, allocationMultiplier?}``: an amount
  per allocated device (the multiplier, default 1) or, with ``capacityKey``, the consumed capacity
  times the multiplier;
* 1.37 ``nodeAllocatableResources[R] = {mapping?, overhead?}``: ``mapping`` yields
  ``consumedCapacity[capacityKey] * capacityMultiplier`` or ``deviceMultiplier`` per device;
  ``overhead`` costs ``perPod`` once per pod and ``perContainer`` once per referencing container.

What a claim yields is a :class:`ClaimFootprint`. A pod's footprint follows upstream
``k8s.io/component-helpers/resource/helpers.go`` ``PodRequests``/``PodLimits`` with
``UseDRANodeAllocatableResourceClaimStatus`` (``getDRANodeAllocatableResources``,
``aggregateContainerResourcesByFn``): each claim's mapped amounts and ``perPod`` are charged for the
pod's whole life, its ``perContainer`` joins the requests of each container that references it (so
an init container counts it towards its own peak, regular containers and sidecars add it up); the
containers are then aggregated with the init and sidecar rules, pod-level requests replace
cpu/memory/hugepages, and pod overhead comes last.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from policies.api.core import Container, NodeAllocatableResourceClaimStatus, Pod
from policies.api.quantity import Quantity
from policies.api.resource import AllocationResult, Device, ResourceSlice

ResourceList = Mapping[str, Quantity]
DeviceKey = tuple[str, str, str]
"""``(driver, pool, device)``."""

HUGEPAGES_PREFIX = "hugepages-"
# Resources that pod-level requests/limits may set (helpers.go supportedPodLevelResources).
POD_LEVEL_RESOURCES = frozenset({"cpu", "memory"})
SIDECAR_RESTART_POLICY = "Always"
_EMPTY: ResourceList = MappingProxyType({})


class FootprintError(ValueError):
    """An allocation whose footprint cannot be computed (the scheduler fails such a pod too)."""


def add_lists(*lists: ResourceList) -> dict[str, Quantity]:
    """The per-resource sum (upstream addResourceList, starting from an empty list)."""
    total: dict[str, Quantity] = {}
    for resources in lists:
        for name, amount in resources.items():
            total[name] = total[name].add(amount) if name in total else amount
    return total


def _max_into(target: dict[str, Quantity], other: ResourceList) -> None:
    """upstream maxResourceList: a resource missing from ``target`` is taken as is."""
    for name, amount in other.items():
        if name not in target or amount.cmp(target[name]) > 0:
            target[name] = amount


def max_lists(*lists: ResourceList) -> dict[str, Quantity]:
    """The per-resource maximum (upstream resource helpers' ``max``)."""
    found: dict[str, Quantity] = {}
    for resources in lists:
        _max_into(found, resources)
    return found


@dataclass(frozen=True)
class ClaimFootprint:
    """What one allocated claim yields: ``mapped`` once per pod (1.36 mappings, 1.37 ``mapping``),
    ``per_pod`` once per pod and ``per_container`` for each container that references the claim."""

    mapped: ResourceList = field(default_factory=dict)
    per_pod: ResourceList = field(default_factory=dict)
    per_container: ResourceList = field(default_factory=dict)

    @property
    def has_mapping(self) -> bool:
        """A direct mapping: the devices *are* node resources, which one pod holds (6.3 sharing)."""
        return bool(self.mapped)

    @property
    def is_empty(self) -> bool:
        return not (self.mapped or self.per_pod or self.per_container)

    def plus(self, other: ClaimFootprint) -> ClaimFootprint:
        return ClaimFootprint(
            add_lists(self.mapped, other.mapped),
            add_lists(self.per_pod, other.per_pod),
            add_lists(self.per_container, other.per_container),
        )

    def for_pod(self, references: int) -> dict[str, Quantity]:
        """The amounts one pod is charged when ``references`` of its containers name the claim."""
        per_container = {name: q.mul_int(references) for name, q in self.per_container.items()}
        return add_lists(self.mapped, self.per_pod, per_container if references else {})


def device_index(slices: Iterable[ResourceSlice]) -> dict[DeviceKey, Device]:
    """Devices by ``(driver, pool, device)``; a pool's newest generation wins, as for the allocator."""
    newest: dict[tuple[str, str], int] = {}
    index: dict[DeviceKey, Device] = {}
    for s in slices:
        pool = (s.spec.driver, s.spec.pool.name)
        generation = s.spec.pool.generation
        if generation < newest.get(pool, generation):
            continue
        if generation > newest.get(pool, generation):
            index = {k: d for k, d in index.items() if k[:2] != pool}
        newest[pool] = generation
        for device in s.spec.devices or ():
            index[(s.spec.driver, s.spec.pool.name, device.name)] = device
    return index


def yields_node_resources(device: Device) -> bool:
    """Whether the device declares node-allocatable resources in either shape."""
    return bool(device.node_allocatable_resources or device.node_allocatable_resource_mappings)


def declares_mapping(device: Device) -> bool:
    """Whether the device maps node resources directly (1.36 mappings, 1.37 ``mapping``): then it
    *is* node capacity, which one pod holds (dra-reference 6.3 sharing)."""
    if device.node_allocatable_resources:
        return any(r.mapping is not None for r in device.node_allocatable_resources.values())
    return bool(device.node_allocatable_resource_mappings)


def _mapped(
    key: str | None, multiplier: Quantity | None, consumed: ResourceList | None, where: str
) -> Quantity | None:
    """A mapped amount: ``multiplier`` per device, or with ``key`` the consumed capacity times it;
    None when the allocation consumed none of that capacity (the mapping then yields nothing)."""
    factor = multiplier or Quantity.from_int(1)
    if not key:
        return factor
    if consumed is None:
        raise FootprintError(f"{where} is mapped from capacity {key}, but the allocation consumes none")
    amount = consumed.get(key)
    return None if amount is None else amount.mul(factor)


def device_footprint(device: Device, consumed: ResourceList | None, device_id: str) -> ClaimFootprint:
    """One allocated device's contribution (``consumed`` is its result's consumedCapacity).

    A device that declares the 1.37 field is read in that shape, otherwise in the 1.36 one.
    """
    mapped: dict[str, Quantity] = {}
    per_pod: dict[str, Quantity] = {}
    per_container: dict[str, Quantity] = {}
    legacy = {} if device.node_allocatable_resources else (device.node_allocatable_resource_mappings or {})
    for name, old in legacy.items():
        amount = _mapped(old.capacity_key, old.allocation_multiplier, consumed, f"device {device_id}: {name}")
        if amount is not None:
            mapped[name] = amount
    for name, resource in (device.node_allocatable_resources or {}).items():
        mapping, overhead = resource.mapping, resource.overhead
        if mapping is not None and (mapping.capacity_key or mapping.device_multiplier is not None):
            key, factor = mapping.capacity_key, mapping.capacity_multiplier or mapping.device_multiplier
            amount = _mapped(key, factor, consumed, f"device {device_id}: {name}")
            if amount is not None:
                mapped[name] = amount
        if overhead is not None and overhead.per_pod is not None:
            per_pod[name] = overhead.per_pod
        if overhead is not None and overhead.per_container is not None:
            per_container[name] = overhead.per_container
    return ClaimFootprint(mapped, per_pod, per_container)


def claim_footprint(
    allocation: AllocationResult | None, devices: Mapping[DeviceKey, Device]
) -> ClaimFootprint:
    """The footprint of a claim's allocation, summed over its devices (admin-access results
    excluded: an admin sees a device without getting it). Devices missing from ``devices`` (their
    slice is gone) contribute nothing."""
    total = ClaimFootprint()
    results = (allocation.devices.results or []) if allocation is not None and allocation.devices else []
    for result in results:
        if result.admin_access:
            continue
        device = devices.get((result.driver, result.pool, result.device))
        if device is None:
            continue
        device_id = f"{result.driver}/{result.pool}/{result.device}"
        total = total.plus(device_footprint(device, result.consumed_capacity, device_id))
    return total


def status_footprint(entry: NodeAllocatableResourceClaimStatus) -> ClaimFootprint:
    """A claim's footprint as the scheduler recorded it in ``pod.status`` (either shape)."""
    mapped = add_lists(
        entry.resources or {},
        {m.name: m.quantity for m in entry.mapping or () if m.quantity is not None},
    )
    per_pod = {o.name: o.per_pod for o in entry.overhead or () if o.per_pod is not None}
    per_container = {o.name: o.per_container for o in entry.overhead or () if o.per_container is not None}
    return ClaimFootprint(mapped, per_pod, per_container)


@dataclass(frozen=True)
class DraShares:
    """A pod's DRA amounts as upstream charges them (helpers.go ``draNodeAllocatableResources``):
    ``fixed`` for the pod's whole life (mapped amounts, ``perPod``, and the ``perContainer`` of
    references to containers the spec does not have), ``per_container`` with its container."""

    fixed: ResourceList = field(default_factory=dict)
    per_container: Mapping[str, ResourceList] = field(default_factory=dict)


def dra_shares(pod: Pod, claims: Iterable[ClaimUse]) -> DraShares:
    names = [c.name for c in all_containers(pod)]
    fixed: dict[str, Quantity] = {}
    per_container: dict[str, dict[str, Quantity]] = {}
    for use in claims:
        footprint = use.footprint
        fixed = add_lists(fixed, footprint.mapped, footprint.per_pod)
        if not footprint.per_container:
            continue
        known = [name for name in names if name in use.containers]
        for name in known:
            per_container[name] = add_lists(per_container.get(name, _EMPTY), footprint.per_container)
        unknown = len(use.containers) - len(known)
        if unknown > 0:
            fixed = add_lists(fixed, {r: q.mul_int(unknown) for r, q in footprint.per_container.items()})
    return DraShares(fixed, per_container)


def _declared_only(pod: Pod, shares: DraShares) -> DraShares:
    """Without the amounts for resources no container declares a limit for (the kubelet leaves
    those unlimited), hugepages excepted (helpers.go ``dropDRAValuesForUndeclaredLimits``)."""
    declared = {n for c in all_containers(pod) if c.resources is not None for n in c.resources.limits or ()}

    def kept(amounts: ResourceList) -> dict[str, Quantity]:
        return {n: q for n, q in amounts.items() if n in declared or n.startswith(HUGEPAGES_PREFIX)}

    return DraShares(kept(shares.fixed), {name: kept(a) for name, a in shares.per_container.items()})


def all_containers(pod: Pod) -> list[Container]:
    """Init containers (sidecars included) then regular containers, in spec order."""
    return [*(pod.spec.init_containers or ()), *pod.spec.containers]


def referencing_containers(pod: Pod, pod_claim: str) -> tuple[str, ...]:
    """Names of the containers whose ``resources.claims`` name the pod claim ``pod_claim``."""
    return tuple(
        c.name
        for c in all_containers(pod)
        if c.resources is not None and any(ref.name == pod_claim for ref in c.resources.claims or ())
    )


@dataclass(frozen=True)
class ClaimUse:
    """One claim as one pod uses it: its footprint and the pod's containers that name it."""

    footprint: ClaimFootprint
    containers: tuple[str, ...]


def _container_lists(
    pod: Pod, limits: bool, per_container: Mapping[str, ResourceList], missing: ResourceList = _EMPTY
) -> tuple[list[ResourceList], list[tuple[bool, ResourceList]]]:
    def of(c: Container) -> ResourceList:
        r = c.resources
        values = ((r.limits if limits else r.requests) if r is not None else None) or _EMPTY
        if missing:
            values = {**missing, **values}
        return add_lists(values, per_container[c.name]) if c.name in per_container else values

    regular = [of(c) for c in pod.spec.containers]
    init = [(c.restart_policy == SIDECAR_RESTART_POLICY, of(c)) for c in pod.spec.init_containers or ()]
    return regular, init


def aggregate_containers(
    pod: Pod, limits: bool = False, dra: DraShares = DraShares(), missing: ResourceList = _EMPTY
) -> dict[str, Quantity]:
    """Container requests (or limits), each with its share of ``dra``, with the sidecar rules
    (KEP-753): regular containers and sidecars add up; each init container needs itself plus the
    sidecars started before it; the pod needs the larger of the two, plus ``dra.fixed``.
    ``missing``: amounts for a container that does not name the resource (upstream
    ``NonMissingContainerRequests``, the scheduler's 100m CPU and 200Mi for scoring)."""
    regular, init = _container_lists(pod, limits, dra.per_container, missing)
    total = add_lists(*regular)
    sidecars: dict[str, Quantity] = {}
    init_peak: dict[str, Quantity] = {}
    for is_sidecar, resources in init:
        if is_sidecar:
            total = add_lists(total, resources)
            sidecars = add_lists(sidecars, resources)
            _max_into(init_peak, sidecars)
        else:
            _max_into(init_peak, add_lists(resources, sidecars))
    _max_into(total, init_peak)
    return add_lists(total, dra.fixed)


def dra_resources(claims: Iterable[ClaimUse]) -> dict[str, Quantity]:
    """What the claims yield in all, every claim once per pod (the footprint a dry run reports)."""
    return add_lists(*(use.footprint.for_pod(len(use.containers)) for use in claims))


def _pod_level(pod: Pod, limits: bool) -> dict[str, Quantity]:
    """Pod-level requests (or limits) of the resources pods may set there."""
    r = pod.spec.resources
    values = ((r.limits if limits else r.requests) if r is not None else None) or {}
    return {n: q for n, q in values.items() if n in POD_LEVEL_RESOURCES or n.startswith(HUGEPAGES_PREFIX)}


def pod_requests(
    pod: Pod, claims: Sequence[ClaimUse] = (), missing: ResourceList = _EMPTY
) -> dict[str, Quantity]:
    """upstream PodRequests (spec resources, with the DRA claims' footprint): what the scheduler
    fits on a node and the kubelet admits; ``missing`` as for :func:`aggregate_containers`."""
    requests = aggregate_containers(pod, dra=dra_shares(pod, claims), missing=missing)
    requests.update(_pod_level(pod, limits=False))
    return add_lists(requests, pod.spec.overhead or {})


def pod_limits(pod: Pod, claims: Sequence[ClaimUse] = ()) -> dict[str, Quantity]:
    """upstream PodLimits: DRA amounts only raise limits the containers declare (an undeclared
    limit stays unlimited), hugepages always; overhead only raises non-zero limits."""
    limits = aggregate_containers(pod, limits=True, dra=_declared_only(pod, dra_shares(pod, claims)))
    limits.update(_pod_level(pod, limits=True))
    for name, amount in (pod.spec.overhead or {}).items():
        if name in limits and not limits[name].is_zero():
            limits[name] = limits[name].add(amount)
    return limits


def status_claims(pod: Pod) -> list[ClaimUse]:
    """The claims the scheduler recorded in ``status.nodeAllocatableResourceClaimStatuses``."""
    entries = (pod.status.node_allocatable_resource_claim_statuses or []) if pod.status else []
    return [ClaimUse(status_footprint(e), tuple(e.containers or ())) for e in entries]


def difference(more: ResourceList, less: ResourceList) -> dict[str, Quantity]:
    """``more - less`` for the resources where it is positive."""
    out = {}
    for name, amount in more.items():
        delta = amount.sub(less[name]) if name in less else amount
        if delta.sign() > 0:
            out[name] = delta
    return out
