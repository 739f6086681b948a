"""Defaulting exactly as the API server applies it before validation and storage.

Upstream: ``pkg/apis/resource/v1/defaults.go`` plus the ``+default`` markers in
``staging/src/k8s.io/api/resource/v1/types.go``; ``pkg/apis/scheduling/v1/defaults.go`` for a
PriorityClass's preemption policy; for pods, the parts of ``pkg/apis/core/v1/defaults.go``
the scheduler's filters read (requests from limits, port protocols, host-network ports). The
allocator does *not* default (it trusts stored objects), so offline input must pass through here
first: a claim written with ``count: 0`` is stored with ``count: 1``, and its validation error, if
any, must be about the defaulted value.
Time comes in as an argument: policies/ has no clock.
"""

from __future__ import annotations

from datetime import datetime
from typing import TypeVar

from policies.api import resource as r
from policies.api.base import TypedObject
from policies.api.core import PREEMPT_LOWER_PRIORITY, Container, Pod, PodSpec
from policies.api.quantity import Quantity
from policies.api.scheduling import PriorityClass

T = TypeVar("T", r.ExactDeviceRequest, r.DeviceSubRequest)
ObjT = TypeVar("ObjT", bound=TypedObject)


def _request(req: T) -> T:
    mode = req.allocation_mode or r.EXACT_COUNT
    count = req.count
    if mode == r.EXACT_COUNT and not count:
        count = 1
    tolerations = [_toleration(t) for t in req.tolerations] if req.tolerations is not None else None
    update: dict[str, object] = {"allocation_mode": mode}
    if count != req.count:
        update["count"] = count
    if tolerations is not None:
        update["tolerations"] = tolerations
    return req.model_copy(update=update)


def _toleration(t: r.DeviceToleration) -> r.DeviceToleration:
    return t if t.operator else t.model_copy(update={"operator": "Equal"})


def default_claim_spec(spec: r.ResourceClaimSpec) -> r.ResourceClaimSpec:
    requests = []
    for req in spec.devices.requests or []:
        update: dict[str, object] = {}
        if req.exactly is not None:
            update["exactly"] = _request(req.exactly)
        if req.first_available is not None:
            update["first_available"] = [_request(s) for s in req.first_available]
        requests.append(req.model_copy(update=update))
    if spec.devices.requests is None:
        return spec
    return spec.model_copy(update={"devices": spec.devices.model_copy(update={"requests": requests})})


def _taint(t: r.DeviceTaint, now: datetime) -> r.DeviceTaint:
    if t.time_added is not None:
        return t
    return t.model_copy(update={"time_added": now.replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")})


def _mapping(m: r.NodeAllocatableResourceMapping) -> r.NodeAllocatableResourceMapping:
    """1.36 KEP-5517: an unset allocationMultiplier means 1."""
    if m.allocation_multiplier is not None:
        return m
    return m.model_copy(update={"allocation_multiplier": Quantity.parse("1")})


def _device(d: r.Device, now: datetime) -> r.Device:
    update: dict[str, object] = {}
    if d.taints is not None:
        update["taints"] = [_taint(t, now) for t in d.taints]
    if d.node_allocatable_resource_mappings is not None:
        update["node_allocatable_resource_mappings"] = {
            k: _mapping(m) for k, m in d.node_allocatable_resource_mappings.items()
        }
    return d.model_copy(update=update) if update else d


def _claim_status(status: r.ResourceClaimStatus | None) -> r.ResourceClaimStatus | None:
    """Result tolerations are DeviceTolerations too: the generated defaulter gives them Equal as well."""
    allocation = status.allocation if status is not None else None
    devices = allocation.devices if allocation is not None else None
    if status is None or allocation is None or devices is None or not devices.results:
        return status
    results = [
        res.model_copy(update={"tolerations": [_toleration(t) for t in res.tolerations]})
        if res.tolerations
        else res
        for res in devices.results
    ]
    devices = devices.model_copy(update={"results": results})
    return status.model_copy(update={"allocation": allocation.model_copy(update={"devices": devices})})


def _container(c: Container, host_network: bool) -> Container:
    """upstream SetDefaults_Pod and SetDefaults_ContainerPort: a limit without a request is also the
    request; a port's protocol is TCP; on the host network, the host port is the container port."""
    update: dict[str, object] = {}
    resources = c.resources
    limits = (resources.limits or {}) if resources is not None else {}
    requests = (resources.requests or {}) if resources is not None else {}
    if resources is not None and any(k not in requests for k in limits):
        update["resources"] = resources.model_copy(update={"requests": {**limits, **requests}})
    if c.ports:
        update["ports"] = [
            port.model_copy(
                update={
                    "protocol": port.protocol or "TCP",
                    "host_port": port.host_port or (port.container_port if host_network else port.host_port),
                }
            )
            for port in c.ports
        ]
    return c.model_copy(update=update) if update else c


def _pod_spec(spec: PodSpec) -> PodSpec:
    host_network = bool(spec.host_network)
    update: dict[str, object] = {"containers": [_container(c, host_network) for c in spec.containers]}
    if spec.init_containers is not None:
        update["init_containers"] = [_container(c, host_network) for c in spec.init_containers]
    return spec.model_copy(update=update)


def apply_defaults(obj: ObjT, now: datetime) -> ObjT:
    """The object as the API server would store it; other kinds come back unchanged."""
    if isinstance(obj, r.ResourceClaim):
        update: dict[str, object] = {"spec": default_claim_spec(obj.spec)}
        if obj.status is not None:
            update["status"] = _claim_status(obj.status)
        return obj.model_copy(update=update)
    if isinstance(obj, r.ResourceClaimTemplate):
        template_spec = obj.spec.model_copy(update={"spec": default_claim_spec(obj.spec.spec)})
        return obj.model_copy(update={"spec": template_spec})
    if isinstance(obj, r.ResourceSlice) and obj.spec.devices is not None:
        devices = [_device(d, now) for d in obj.spec.devices]
        return obj.model_copy(update={"spec": obj.spec.model_copy(update={"devices": devices})})
    if isinstance(obj, Pod):
        return obj.model_copy(update={"spec": _pod_spec(obj.spec)})
    if isinstance(obj, r.DeviceTaintRule):
        rule_spec = obj.spec.model_copy(update={"taint": _taint(obj.spec.taint, now)})
        return obj.model_copy(update={"spec": rule_spec})
    if isinstance(obj, PriorityClass) and obj.preemption_policy is None:
        return obj.model_copy(update={"preemption_policy": PREEMPT_LOWER_PRIORITY})
    return obj
