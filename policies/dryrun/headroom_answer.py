"""The headroom's answer (kind ``HeadroomAnswer``): how many copies fit, where, and what stops the next.

One shape for ``draguard headroom -o json|yaml`` and ``POST /v1/dryrun`` with ``"headroom": true``
(with ``elapsedMs``). Besides the scheduler's message for the copy that fits nowhere, the limit
carries the DRA detail the message leaves out, read from the cluster as the copies left it with
the counts of ``draguard devices`` (:mod:`policies.availability`): per DeviceClass the pod asks
for, the devices still free (per zone) and tainted; the shared counters exhausted and on how many
nodes; the consumable capacity left. When a quota stops the copies, its usage with the copies'
charges.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Literal

from pydantic import Field

from policies.api.core import Pod
from policies.api.quantity import Quantity
from policies.api.resource import DeviceClaim
from policies.availability import ZONE_LABEL, Availability, PoolStatus, Tally
from policies.dryrun.answer import PodAnswer
from policies.dryrun.headroom import Headroom, Stop
from policies.dryrun.run import to_answer
from policies.footprint import add_lists
from policies.outputs import API_VERSION, OutputModel, Version
from policies.quota import folded, hard_of
from policies.snapshot import Snapshot

ZERO = Quantity.from_int(0)
Kind = Literal["Scheduler", "Quota", "Max", "Deadline", "Footprint"]


class NodeCopies(OutputModel):
    node: str
    zone: str | None = None
    copies: int = Field(ge=1)


class ZoneCopies(OutputModel):
    zone: str = Field(description="the nodes' topology.kubernetes.io/zone label; '' for nodes without it")
    copies: int = Field(ge=1)


class QuotaUse(OutputModel):
    name: str
    hard: dict[str, str]
    used: dict[str, str] = Field(
        description="status.used, plus the DRA footprints draguard charged, plus the copies' charges"
    )


class Limit(OutputModel):
    """What stops the next copy."""

    by: Kind = Field(
        description="Scheduler: it fits nowhere; Quota: a ResourceQuota refuses it (or its claim); "
        "Max: the maximum asked for; Deadline: time ran out; Footprint: its devices' node-allocatable "
        "resources cannot be computed"
    )
    message: str = Field(description="the scheduler's PodScheduled message, or the API server's refusal")
    reason: str | None = Field(default=None, description="Scheduler: Unschedulable or SchedulerError")
    detail: list[str] = Field(
        default=[],
        description="the DRA detail: free devices of each class the pod asks for, counters, capacity",
    )
    nominated: str | None = Field(
        default=None, description="Scheduler: the node preemption would nominate, evicting victims"
    )
    victims: list[str] = Field(default=[])
    quota: QuotaUse | None = Field(default=None, description="Quota: the quota that refuses it")


class HeadroomAnswer(OutputModel):
    """``draguard headroom -o json|yaml``."""

    api_version: Version = API_VERSION
    kind: Literal["HeadroomAnswer"] = "HeadroomAnswer"
    pod: str = Field(description="namespace/name of the pod whose copies were placed")
    copies: int = Field(ge=0, description="copies that fit, one after another")
    max: int | None = Field(default=None, ge=1, description="the most copies asked for")
    nodes: list[NodeCopies] = Field(default=[], description="where they went, most copies first")
    zones: list[ZoneCopies] = Field(default=[], description="the same per zone")
    order: list[str] = Field(default=[], description="the node of each copy, in placement order")
    limit: Limit
    charge: dict[str, str] | None = Field(
        default=None, description="what one copy is charged by the namespace's ResourceQuotas"
    )
    quotas: list[QuotaUse] = Field(default=[], description="the namespace's quotas after the copies")
    not_checked: list[str] = Field(default=[], description="what the answer does not account for")
    features: list[str] = Field(default=[], description="feature gates changed from 1.36's defaults")


class HeadroomResponse(HeadroomAnswer):
    """``POST /v1/dryrun`` with ``"headroom": true``: the same, and how long it took."""

    kind: Literal["HeadroomResponse"] = "HeadroomResponse"  # type: ignore[assignment]
    elapsed_ms: float = Field(ge=0)


def requested_classes(pod: Pod, snapshot: Snapshot) -> list[str]:
    """The DeviceClasses the pod's claims and templates name (firstAvailable's too), in order."""
    names: dict[str, None] = {}
    for ref in pod.spec.resource_claims or ():
        devices: DeviceClaim | None = None
        if ref.resource_claim_name:
            claim = snapshot.claims.get((pod.namespace, ref.resource_claim_name))
            devices = claim.spec.devices if claim is not None else None
        elif ref.resource_claim_template_name:
            found = snapshot.templates.get((pod.namespace, ref.resource_claim_template_name))
            devices = found.spec.spec.devices if found is not None else None
        for request in (devices.requests or ()) if devices is not None else ():
            if request.exactly is not None:
                names[request.exactly.device_class_name] = None
            for sub in request.first_available or ():
                names[sub.device_class_name] = None
    return list(names)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def device_detail(availability: Availability, classes: Iterable[str]) -> list[str]:
    """Per class: devices free of total (per zone) and tainted, then its pools' counters and
    capacity (:func:`_pool_detail`)."""
    by_name = {c.name: c for c in availability.classes}
    pools = {p.key: p for p in availability.pools}
    lines = []
    for name in classes:
        status = by_name.get(name)
        if status is None:
            lines.append(f"devices of class {name}: no such DeviceClass")
            continue
        counts = status.counts
        zones = ", ".join(f"zone {z}: {c.available}" for z, c in status.zones)
        line = f"devices of class {name}: {counts.available} free of {counts.total}"
        line += f" ({zones})" if len(status.zones) > 1 else ""
        if counts.unavailable:
            line += f", {counts.unavailable} more tainted"
        lines.append(line)
        lines += _pool_detail(name, [pools[k] for k in availability.class_pools(name) if k in pools])
    return lines


def _pool_detail(name: str, members: Iterable[PoolStatus]) -> list[str]:
    """Over class ``name``'s pools: the shared counters with nothing left, on how many nodes, and
    the consumable capacity left."""
    exhausted: dict[str, set[str]] = {}
    capacity: dict[str, tuple[Quantity, Quantity]] = {}
    for pool in members:
        for counter_set in pool.counter_sets:
            for counter, c in counter_set.counters:
                if c.available.sign() <= 0:
                    exhausted.setdefault(counter, set()).add(pool.node or f"pool {pool.pool}")
        for cap in pool.shareable.capacity if pool.shareable is not None else ():
            free, total = capacity.get(cap.name, (ZERO, ZERO))
            capacity[cap.name] = (free.add(cap.available), total.add(cap.total))
    lines = [
        f"counters {counter} of class {name}: exhausted on {_plural(len(where), 'node')}"
        for counter, where in sorted(exhausted.items())
    ]
    return lines + [
        f"capacity {cap} of class {name}: {free} free of {total}"
        for cap, (free, total) in sorted(capacity.items())
    ]


def _quota_uses(found: Headroom) -> list[QuotaUse]:
    """Each folded quota's hard limits and what is used of them after the copies."""
    extra = add_lists(found.ledger, found.usage)
    uses = []
    for quota in sorted((q for q in found.quotas if folded(q)), key=lambda q: q.name):
        hard = hard_of(quota)
        status = (quota.status.used if quota.status is not None else None) or {}
        used = {k: add_lists(*({k: q} for q in (status.get(k), extra.get(k)) if q is not None)) for k in hard}
        uses.append(
            QuotaUse(
                name=quota.name,
                hard={k: str(v) for k, v in sorted(hard.items())},
                used={k: str(u.get(k, ZERO)) for k, u in sorted(used.items())},
            )
        )
    return uses


