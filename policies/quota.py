"""Quota arithmetic for DRA: what claims and pods are charged, the usage ledger, the quota check.

Upstream charges a ResourceClaim to quota when the claim object is created (per-class device
counts, ``pkg/quota/v1/evaluator/core/resource_claims.go``, dra-reference 6.1), and a pod for its
containers' requests; the CPU, memory and hugepages that *devices* yield (KEP-5517) are charged to
nobody in 1.36/1.37. draguard folds that footprint into the namespace's ResourceQuotas:

* a claim's **charge** is, for every pod it is reserved for, what the claim adds to that pod's
  upstream ``PodRequests``/``PodLimits`` (so pod-level resources, which absorb DRA amounts, and
  undeclared limits are honoured), expressed in quota names (``requests.cpu``, ``cpu``,
  ``limits.cpu``, ``requests.hugepages-2Mi``...);
* the **ledger** keeps those charges by namespace and claim uid. Offline it is recomputed from the
  snapshot; the webhook keeps it in the API server (``webhook/ledger.py``) so replicas agree;
* **usage** for a quota key is the quota's ``status.used`` (upstream's own charges) plus the ledger;
* the check mirrors upstream's ResourceQuota admission (``apiserver/pkg/admission/plugin/
  resourcequota/controller.go``): only keys the quota limits and the request raises are compared,
  quotas in name order, the first one exceeded is reported in upstream's wording.

Quotas with ``scopes`` or a ``scopeSelector`` are not folded: their scopes select pods by fields
(priority class, termination, QoS) that a claim does not have.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Protocol

from policies.answer import Answer
from policies.api.core import Pod, ResourceQuota
from policies.api.quantity import Quantity
from policies.api.resource import ALL, EXACT_COUNT, Device, DeviceClaim, DeviceClass, ResourceClaim
from policies.footprint import (
    HUGEPAGES_PREFIX,
    ClaimUse,
    DeviceKey,
    ResourceList,
    add_lists,
    claim_footprint,
    difference,
    pod_limits,
    pod_requests,
    referencing_containers,
)
from policies.scheduler.podinfo import Key, PodInfo
from policies.snapshot import Snapshot

# Upstream quota names (core/v1 types.go; the pod evaluator in pkg/quota/v1/evaluator/core/pods.go).
STANDARD = ("cpu", "memory", "ephemeral-storage")
CLAIM_COUNT = "count/resourceclaims.resource.k8s.io"
DEVICES_SUFFIX = ".deviceclass.resource.k8s.io/devices"
EXTENDED_CLASS_PREFIX = "requests.deviceclass.resource.kubernetes.io/"
# AllocationResultsMaxSize: what an ``All`` request is charged, its worst case.
ALL_DEVICES = 32

Charge = Mapping[str, Quantity]
"""Amounts by quota name (``requests.cpu``)."""


def requests_keys(requests: ResourceList) -> dict[str, Quantity]:
    """Pod requests under the quota names upstream charges them to: ``cpu`` and ``requests.cpu``,
    and ``requests.hugepages-<size>`` (extended resources are upstream's and not DRA's)."""
    out: dict[str, Quantity] = {}
    for name, amount in requests.items():
        if name in STANDARD:
            out[name] = amount
            out[f"requests.{name}"] = amount
        elif name.startswith(HUGEPAGES_PREFIX):
            out[f"requests.{name}"] = amount
    return out


def limits_keys(limits: ResourceList) -> dict[str, Quantity]:
    return {f"limits.{name}": amount for name, amount in limits.items() if name in STANDARD}


def pod_charge(pod: Pod, uses: Sequence[ClaimUse]) -> dict[str, Quantity]:
    """Everything a pod with these claims is charged, its containers included."""
    return add_lists(requests_keys(pod_requests(pod, uses)), limits_keys(pod_limits(pod, uses)))


def dra_charge(pod: Pod | None, use: ClaimUse) -> dict[str, Quantity]:
    """What one claim adds to one pod's charge (the difference DRA makes). A pod draguard does
    not know is taken as a bare pod: mapped and per-pod amounts, no limits."""
    bare = pod or Pod()
    more = add_lists(requests_keys(pod_requests(bare, [use])), limits_keys(pod_limits(bare, [use])))
    less = add_lists(requests_keys(pod_requests(bare)), limits_keys(pod_limits(bare)))
    return difference(more, less)


def _pod_claim_containers(pod: PodInfo, claim: ResourceClaim) -> tuple[str, ...]:
    """The pod's containers that use the claim object, through any of the pod's claim names."""
    return tuple(
        container
        for pod_claim, name in pod.claims
        if name == claim.name
        for container in referencing_containers(pod.shape, pod_claim)
    )


def claim_charge(
    claim: ResourceClaim, devices: Mapping[DeviceKey, Device], pods: Mapping[Key, PodInfo]
) -> dict[str, Quantity]:
    """The claim's charge: its footprint for each pod in ``reservedFor``; nothing while no pod uses it."""
    if claim.status is None or claim.status.allocation is None:
        return {}
    footprint = claim_footprint(claim.status.allocation, devices)
    if footprint.is_empty:
        return {}
    charges = []
    for ref in claim.status.reserved_for or ():
        if ref.resource != "pods" or ref.api_group:
            continue
        pod = pods.get((claim.namespace, ref.name))
        containers = _pod_claim_containers(pod, claim) if pod is not None else ()
        charges.append(dra_charge(pod.shape if pod is not None else None, ClaimUse(footprint, containers)))
    return add_lists(*charges)


