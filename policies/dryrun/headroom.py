"""How many more copies of a pod fit, where they would go, and what stops the next one.

Copies of the pod (new pods with its spec, ``<name>-copy-<n>``) are placed one after another as
consecutive scheduling cycles place them: each on its best-scored node (the first of equals in
node order, as ``allocate --sequence``), each seeing what the previous ones took: their devices,
their requests, their ports. It stops at the first copy that

* the namespace's ResourceQuotas refuse, counted as the API server's quota admission counts a pod
  and its template claims, with the DRA footprint draguard's quota rule folds in (the quotas'
  ``status.used`` plus what the copies before were charged): a pod's creation is refused before
  the scheduler sees it, so a quota stops a copy first;
* fits nowhere: then the answer is that copy's scheduling attempt, in the scheduler's words, from
  the dry run itself (:class:`DryRun`, so PostFilter, preemption and the message are its);
* or at the maximum asked for, or the caller's deadline.

Speed: a cluster of 5,000 nodes takes 20,000 one-GPU copies. Rebuilding the cluster, the
allocator and every node's verdict per copy would cost hours; instead a cycle filters again only
the nodes the last placement changed, and keeps the others' verdicts, results and scores
(:class:`~policies.dryrun.board.Board`). That is exact when nothing a placement changes reaches
another node, which holds unless the pod counts pods across nodes (topology spread constraints,
inter-pod affinity of its own), names an existing claim (shared by the copies), the cluster has
nominated pods, or a placement takes devices of a pool other nodes reach (network-attached
devices, a pool name shared by drivers with counters): then every node is filtered again after
each placement, as the plain path would. The allocator and the cluster take each placement in
place (``Allocator.growing``, ``Cluster.growing``); the snapshot gets the copies' claims and
pods once at the end (when the copies read nothing of each other's objects). Tests compare every
placement with the plain path (``place`` and a new :class:`Prepared` per copy).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from policies.allocator import AllocatedState, SearchBudget
from policies.api.core import Pod, ResourceQuota
from policies.api.quantity import Quantity
from policies.api.resource import AllocationResult, ResourceClaim, ResourceSlice
from policies.dryrun.board import Board
from policies.dryrun.costs import Costs
from policies.dryrun.run import DryRun, Outcome, Prepared, Question, placed
from policies.footprint import add_lists
from policies.quota import Exceeded, first_exceeded
from policies.scheduler import profile
from policies.scheduler.cluster import Cluster, NodeInfo
from policies.scheduler.dynamicresources import DynamicResources
from policies.scheduler.framework import FITTING, Cycle, ScorePart
from policies.scheduler.podinfo import PodInfo, claim_names
from policies.scheduler.profile import Attempt, Pace, Unpaced
from policies.snapshot import Snapshot

SCHEDULER, QUOTA, MAX, DEADLINE, FOOTPRINT = "Scheduler", "Quota", "Max", "Deadline", "Footprint"
# What the API server's quota admission charges every pod besides its requests (upstream
# pkg/quota/v1/evaluator/core/pods.go: the pods count and the object count).
POD_COUNTS = {"pods": Quantity.from_int(1), "count/pods": Quantity.from_int(1)}

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class Stop:
    """What stops the next copy: ``by`` one of SCHEDULER (``outcome`` says how), QUOTA
    (``exceeded``), FOOTPRINT (its devices' node resources cannot be computed), MAX or DEADLINE."""

    by: str
    message: str
    outcome: Outcome | None = None
    exceeded: Exceeded | None = None


@dataclass
class Headroom:
    """The copies placed (their nodes, in order), what stopped the next one, and the cluster after
    them: ``snapshot`` with the copies' claims and pods; the namespace's folded quotas, the DRA
    charges already in its ledger, what the copies were charged in all (``usage``) and one copy's
    charge."""

    pod: Pod
    nodes: list[str]
    stop: Stop
    snapshot: Snapshot
    quotas: tuple[ResourceQuota, ...]
    ledger: Mapping[str, Quantity]
    usage: Mapping[str, Quantity]
    charge: Mapping[str, Quantity] | None


def copy_of(pod: Pod, n: int) -> Pod:
    """Copy ``n`` (1-based): the pod's spec under a name and uid of its own, with no status."""
    name = f"{pod.name}-copy-{n}"
    meta = pod.metadata.model_copy(update={"name": name, "uid": f"dryrun-{pod.namespace}-{name}"})
    return pod.model_copy(update={"metadata": meta, "status": None})


def pool_reach(slices: Iterable[ResourceSlice]) -> dict[tuple[str, str], str | None]:
    """Per pool, the one node whose devices it publishes, or None when its devices are for several
    nodes or by selector (a counter slice has no devices: it decides nothing)."""
    reach: dict[tuple[str, str], set[str | None]] = {}
    for s in slices:
        spec = s.spec
        if spec.shared_counters and not spec.devices:
            continue
        nodes = reach.setdefault((spec.driver, spec.pool.name), set())
        nodes.add(spec.node_name if spec.node_name and not spec.per_device_node_selection else None)
    return {pool: nodes.pop() if len(nodes) == 1 else None for pool, nodes in reach.items()}


def _counter_names_shared(slices: Iterable[ResourceSlice]) -> bool:
    """Whether a pool with shared counters has its name in use by another driver: the allocator keys
    counters by pool name within one scheduling cycle (upstream quirk), so which node a cycle
    searches first matters."""
    drivers: dict[str, set[str]] = {}
    counted: set[str] = set()
    for s in slices:
        drivers.setdefault(s.spec.pool.name, set()).add(s.spec.driver)
        if s.spec.shared_counters:
            counted.add(s.spec.pool.name)
    return any(len(drivers[name]) > 1 for name in counted)


def _node_local(cycle: Cycle, parts: Sequence[ScorePart], snapshot: Snapshot) -> bool:
    """Whether placing this pod on a node changes nothing another node's verdict or score reads
    (see the module docstring), as far as the pod and the cluster tell; each placement's devices
    are checked on their own."""
    pod, terms = cycle.pod, cycle.info.terms
    return (
        all(part.scope != FITTING for part in parts)
        and not pod.spec.topology_spread_constraints
        and (terms is None or not (terms.required_affinity or terms.required_anti_affinity))
        and not cycle.cluster.nominations
        and not any(ref.resource_claim_name for ref in pod.spec.resource_claims or ())
        and not _counter_names_shared(snapshot.slices)
    )


@dataclass
class _Placer:
    """The cluster as copies are placed (see the module docstring)."""

    prepared: Prepared
    budget: SearchBudget
    pace: Pace
    snapshot: Snapshot = field(init=False)
    cluster: Cluster = field(init=False)
    board: Board = field(init=False)
    local: bool | None = None
    dirty: set[str] | None = None  # the nodes to filter again (None: every node)
    results: dict[str, tuple[AllocationResult | None, ...]] = field(default_factory=dict)
    claims: list[ResourceClaim] = field(default_factory=list)
    pods: list[Pod] = field(default_factory=list)
    infos: list[PodInfo] = field(default_factory=list)
    template: PodInfo | None = None
    parts: list[ScorePart] | None = None  # the score parts every copy shares (see best)

    def __post_init__(self) -> None:
        self.snapshot = self.prepared.snapshot
        self.cluster = self.prepared.cluster.growing()
        self.allocator = self.prepared.allocator.growing()
        self.board = Board(self.cluster.positions)
        self.reach = pool_reach(self.snapshot.slices)

    def best(self, copy: Pod) -> tuple[str, DynamicResources] | None:
        """The node the copy goes to, and the cycle's DynamicResources (its claims); None when it
        fits nowhere, or the attempt failed or ran out of time (the dry run then says why)."""
        dra = DynamicResources(
            self.snapshot, self.allocator.fork(budget=self.budget), begin_node=self.pace.begin_node
        )
        cycle = Cycle(copy, self.cluster, self.prepared.gates, self._info(copy))
        positions = self.cluster.positions
        nodes = (
            self.cluster.nodes
            if self.dirty is None
            else [self.cluster.by_name[n] for n in sorted(self.dirty, key=positions.__getitem__)]
        )
        attempt = profile.run(cycle, profile.default_filters(dra), nodes, self.pace)
        if not _usable(attempt, dra, copy):
            return None
        parts = self.parts or profile.score_parts(cycle, dra)
        if self.local is None:
            self.local = _node_local(cycle, parts, self.snapshot)
        if self.local and not dra.has_alternatives():
            # Node-local parts read the pod and the node scored (or count once what placements do
            # not change): the first copy's serve them all; DRA scores are a cycle's own.
            self.parts = parts
        changed: dict[str, NodeInfo | None] = {}
        for verdict in attempt.verdicts:
            changed[verdict.node] = self.cluster.by_name[verdict.node] if verdict.fits else None
            if verdict.fits:
                self.results[verdict.node] = dra.results(verdict.node)
        self.board.update(parts, changed)
        node = self.board.best()
        return None if node is None else (node, dra)

    def place(self, copy: Pod, node: str, dra: DynamicResources) -> None:
        """The copy bound to ``node`` with the node's results."""
        results = self.results[node]
        claims, bound = placed(copy, dra.claims, results, dra.extended_index, node)
        info = self._info(bound)
        self.claims += claims
        self.pods.append(bound)
        self.infos.append(info)
        self.cluster = self.cluster.grow([self.cluster.by_name[node].with_pod(info)])
        self.allocator.add(r for r in results if r is not None)
        pools = {
            (d.driver, d.pool)
            for r in results
            if r is not None and r.devices
            for d in r.devices.results or ()
        }
        far = any(self.reach.get(pool) != node for pool in pools)
        if self.local and not far:
            self.dirty = {node}
        else:
            self.dirty = None
        if not self.local:
            self.after()

    def after(self) -> Snapshot:
        """The snapshot with every copy's claims and pods."""
        if self.claims or self.pods:
            self.snapshot = self.snapshot.with_claims_and_pods(self.claims, self.pods, self.infos)
            self.claims, self.pods, self.infos = [], [], []
        return self.snapshot

    def _info(self, copy: Pod) -> PodInfo:
        """The copy's record: the first copy's, under its own name, uid, node and claims (what
        the scheduler reads of a pod is computed once for them all)."""
        if self.template is None:
            self.template = PodInfo.of(copy)
        return replace(
            self.template,
            name=copy.name,
            uid=copy.metadata.uid or "",
            node_name=copy.spec.node_name or "",
            claims=claim_names(copy),
        )

    def outcome(self, copy: Pod) -> Outcome:
        """The dry run's attempt for the copy on the cluster as it is now."""
        snapshot = self.after()
        features = self.prepared.gates.allocator()
        state = AllocatedState.from_claims(snapshot.allocated_claims(), features)
        now = Prepared(
            snapshot, self.prepared.gates, self.allocator, self.cluster, state, self.prepared.cel_cache
        )
        return DryRun(now, budget=self.budget, pace=self.pace).outcome(Question(copy))

    def restart(self, outcome: Outcome, node: str) -> None:
        """Continue from the dry run's own placement (a claim it deallocated first, see DryRun):
        every node filtered again after each placement from then on."""
        dra = outcome.dra
        claims, bound = placed(outcome.question.pod, dra.claims, dra.results(node), dra.extended_index, node)
        self.prepared = outcome.prepared.after(outcome.snapshot.with_claims_and_pods(claims, [bound]))
        self.__post_init__()
        self.local, self.dirty, self.results, self.parts = False, None, {}, None


def _usable(attempt: Attempt, dra: DynamicResources, copy: Pod) -> bool:
    """Whether the attempt can be read node by node: complete, not aborted, binding possible."""
    if attempt.error is not None or not attempt.complete or attempt.prefilter is not None:
        return False
    return not any(v.fits for v in attempt.verdicts) or dra.binding_error(copy) is None


def headroom(
    prepared: Prepared,
    pod: Pod,
    *,
    limit: int | None = None,
    budget: SearchBudget | None = None,
    pace: Pace | None = None,
    progress: Progress | None = None,
) -> Headroom:
    """Place copies of ``pod`` until one does not fit, a quota refuses it, ``limit`` copies are
    placed or ``pace`` runs out (see the module docstring); ``progress`` hears of each placement
    when there is a ``limit`` to count towards."""
    pace = pace or Unpaced()
    placer = _Placer(prepared, budget or SearchBudget(), pace)
    nodes: list[str] = []
    costs: Costs | None = None
    used: dict[str, Quantity] = {}
    charge: Mapping[str, Quantity] | None = None
    while True:
        copy = copy_of(pod, len(nodes) + 1)
        if limit is not None and len(nodes) >= limit:
            stop = Stop(MAX, f"stopped after {limit} copies, as asked")
            break
        found = None if pace.over() else placer.best(copy)
        if found is None and pace.over():
            stop = Stop(DEADLINE, f"the deadline passed after {len(nodes)} copies: at least that many fit")
            break
        outcome = placer.outcome(copy) if found is None else None
        if outcome is not None and not outcome.fitting:
            stop = _unplaced(outcome, costs, used)
            break
        node, dra = (outcome.preferred()[0], outcome.dra) if outcome is not None else found  # type: ignore[misc]
        results = dra.results(node) if outcome is not None else placer.results[node]
        costs = costs or Costs.of(copy, dra.claims, prepared.snapshot, prepared.inventory)
        priced = costs.charge(results)
        if isinstance(priced, str):
            stop = Stop(FOOTPRINT, priced)
            break
        charge = add_lists(priced, POD_COUNTS)
        exceeded = None
        if costs.quotas:  # the usual namespace has none: no usage to sum per copy
            exceeded = first_exceeded(costs.quotas, charge, add_lists(costs.ledger_usage, used))
        if exceeded is not None:
            stop = Stop(QUOTA, _refusal(copy, dra.claims, exceeded), exceeded=exceeded)
            break
        used = add_lists(used, charge)
        if outcome is not None:
            placer.restart(outcome, node)
        else:
            placer.place(copy, node, dra)
        nodes.append(node)
        if progress is not None and limit is not None:
            progress(len(nodes), limit)
    return Headroom(
        pod=pod,
        nodes=nodes,
        stop=stop,
        snapshot=placer.after(),
        quotas=costs.quotas if costs is not None else (),
        ledger=costs.ledger_usage if costs is not None else {},
        usage=used,
        charge=charge,
    )


def _unplaced(outcome: Outcome, costs: Costs | None, used: Mapping[str, Quantity]) -> Stop:
    """The stop for a copy that fits nowhere: a quota refusing it without devices comes first
    (its creation is refused before the scheduler sees it), else the scheduler's attempt."""
    copy, claims = outcome.question.pod, outcome.dra.claims
    costs = costs or Costs.of(copy, claims, outcome.snapshot, outcome.prepared.inventory)
    bare = costs.charge([None] * len(claims))
    if not isinstance(bare, str):
        charge = add_lists(bare, POD_COUNTS)
        exceeded = first_exceeded(costs.quotas, charge, add_lists(costs.ledger_usage, used))
        if exceeded is not None:
            return Stop(QUOTA, _refusal(copy, claims, exceeded), exceeded=exceeded)
    return Stop(SCHEDULER, outcome.message, outcome=outcome)


def _refusal(copy: Pod, claims: Sequence[ResourceClaim], exceeded: Exceeded) -> str:
    """The API server's refusal, of the copy or, when only claim keys are exceeded, of the claim the
    resourceclaim controller creates from its template (named here without the random suffix)."""
    claim_keys = [
        k for k in exceeded.requested if k.startswith("count/resourceclaims") or ".deviceclass." in k
    ]
    if claim_keys and len(claim_keys) == len(exceeded.requested) and claims:
        return f'resourceclaims "{claims[0].name}" is forbidden: {exceeded.message()}'
    return f'pods "{copy.name}" is forbidden: {exceeded.message()}'