def _limit(stop: Stop, answer: PodAnswer | None, detail: list[str], quotas: list[QuotaUse]) -> Limit:
    """``answer``: the dry run's answer for the copy that fits nowhere (a Scheduler stop)."""
    if answer is not None:
        return Limit(
            by="Scheduler",
            message=stop.message,
            reason=answer.reason,
            detail=detail,
            nominated=answer.nominated,
            victims=answer.victims,
        )
    refusing = next((q for q in quotas if stop.exceeded and q.name == stop.exceeded.quota), None)
    return Limit(by=stop.by, message=stop.message, detail=detail, quota=refusing)


def _zone(snapshot: Snapshot, node: str) -> str | None:
    found = snapshot.nodes.get(node)
    return found.labels.get(ZONE_LABEL) if found is not None else None


def document(
    found: Headroom, limit: int | None, features: list[str], tally: Tally | None = None
) -> HeadroomAnswer:
    """The answer for a headroom run; ``tally`` counts the devices the copies left (a fresh one
    unless given)."""
    snapshot = found.snapshot
    per_node = Counter(found.nodes)
    zones: Counter[str] = Counter()
    nodes = []
    for node, copies in sorted(per_node.items(), key=lambda item: (-item[1], item[0])):
        zone = _zone(snapshot, node)
        zones[zone or ""] += copies
        nodes.append(NodeCopies(node=node, zone=zone, copies=copies))
    classes = requested_classes(found.pod, snapshot)
    detail = device_detail((tally or Tally()).of(snapshot), classes) if classes else []
    quotas = _quota_uses(found)
    answer = to_answer(found.stop.outcome, 0) if found.stop.outcome is not None else None
    return HeadroomAnswer(
        pod=found.pod.key,
        copies=len(found.nodes),
        max=limit,
        nodes=nodes,
        zones=[ZoneCopies(zone=z, copies=n) for z, n in sorted(zones.items(), key=lambda i: (-i[1], i[0]))],
        order=found.nodes,
        limit=_limit(found.stop, answer, detail, quotas),
        charge={k: str(v) for k, v in sorted(found.charge.items())} if found.charge is not None else None,
        quotas=quotas,
        not_checked=answer.not_checked if answer is not None else [],
        features=features,
    )