def _class_counts(mode: str | None, count: int | None) -> int:
    if mode in (None, EXACT_COUNT):
        return 1 if count is None else count
    return ALL_DEVICES if mode == ALL else 0


def claim_object_usage(devices: DeviceClaim, classes: Mapping[str, DeviceClass]) -> dict[str, Quantity]:
    """What upstream charges when the claim object is created: one claim, and devices per class
    (``All`` as 32; for firstAvailable each class's largest alternative, so "pick one" does not
    dodge quota); with DRAExtendedResource the same counts under the class's extended names."""
    per_class: dict[str, int] = {}
    for request in devices.requests or ():
        if request.exactly is not None:
            cls = request.exactly.device_class_name
            per_class[cls] = per_class.get(cls, 0) + _class_counts(request.exactly.allocation_mode,
                                                                    request.exactly.count)
            continue
        largest: dict[str, int] = {}
        for sub in request.first_available or ():
            n = _class_counts(sub.allocation_mode, sub.count)
            largest[sub.device_class_name] = max(largest.get(sub.device_class_name, 0), n)
        for cls, n in largest.items():
            per_class[cls] = per_class.get(cls, 0) + n
    usage = {CLAIM_COUNT: Quantity.from_int(1)}
    for cls, n in per_class.items():
        amount = Quantity.from_int(n)
        usage[f"{cls}{DEVICES_SUFFIX}"] = amount
        if cls in classes:
            usage[f"{EXTENDED_CLASS_PREFIX}{cls}"] = amount
            extended = classes[cls].spec.extended_resource_name
            if extended:
                usage[f"requests.{extended}"] = amount
    return usage


# --- the ledger ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ledger:
    """DRA charges by namespace, then by claim uid: what draguard adds to each namespace's usage."""

    charges: Mapping[str, Mapping[str, Charge]] = field(default_factory=dict)

    def namespace(self, namespace: str) -> Mapping[str, Charge]:
        return self.charges.get(namespace, MappingProxyType({}))

    def usage(self, namespace: str) -> dict[str, Quantity]:
        return add_lists(*self.namespace(namespace).values())

    def charged(self, namespace: str, uid: str) -> Charge:
        return self.namespace(namespace).get(uid, MappingProxyType({}))

    def usage_beside(self, namespace: str, shown: Ledger, own: str) -> dict[str, Quantity]:
        """The namespace's usage with every claim but ``own`` counted at the larger of its charge
        here and in ``shown``, what the snapshot shows the claims hold.

        The ledger records a release when the webhook admits it, before the API server stores it;
        a release the API server then fails to store (it restarted mid-request, another webhook
        denied it) left the claim reserved and its charge gone, and new reservations overcommitted
        the quota until reconcile (issue 25's soak, around a kube-apiserver restart). The snapshot
        shows only what was stored, so the larger of the two never counts less than the truth once
        either has seen it; a fresh charge the snapshot has not seen yet is the ledger's."""
        mine, theirs = self.namespace(namespace), shown.namespace(namespace)
        return add_lists(
            *(
                mine.get(uid) or {} if uid == own else _upper(mine.get(uid), theirs.get(uid))
                for uid in mine.keys() | theirs.keys()
            )
        )

    def with_charge(self, namespace: str, uid: str, charge: Charge) -> Ledger:
        """The ledger with the claim's charge replaced (removed when empty)."""
        entries = dict(self.namespace(namespace))
        if charge:
            entries[uid] = MappingProxyType(dict(charge))
        else:
            entries.pop(uid, None)
        charges = dict(self.charges)
        charges[namespace] = MappingProxyType(entries)
        return Ledger(MappingProxyType(charges))

    @classmethod
    def of(cls, namespace: str, charges: Mapping[str, Charge]) -> Ledger:
        """A ledger holding one namespace's charges (empty charges left out)."""
        entries = {uid: MappingProxyType(dict(c)) for uid, c in charges.items() if c}
        return cls(MappingProxyType({namespace: MappingProxyType(entries)}))

    @classmethod
    def compute(
        cls,
        claims: Iterable[ResourceClaim],
        devices: Mapping[DeviceKey, Device],
        pods: Mapping[Key, PodInfo],
        memo: ChargeMemo | None = None,
    ) -> Ledger:
        """The charges as they should be: every allocated claim's charge from its reservedFor."""
        charged = memo.charge if memo is not None else claim_charge
        charges: dict[str, dict[str, Charge]] = {}
        for claim in claims:
            uid = claim.metadata.uid
            charge = charged(claim, devices, pods)
            if charge and uid:
                charges.setdefault(claim.namespace, {})[uid] = MappingProxyType(charge)
        return cls(MappingProxyType({ns: MappingProxyType(c) for ns, c in charges.items()}))


