"""Rule ``quota``: charge the node resources that DRA devices yield to the namespace's quotas.

Upstream charges neither the CPU, memory nor hugepages a claim's devices hand out (KEP-5517) to any
ResourceQuota, so a namespace limited to 12 CPUs can hold a pod of 1 CPU whose CPU-driver claim
pins 64 more. This rule closes that gap (arithmetic in :mod:`policies.quota`):

* **ResourceClaim status update** (``resourceclaims/status`` UPDATE): when the scheduler writes an
  allocation and reserves the claim for a pod, the actual devices are known; their footprint for
  each consumer pod is the claim's charge. The increase must fit every unscoped quota of the
  namespace, on top of ``status.used`` and the ledger of DRA charges. Behind the webhook the charge
  is recorded in the shared ledger in the same step (optimistic concurrency, see
  ``webhook/ledger.py``), so two replicas cannot both admit the last CPU. A claim released by its
  pods, deallocated or deleted releases its charge (a DELETE that finalizers only mark does not:
  the claim still holds its devices).
* **Pod CREATE**: the pod's claims are allocated in a dry run on every node of the snapshot; the
  smallest footprint any node gives (per quota key), plus the pod's own requests and the device
  counts upstream will charge for the claims its templates create, must fit. A pod that can never
  fit its quota is refused at once instead of waiting forever in Pending.

Messages carry upstream's quota wording (``exceeded quota: <name>, requested: ..., used: ...,
limited: ...``) so that people and tools that know the one recognise the other.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from policies.api.core import Pod, ResourceQuota
from policies.api.quantity import Quantity
from policies.api.resource import ResourceClaim
from policies.dryrun import ClaimNotFoundError, Costs, DryRun, FeatureGates, Prepared, Question, pod_claims
from policies.footprint import (
    FootprintError,
    add_lists,
    difference,
)
from policies.quota import (
    STANDARD,
    Charge,
    ChargeMemo,
    Exceeded,
    Ledger,
    LedgerStore,
    LedgerUnavailable,
    claim_charge,
    claim_object_usage,
    first_exceeded,
    folded_quotas,
    hard_of,
    pod_charge,
    smallest,
    snapshot_ledger,
)
from policies.rules.common import a_few, object_key
from policies.rules.engine import Context, Finding, Request, RuleUnavailable
from policies.snapshot import Snapshot


def _node_key(key: str) -> bool:
    """Quota keys that node-allocatable footprints are charged to."""
    name = key.removeprefix("requests.").removeprefix("limits.")
    return name in STANDARD or (key.startswith("requests.") and name.startswith("hugepages-"))


class QuotaRule:
    """Deny claim reservations and pods whose node-allocatable footprint exceeds a quota.

    ``store`` is the ledger shared by webhook replicas; without one (offline commands, tests) the
    ledger is recomputed from the snapshot and nothing is recorded.
    """

    name = "quota"
    mutating = False

    def __init__(self, store: LedgerStore | None = None) -> None:
        self.store = store
        self._charges = ChargeMemo()
        self._shown: tuple[Snapshot, str, Ledger] | None = None
        self._prepared: Prepared | None = None
        self._dry_runs = threading.Lock()

    def applies(self, request: Request, ctx: Context) -> bool:
        if request.kind == "Pod":
            return (
                request.operation == "CREATE"
                and not request.sub_resource
                and isinstance(request.obj, Pod)
                and bool(request.obj.spec.resource_claims)
            )
        if request.resource != "resourceclaims":
            return False
        if request.operation == "DELETE":
            return self.store is not None and not _outlives_delete(request.old)
        return request.sub_resource == "status" and request.operation == "UPDATE"

    def costly(self, request: Request, ctx: Context) -> bool:
        # With a quota to fold: a dry run over every node on pod create, a ledger write on reservation.
        return bool(folded_quotas(ctx.snapshot, request.namespace))

    def check(self, request: Request, ctx: Context) -> Sequence[Finding]:
        stale = not ctx.snapshot_fresh and not _releases(request)
        if stale and folded_quotas(ctx.snapshot, request.namespace):
            raise RuleUnavailable("the cluster snapshot is stale: the namespace's quota usage is unknown")
        try:
            if isinstance(request.obj, Pod):
                return self._pod_findings(request.obj, ctx.snapshot)
            return self._claim_findings(request, ctx)
        except FootprintError as err:
            raise RuleUnavailable(str(err)) from None
        except LedgerUnavailable as err:
            raise RuleUnavailable(f"the DRA quota ledger is unavailable: {err}") from None

    def _pod_findings(self, pod: Pod, snapshot: Snapshot) -> list[Finding]:
        quotas = folded_quotas(snapshot, pod.namespace)
        if not quotas:
            return []
        try:
            claims = pod_claims(snapshot, pod)
        except ClaimNotFoundError:
            return []  # a missing claim or template: the pod waits for it, nothing to charge yet
        used = self._shown_in(snapshot, pod.namespace).usage(pod.namespace)
        if first_exceeded(quotas, pod_charge(pod, []), used) is not None:
            return []  # over quota without any device: upstream's quota admission says so itself
        created = [c for c in claims if (c.namespace, c.name) not in snapshot.claims]
        counts = add_lists(*(claim_object_usage(c.spec.devices, snapshot.classes) for c in created))
        footprint, node = self._smallest_footprint(pod, snapshot, quotas, used)
        exceeded = first_exceeded(quotas, add_lists(footprint, counts), used)
        if exceeded is None:
            return []
        where = f" on any node where its claims fit ({node})" if node else ""
        return [Finding("deny", (
            f"pod {object_key(pod)} can never fit its namespace's quota{where}, counting the "
            "node-allocatable resources of its DRA devices and the devices of the claims its templates "
            f"create: {exceeded.message()}"
        ))]

    def _smallest_footprint(
        self, pod: Pod, snapshot: Snapshot, quotas: Sequence[ResourceQuota], used: Charge
    ) -> tuple[dict[str, Quantity], str]:
        """The pod's charge with its claims allocated, at its smallest over the nodes where the
        scheduler would fit it (the dry run), and which nodes gave it; nothing when no quota limits
        node resources, no device yields any (the pod's own requests are then upstream's business
        alone) or no node fits."""
        if not any(_node_key(k) for q in quotas for k in hard_of(q)):
            return {}, ""
        if not snapshot.devices.yield_node_resources:
            return {}, ""  # every footprint would be zero: spare the dry run
        with self._dry_runs:  # a Prepared is not for several threads at once
            prepared = self._prepare(snapshot)
            outcome = DryRun(prepared).outcome(Question(pod))
            costs = Costs.of(pod, outcome.dra.claims, snapshot, prepared.inventory, used)
            candidates: list[Charge] = []
            nodes = []
            for verdict in sorted(outcome.fitting, key=lambda v: v.node):
                try:
                    uses = costs.uses(outcome.dra.results(verdict.node))
                except FootprintError:
                    continue  # the scheduler cannot place the pod there either
                candidates.append(pod_charge(pod, uses))
                nodes.append(verdict.node)
        return smallest(candidates), a_few(nodes)

    def _prepare(self, snapshot: Snapshot) -> Prepared:
        """The dry run's preparation of ``snapshot``, made once per snapshot, with the selector
        verdicts of the previous one carried over (by slice generation). In a burst of pods (a
        Job's 200) most creations meet a snapshot another one prepared, and all of them the same
        devices: preparing the snapshot and evaluating the class's selector on every device each
        time was most of a pod's check (12 of 20 ms at 16 nodes of 64 cores and 1,000 pods)."""
        prepared = self._prepared
        if prepared is None:
            prepared = Prepared.of(snapshot, FeatureGates())
        elif prepared.snapshot is not snapshot:
            prepared = prepared.after(snapshot)
        self._prepared = prepared
        return prepared

    def _shown_in(self, snapshot: Snapshot, namespace: str) -> Ledger:
        """What the snapshot shows the namespace's claims hold, once per snapshot and namespace: a
        burst of reservations in one namespace mostly meets the snapshot the one before met."""
        last = self._shown
        if last is not None and last[0] is snapshot and last[1] == namespace:
            return last[2]
        if last is None or last[0] is not snapshot:
            self._charges.forget_outside(snapshot.claims)
        shown = snapshot_ledger(snapshot, namespace, self._charges)
        self._shown = (snapshot, namespace, shown)
        return shown

    def _claim_findings(self, request: Request, ctx: Context) -> list[Finding]:
        snapshot = ctx.snapshot
        devices = snapshot.devices
        new = request.obj if isinstance(request.obj, ResourceClaim) else None
        old = request.old if isinstance(request.old, ResourceClaim) else None
        claim = new or old
        if claim is None or not claim.metadata.uid:
            return []
        charge = claim_charge(new, devices, snapshot.pods) if new is not None else {}
        if old is not None and new is not None and claim_charge(old, devices, snapshot.pods) == charge:
            return []  # a status write that changes no charge (device conditions, ...)
        quotas = folded_quotas(snapshot, claim.namespace)
        if not quotas:
            return []  # nothing to enforce; reconcile fills the ledger if a quota comes later
        namespace, uid = claim.namespace, claim.metadata.uid
        shown = self._shown_in(snapshot, namespace)

        def problem(ledger: Ledger) -> Exceeded | None:
            requested = difference(charge, ledger.charged(namespace, uid))
            if not requested:
                return None
            return first_exceeded(quotas, requested, ledger.usage_beside(namespace, shown, uid))

        if self.store is not None and not request.dry_run:
            ctx.waiting_on_api()  # the rest is the ledger's read and write
            try:
                exceeded = self.store.charge(namespace, uid, charge, problem, ctx.deadline, ctx.answer)
            except LedgerUnavailable:
                if charge and not _releases(request):
                    raise
                return []  # a release cannot overcommit: the next reconcile drops the charge
        else:
            exceeded = problem(shown)
        if exceeded is None or new is None:
            return []
        return [Finding("deny", (
            f"claim {claim.key} cannot be reserved for {_consumers(new)}: draguard charges the "
            f"node-allocatable resources of its devices to the namespace's quota, and {exceeded.message()}"
        ))]


def _outlives_delete(claim: object) -> bool:
    """Whether a DELETE only marks the claim: with finalizers the API server sets its
    deletionTimestamp and keeps it (``staging/src/k8s.io/apiserver/pkg/registry/generic/registry/
    store.go``, graceful deletion with pending finalizers). An allocated claim carries the
    scheduler's ``resource.kubernetes.io/delete-protection``, so the garbage collector's DELETE of a
    deleted pod's claim leaves it reserved for that pod, its devices held, until the resourceclaim
    controller clears ``reservedFor``: that status write releases the charge. Releasing it at the
    DELETE let new reservations overcommit the quota for those seconds (issue 25's soak)."""
    return isinstance(claim, ResourceClaim) and bool(claim.metadata.finalizers)


def _releases(request: Request) -> bool:
    """Whether the request can only take a charge away (the claim deleted, deallocated, used by no
    pod, or by fewer of the pods it was reserved for with the same allocation, as the resourceclaim
    controller writes when one of a shared claim's pods is gone): such a request is never refused
    for want of a ledger or a fresh snapshot, because it cannot overcommit anything; reconcile
    catches up with it."""
    claim = request.obj
    if request.operation == "DELETE":
        return True
    if not isinstance(claim, ResourceClaim):
        return False
    status = claim.status
    if status is None or status.allocation is None or not status.reserved_for:
        return True
    before = request.old.status if isinstance(request.old, ResourceClaim) else None
    return (
        before is not None
        and before.allocation == status.allocation
        and {r.uid for r in status.reserved_for} <= {r.uid for r in before.reserved_for or ()}
    )


def _consumers(claim: ResourceClaim) -> str:
    refs = (claim.status.reserved_for or []) if claim.status is not None else []
    ns = claim.namespace
    return a_few([f"{'pod' if r.resource == 'pods' else r.resource} {ns}/{r.name}" for r in refs])