class ChargeMemo:
    """Claims' charges kept by the objects they were worked out from: the claim, its reserved pods'
    records and the device index, all immutable and shared by successive snapshots. A claim's
    charge costs a third of a millisecond (footprints in exact quantities), and the quota rule
    needs every reserved claim's of a namespace on each check: 65 ms for 200 claims, each time.
    Forgotten whole when the device index changes; the claims a snapshot no longer holds as they
    were, by :meth:`forget_outside`."""

    # Claims remembered beyond twice the snapshot's before the others are looked for.
    SLACK = 1_000

    def __init__(self) -> None:
        self._devices: object = None
        self._known: dict[int, tuple[ResourceClaim, tuple[PodInfo | None, ...], dict[str, Quantity]]] = {}

    def forget_outside(self, claims: Mapping[Key, ResourceClaim]) -> None:
        """Forget the claims ``claims`` (a snapshot's) no longer holds as they were (deleted, or
        updated since) once twice as many as it holds are remembered. Each one remembered keeps
        its claim object alive: every reservation and allocation makes a new one, and where slices
        seldom change (the device index with them) nothing else would ever let them go."""
        if len(self._known) <= 2 * len(claims) + self.SLACK:
            return
        self._known = {
            key: known
            for key, known in list(self._known.items())  # copied at once: checks run on threads
            if claims.get((known[0].namespace, known[0].name)) is known[0]
        }

    def charge(
        self, claim: ResourceClaim, devices: Mapping[DeviceKey, Device], pods: Mapping[Key, PodInfo]
    ) -> dict[str, Quantity]:
        if devices is not self._devices:
            self._known, self._devices = {}, devices
        refs = claim.status.reserved_for if claim.status is not None else None
        users = tuple(pods.get((claim.namespace, r.name)) for r in refs or ())
        known = self._known.get(id(claim))
        if known is not None and known[0] is claim and _same(known[1], users):
            return known[2]
        charge = claim_charge(claim, devices, pods)
        self._known[id(claim)] = (claim, users, charge)
        return charge


def _same(a: tuple[object, ...], b: tuple[object, ...]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))


def _upper(a: Charge | None, b: Charge | None) -> Charge:
    """The per-key maximum of two charges (a missing key counts as 0)."""
    if not a or not b:
        return a or b or {}
    return {k: a[k] if k not in b or (k in a and a[k].cmp(b[k]) >= 0) else b[k] for k in a.keys() | b.keys()}


# --- the check ------------------------------------------------------------------------------------


def pretty(resources: Mapping[str, Quantity]) -> str:
    """upstream prettyPrint: ``name=value`` sorted by name, comma separated."""
    return ",".join(f"{name}={resources[name]}" for name in sorted(resources))


def folded(quota: ResourceQuota) -> bool:
    """Quotas draguard charges: the unscoped ones."""
    return not quota.spec.scopes and quota.spec.scope_selector is None


def hard_of(quota: ResourceQuota) -> Mapping[str, Quantity]:
    """``status.hard`` as upstream reads it; ``spec.hard`` until the quota controller has synced."""
    status = quota.status.hard if quota.status is not None else None
    return status if status is not None else (quota.spec.hard or {})


@dataclass(frozen=True)
class Exceeded:
    quota: str
    requested: Mapping[str, Quantity]
    used: Mapping[str, Quantity]
    hard: Mapping[str, Quantity]

    def message(self) -> str:
        return (
            f"exceeded quota: {self.quota}, requested: {pretty(self.requested)}, used: {pretty(self.used)}, "
            f"limited: {pretty(self.hard)}"
        )


def first_exceeded(
    quotas: Iterable[ResourceQuota], requested: Charge, ledger_usage: Charge
) -> Exceeded | None:
    """The first quota (by name) that ``requested`` on top of the usage would exceed."""
    for quota in sorted((q for q in quotas if folded(q)), key=lambda q: q.name):
        hard = hard_of(quota)
        asked = {k: v for k, v in requested.items() if k in hard}
        status_used = (quota.status.used if quota.status is not None else None) or {}
        used = {k: _plus(status_used.get(k), ledger_usage.get(k)) for k in asked}
        over = [k for k, v in asked.items() if used[k].add(v).cmp(hard[k]) > 0]
        if over:
            return Exceeded(
                quota.name,
                {k: asked[k] for k in over},
                {k: used[k] for k in over},
                {k: hard[k] for k in over},
            )
    return None


def _plus(a: Quantity | None, b: Quantity | None) -> Quantity:
    zero = Quantity.from_int(0)
    return (a or zero).add(b or zero)


def smallest(charges: Sequence[Charge]) -> dict[str, Quantity]:
    """The per-key minimum of several candidate charges (a key missing from one counts as 0): a
    lower bound on what the pod needs wherever it lands, so a denial on it is never premature."""
    if not charges:
        return {}
    keys = set(charges[0]).intersection(*charges[1:])
    return {k: min(c[k] for c in charges) for k in sorted(keys)}


ChargeCheck = Callable[[Ledger], Exceeded | None]
"""Given the current ledger, the quota problem a new charge would cause (None: charge it)."""


def folded_quotas(snapshot: Snapshot, namespace: str) -> list[ResourceQuota]:
    """The namespace's quotas that DRA footprints are charged to (unscoped ones)."""
    return [q for q in snapshot.namespace_quotas(namespace) if folded(q)]


def quota_namespaces(snapshot: Snapshot) -> list[str]:
    """Namespaces with a quota draguard folds into: the only ones whose ledger matters."""
    return sorted({q.namespace for q in snapshot.quotas if folded(q)})


def snapshot_ledger(
    snapshot: Snapshot, namespace: str | None = None, memo: ChargeMemo | None = None
) -> Ledger:
    """The DRA charges as the snapshot shows them, of one namespace or of all: the ledger offline,
    the prediction base on pod create, what the shared ledger is reconciled to, and the seed of
    the in-memory one (``serve --state``)."""
    if not snapshot.devices.yield_node_resources:
        return Ledger()  # every charge is a footprint of node-allocatable resources: none here
    if namespace is None:
        return Ledger.compute(snapshot.allocated_claims(), snapshot.devices, snapshot.pods, memo)
    claims = snapshot.claims.namespace(namespace).values()
    allocated = (c for c in claims if c.status is not None and c.status.allocation is not None)
    return Ledger.compute(allocated, snapshot.devices, snapshot.pods, memo)


class LedgerUnavailable(Exception):
    """The shared ledger could not be read or written (API server unreachable, conflicts)."""


class LedgerStore(Protocol):
    """Where the webhook keeps the ledger shared by replicas (``webhook/ledger.py``).

    ``charge`` reads the namespace's ledger, asks ``check`` and, if it passes, writes the claim's new
    charge with optimistic concurrency, retrying with a fresh ledger on conflict; it returns the
    problem that stopped it, or None once charged. Raises :class:`LedgerUnavailable`, also when no
    write could land before ``deadline`` (the webhook's answer, see ``Context.deadline``). A charge
    written (or perhaps written) for an ``answer`` settled without admitting the request is taken
    back (:mod:`policies.answer`), and one not yet written when it is settled so is never written.
    """

    def charge(
        self,
        namespace: str,
        uid: str,
        charge: Charge,
        check: ChargeCheck,
        deadline: float | None = None,
        answer: Answer | None = None,
    ) -> Exceeded | None: ...


class MemoryLedgerStore:
    """The ledger kept in this process, for a webhook without an API server to share it through
    (``serve --state``): seeded with the charges of the allocated claims, it then records what the
    quota rule admits, so that reservations between two snapshots cannot overcommit a quota."""

    def __init__(self, ledger: Ledger | None = None) -> None:
        self.ledger = ledger or Ledger()
        self._lock = threading.Lock()

    def charge(
        self,
        namespace: str,
        uid: str,
        charge: Charge,
        check: ChargeCheck,
        deadline: float | None = None,
        answer: Answer | None = None,
    ) -> Exceeded | None:
        """As :class:`LedgerStore` says; in memory a charge is recorded at once, so ``deadline`` is
        never in the way."""
        with self._lock:
            problem = check(self.ledger)
            if problem is not None:
                return problem
            before = self.ledger.charged(namespace, uid)
            self.ledger = self.ledger.with_charge(namespace, uid, charge)
            written = self.ledger.charged(namespace, uid)
        if answer is not None:
            answer.unless_admitted(lambda: self._undo(namespace, uid, before, written))
        return None

    def _undo(self, namespace: str, uid: str, before: Charge, written: Charge) -> None:
        """Put back the charge that ``written`` replaced, unless a later charge replaced it since
        (a charge is known by its identity, a release by the claim being uncharged still)."""
        with self._lock:
            now = self.ledger.charged(namespace, uid)
            if now is written or not (now or written):
                self.ledger = self.ledger.with_charge(namespace, uid, before)
